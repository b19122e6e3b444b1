#!/usr/bin/python3
"""The shipped alert rules and dashboard against a real Prometheus (Debian's 2.42) scraping the
real erdma-webhook and erdma-agent, on loopback in a network namespace of the test's own.

The programs run as on a node, with what kubelet would be around the agent faked
(monitoring_fake_node: Registration, DevicePlugin calls, PodResources, CRI). Prometheus scrapes
them through the jobs of monitoring/prometheus/scrape-configs.yaml (their relabeling as shipped;
Kubernetes' pod discovery replaced by static targets carrying the labels it would give) and
evaluates monitoring/prometheus/erdma-controller.rules.yaml every second. The rules are the
shipped ones except for `for:`, which this copy sets to 3 s: the shipped 2 to 15 minutes would
make the test wait that long for each alert, and `for:` itself is covered by the promtool unit
tests (rules_test.yaml).

The test causes the faults one phase at a time and waits, on Prometheus' own API, until exactly
the expected alerts fire and stay firing for a few evaluations (pending ones included in "not
silent"):
  healthy   both programs up, agent registered, a valid certificate: nothing fires but
            ErdmaAgentDriverModeMismatch (the agent is told to want erdma's compat mode, which a
            test machine never has);
  faults    the webhook's certificate rotated to one with 10 days left, a pod refused, a body
            that is not an AdmissionReview, a client that does not trust the certificate, a
            garbage certificate file; an SMC-R pod on the host network (no RDMA netdev here: it
            will fall back), an SMC-R pod whose netns cannot be entered (its setup fails), and
            the kubelet gone (the agent is not registered);
  expiry    a certificate valid for 20 s rotated in and left to expire; the agent restarted with
            its device erdma_0 gone and erdma_1's port down (no source of real devices can lose
            one on a test machine, so the static device list changes across a restart on the
            same address: the same series the agent exports when a device disappears);
  down      the webhook stopped, then the agent.
Every alert of the rules fires in some phase. Besides: every metric the rules and the dashboard
name is in what the running programs export (scraped from them), and every dashboard query
parses and returns data from this Prometheus.

The exception is the DRA driver's series (erdma_agent_dra_*): the agent exports them only with
the DRA driver on, which needs an API server this test does not run. For them the test checks
that the agent exports none, that the dashboard's queries over them parse and return nothing,
and that the alerts over them (ErdmaDraPrepareSlow) stay silent in every phase; their names are
checked against the sources by test_rules.py, their labels by the agent's unit tests, and the
alert's firing by the promtool unit tests.

Needs root (the network namespace, and the agent's setns for SMC-R), Debian's prometheus and
/usr/bin/python3 with python3-yaml and python3-prometheus-client. About a minute.
"""

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import monitoring as mon  # noqa: E402

sys.path.insert(0, os.path.join(mon.SOURCE_DIR, "test/webhook/server/integration"))
import harness  # noqa: E402
from harness import Suite, expect  # noqa: E402

IN_NETNS = "ERDMA_MONITORING_NETNS"
WEBHOOK = os.environ.get("ERDMA_WEBHOOK", os.path.join(mon.SOURCE_DIR, "build/webhook/erdma-webhook"))
AGENT = os.environ.get("ERDMA_AGENT", os.path.join(mon.SOURCE_DIR, "build/agent/erdma-agent"))
FAKE_NODE = os.environ.get("ERDMA_FAKE_NODE", os.path.join(mon.SOURCE_DIR, "build/test/monitoring/monitoring_fake_node"))
# The namespace is the test's own: the production ports are free in it.
WEBHOOK_PORT, WEBHOOK_METRICS, AGENT_METRICS, PROMETHEUS_PORT = 8443, 8080, 9467, 9090
NS, NODE = "erdma-system", "test-node"
FOR_SECONDS = 3
DEADLINE = 60  # for each wait on Prometheus; a loaded 2-core machine gets it all


# --- processes -----------------------------------------------------------------------------------

class Proc:
    """A child with its log in the work directory, always reaped."""

    def __init__(self, name, args, workdir, stdin=None):
        self.name = name
        self.log_path = os.path.join(workdir, name + ".log")
        self.log = open(self.log_path, "ab")
        self.p = subprocess.Popen(args, stdin=stdin, stdout=subprocess.PIPE if stdin else self.log,
                                  stderr=self.log, text=bool(stdin))

    def alive(self):
        return self.p.poll() is None

    def stop(self, timeout=20):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=10)
        if not self.log.closed:
            self.log.close()
        return self.p.returncode


class FakeNode(Proc):
    def __init__(self, workdir, directory):
        super().__init__("fake-node", [FAKE_NODE, directory], workdir, stdin=subprocess.PIPE)
        expect(self.read() == "ok ready", "monitoring_fake_node did not start")

    def read(self):
        line = self.p.stdout.readline().strip()
        if not line and self.p.poll() is not None:
            raise AssertionError("monitoring_fake_node exited (%s)" % self.p.returncode)
        return line

    def do(self, command):
        self.p.stdin.write(command + "\n")
        self.p.stdin.flush()
        answer = self.read()
        expect(answer.startswith("ok"), "fake node: %s: %s" % (command, answer))
        return answer

    def stop(self, timeout=20):
        if self.p.poll() is None:
            try:
                self.p.stdin.write("quit\n")
                self.p.stdin.close()
                self.p.wait(timeout=timeout)
            except (OSError, subprocess.TimeoutExpired):
                pass
        return super().stop(timeout)


def wait_port(port, proc, seconds=15):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        expect(proc.alive(), "%s exited with %s; log %s" % (proc.name, proc.p.returncode, proc.log_path))
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("%s does not listen on 127.0.0.1:%d after %d s" % (proc.name, port, seconds))


def scrape(port):
    """The sample names and values a program exports on /metrics (prometheus_client's parser)."""
    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


# --- Prometheus' HTTP API ------------------------------------------------------------------------

def api(path, **params):
    url = "http://127.0.0.1:%d/api/v1/%s" % (PROMETHEUS_PORT, path)
    if params:
        url += "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:
        body = json.load(e)
    return body


def query(q):
    body = api("query", query=q)
    expect(body["status"] == "success", "query %r: %s %s" % (q, body.get("errorType"), body.get("error")))
    return body["data"]["result"]


def alert_states():
    """{alertname: state} over every alert instance (firing wins over pending)."""
    out = {}
    for a in api("alerts")["data"]["alerts"]:
        name = a["labels"]["alertname"]
        if out.get(name) != "firing":
            out[name] = a["state"]
    return out


def evaluations():
    """The last evaluation time of each rule group (Prometheus' clock, RFC 3339)."""
    return {g["name"]: g["lastEvaluation"] for g in api("rules")["data"]["groups"]}


def wait_until(what, cond, seconds=DEADLINE):
    end = time.monotonic() + seconds
    last = None
    while time.monotonic() < end:
        ok, last = cond()
        if ok:
            return last
        time.sleep(0.2)
    raise AssertionError("%s: not within %d s; last seen: %s" % (what, seconds, last))


def wait_evaluations(n):
    """Until every rule group has been evaluated n more times."""
    seen = [evaluations()]

    def advanced():
        now = evaluations()
        if all(now[g] != seen[-1].get(g) for g in now):
            seen.append(now)
        return len(seen) > n, now
    wait_until("%d rule evaluations" % n, advanced)


def expect_alerts(firing, all_alerts, fired_ever, why):
    """Waits until exactly `firing` fire and nothing else is pending or firing, and it stays so
    for FOR_SECONDS + 2 evaluations (a pending alert would have fired by then)."""
    want = {a: "firing" for a in firing}
    t0 = time.monotonic()
    for _ in range(5):
        wait_until("alerts %s (%s)" % (sorted(firing), why), lambda: (alert_states() == want, alert_states()))
        wait_evaluations(FOR_SECONDS + 2)
        got = alert_states()
        if got == want:
            fired_ever.update(firing)
            print("    firing after %.1f s: %s" % (time.monotonic() - t0, ", ".join(sorted(firing)) or "nothing"))
            silent = sorted(set(all_alerts) - set(firing))
            print("    silent: %s" % ", ".join(silent))
            return
    raise AssertionError("alerts did not settle on %s: %s" % (sorted(firing), alert_states()))


# --- certificates --------------------------------------------------------------------------------

def short_lived_cert(ca_dir, out_dir, seconds):
    """A serving certificate from the CA in ca_dir valid from an hour ago until `seconds` from now
    (openssl ca: the other openssl commands count validity in whole days)."""
    os.makedirs(out_dir)
    with open(os.path.join(out_dir, "index.txt"), "w"):
        pass
    with open(os.path.join(out_dir, "serial"), "w") as f:
        f.write("1000\n")
    cfg = os.path.join(out_dir, "ca.cnf")
    with open(cfg, "w") as f:
        f.write("[ca]\ndefault_ca = short\n[short]\ndatabase = %s/index.txt\nnew_certs_dir = %s\n"
                "serial = %s/serial\ndefault_md = sha256\npolicy = any\nunique_subject = no\n"
                "x509_extensions = leaf\n[any]\ncommonName = supplied\n[leaf]\nbasicConstraints = CA:FALSE\n"
                "keyUsage = digitalSignature\nextendedKeyUsage = serverAuth\n"
                "subjectAltName = DNS:%s\n" % (out_dir, out_dir, out_dir, harness.SERVICE_NAME))
    key, csr, crt = (os.path.join(out_dir, n) for n in ("tls.key", "tls.csr", "leaf.crt"))

    def utc(t):
        return time.strftime("%Y%m%d%H%M%SZ", time.gmtime(t))
    steps = [["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key],
             ["openssl", "req", "-new", "-key", key, "-subj", "/CN=" + harness.SERVICE_NAME, "-out", csr],
             ["openssl", "ca", "-batch", "-config", cfg, "-cert", os.path.join(ca_dir, "ca.crt"),
              "-keyfile", os.path.join(ca_dir, "ca.key"), "-in", csr, "-out", crt, "-notext",
              "-startdate", utc(time.time() - 3600), "-enddate", utc(time.time() + seconds)]]
    for cmd in steps:
        r = mon.run(cmd)
        expect(r.returncode == 0, "%s: %s" % (" ".join(cmd[:2]), r.stderr))
    with open(crt, "rb") as a, open(os.path.join(ca_dir, "ca.crt"), "rb") as b:
        chain = a.read() + b.read()
    with open(key, "rb") as f:
        return {"tls.crt": chain, "tls.key": f.read()}


def cert_files(directory):
    return {n: harness.read(os.path.join(directory, n)) for n in ("tls.crt", "tls.key")}


# --- the test ------------------------------------------------------------------------------------

def in_private_netns():
    """Runs this file again inside a new network namespace (unshare), where the programs and
    Prometheus use loopback and nothing else; the namespace goes away with its processes."""
    if os.environ.get(IN_NETNS) == "1":
        r = subprocess.run(["ip", "link", "set", "lo", "up"], capture_output=True, text=True, timeout=10)
        if r.returncode != 0:
            print("cannot bring up loopback in the test's network namespace: %s" % r.stderr)
            sys.exit(1)
        return None
    env = dict(os.environ, **{IN_NETNS: "1"})
    return subprocess.call(["unshare", "--net", "--", sys.executable, os.path.abspath(__file__)], env=env)


def main():
    prometheus, promtool = mon.find_tool("prometheus"), mon.find_tool("promtool")
    missing = [p for p, ok in ((WEBHOOK, os.access(WEBHOOK, os.X_OK)), (AGENT, os.access(AGENT, os.X_OK)),
                               (FAKE_NODE, os.access(FAKE_NODE, os.X_OK))) if not ok]
    if os.environ.get(IN_NETNS) != "1":
        why = None
        if os.geteuid() != 0:
            # CI runs as root (the README's test command does): there a failure, not a skip.
            why = ("needs root: a network namespace of its own, and the agent's setns for SMC-R pod setup", True)
        elif not prometheus or not promtool:
            why = ("no prometheus/promtool (Debian's package prometheus; scripts/install-deps.sh installs it)", True)
        elif missing:
            why = ("not built: %s (scripts/build.sh)" % ", ".join(missing), True)
        elif not shutil.which("unshare") or not shutil.which("ip"):
            why = ("no unshare or ip (util-linux, iproute2)", True)
        if why:
            suite = Suite("monitoring-live")
            suite.skip("alerts against a real Prometheus", why[0], provided_by_install=why[1])
            suite.finish()
        sys.exit(in_private_netns())
    in_private_netns()

    suite = Suite("monitoring-live")
    w = suite.workdir
    r = mon.run([prometheus, "--version"])
    print("prometheus: %s" % (r.stdout or r.stderr).splitlines()[0])
    rules = mon.load_rules()
    all_alerts = [r["alert"] for _, r in mon.alerts(rules)]
    fired_ever = set()
    procs = []
    state = {}

    def run_phase(name, fn):
        t0 = time.monotonic()
        suite.check(name, fn)
        print("    (%s: %.1f s)" % (name.split(":")[0], time.monotonic() - t0))

    try:
        # -- the node around the agent, the agent, the webhook, Prometheus
        node_dir = tempfile.mkdtemp(prefix="erdma-mon-", dir="/tmp")  # short: unix socket paths
        state["node_dir"] = node_dir
        fake = FakeNode(w, node_dir)
        procs.append(fake)
        proc_root = os.path.join(w, "proc")
        os.makedirs(os.path.join(proc_root, "1", "ns"))
        os.symlink("/proc/self/ns/net", os.path.join(proc_root, "1", "ns", "net"))  # the node's netns: this one

        def agent_config(devices, name):
            cfg = {"devicePluginDir": node_dir, "slotsPerDevice": 4, "metricsListen": "127.0.0.1:%d" % AGENT_METRICS,
                   "podResourcesSocket": node_dir + "/node/podres.sock", "criSocket": node_dir + "/node/cri.sock",
                   "procRoot": proc_root,
                   # A mode no test machine runs: the mismatch gauge is 1 whatever the kernel has.
                   "driver": {"prefer": "compat", "loadModules": False},
                   # ueid "": the UEID table is global, not per network namespace: leave it alone.
                   "smcr": {"enabled": True, "ueid": "", "preloadSource": ""},
                   "devices": {"source": "static", "rescanSeconds": 1, "static": devices}}
            path = os.path.join(w, name + ".json")
            with open(path, "w") as f:
                json.dump(cfg, f)
            return path

        def start_agent(config, name):
            a = Proc(name, [AGENT, "run", "--config", config], w)
            procs.append(a)
            wait_port(AGENT_METRICS, a)
            state["agent"] = a
        two_healthy = [{"name": "erdma_0", "uverbs": "uverbs0", "netdev": "eth0"},
                       {"name": "erdma_1", "uverbs": "uverbs1", "netdev": "eth1"}]
        start_agent(agent_config(two_healthy, "agent"), "agent")
        fake.do("wait-registered 1")

        ca_dir = os.path.join(w, "pki")
        harness.generate_certs(ca_dir)  # a CA and a certificate for a year
        ca = os.path.join(ca_dir, "ca.crt")
        tls = harness.Volume(os.path.join(w, "tls"))
        tls.update(cert_files(ca_dir))
        webhook = Proc("webhook", [WEBHOOK, "serve", "--listen", "127.0.0.1:%d" % WEBHOOK_PORT,
                                   "--metrics-listen", "127.0.0.1:%d" % WEBHOOK_METRICS,
                                   "--tls-cert", tls.file("tls.crt"), "--tls-key", tls.file("tls.key"),
                                   "--reload-interval", "1s"], w)
        procs.append(webhook)
        wait_port(WEBHOOK_PORT, webhook)
        wait_port(WEBHOOK_METRICS, webhook)

        with open(mon.RULES) as f:
            text, n = mon.rules_with_short_for(f.read(), FOR_SECONDS)
        expect(n == sum(1 for _, r in mon.alerts(rules) if "for" in r), "rewrote %d for: lines" % n)
        rules_copy = os.path.join(w, "rules.yaml")
        with open(rules_copy, "w") as f:
            f.write(text)
        targets = {
            "erdma-webhook": [("127.0.0.1:%d" % WEBHOOK_METRICS,
                               mon.pod_meta(NS, "erdma-webhook-test", NODE, "erdma-webhook", "metrics"))],
            "erdma-agent": [("127.0.0.1:%d" % AGENT_METRICS,
                             mon.pod_meta(NS, "erdma-agent-test", NODE, "erdma-agent", "metrics"))]}
        import yaml
        config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                  "rule_files": [rules_copy], "scrape_configs": mon.static_scrape_configs(targets)}
        prom_cfg = os.path.join(w, "prometheus.yml")
        with open(prom_cfg, "w") as f:
            yaml.safe_dump(config, f)
        r = mon.run([promtool, "check", "config", prom_cfg])
        expect(r.returncode == 0, r.stdout + r.stderr)
        prom = Proc("prometheus", [prometheus, "--config.file=" + prom_cfg, "--storage.tsdb.path=" + os.path.join(w, "tsdb"),
                                   "--web.listen-address=127.0.0.1:%d" % PROMETHEUS_PORT, "--log.level=warn"], w)
        procs.append(prom)
        wait_port(PROMETHEUS_PORT, prom, 30)

        def ready():
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/-/ready" % PROMETHEUS_PORT, timeout=5) as r:
                    return r.status == 200, r.status
            except (urllib.error.URLError, OSError) as e:
                return False, str(e)
        wait_until("Prometheus ready", ready)

        def admit(conn, obj, uid):
            status, _, body = harness.post_review(conn, harness.review(obj, uid))
            return status, json.loads(body) if status == 200 else body

        # -- healthy
        def healthy():
            conn = harness.ApiserverConnection(WEBHOOK_PORT, ca)
            for i in range(3):
                status, resp = admit(conn, harness.pod("web-%d" % i, smcr=True), "ok-%d" % i)
                expect(status == 200 and resp["response"]["allowed"], resp)
            conn.close()
            wait_until("both targets up, with the shipped relabeling", lambda: (
                sorted((s["metric"]["job"], s["metric"].get("node"), s["metric"].get("namespace"), s["value"][1])
                       for s in query("up")) == [("erdma-agent", NODE, NS, "1"), ("erdma-webhook", NODE, NS, "1")],
                query("up")))
            wait_until("the agent registered, as Prometheus sees it",
                       lambda: (bool(query("erdma_agent_kubelet_registered == 1")), query("erdma_agent_kubelet_registered")))
            mismatch = scrape(AGENT_METRICS)
            expect(any(k[0] == "erdma_agent_driver_mode_mismatch" and dict(k[1]).get("want") == "compat" and v == 1
                       for k, v in mismatch.items()), "the agent does not report want=compat as a mismatch")
            expect_alerts({"ErdmaAgentDriverModeMismatch"}, all_alerts, fired_ever, "healthy")
        run_phase("healthy: nothing fires but the driver mode mismatch the agent is configured into", healthy)

        def names_exported():
            exported = {k[0] for k in scrape(WEBHOOK_METRICS)} | {k[0] for k in scrape(AGENT_METRICS)}
            used = mon.used_metric_names()
            dra = sorted(n for n in used if mon.dra_only({n}))
            # The DRA driver is off here, so its names are left out below: none may be exported.
            expect(not [n for n in exported if n.startswith(mon.DRA_ONLY_PREFIX)],
                   "the agent exports DRA series with the DRA driver off: %s" %
                   sorted(n for n in exported if n.startswith(mon.DRA_ONLY_PREFIX)))
            missing = mon.missing_names({n: w for n, w in used.items() if n not in dra}, exported)
            expect(not missing, "names the rules or the dashboard use that the programs do not export: %s" % missing)
            # The comparison itself catches a name nobody exports.
            expect(mon.missing_names({"erdma_agent_devicez": ["x"]}, exported), "a wrong name passed")
            print("    %d names used, all among the %d sample names the two programs export" %
                  (len(used) - len(dra), len(exported)))
            print("    not exported without the DRA driver (no API server here): %s" % ", ".join(dra))
        suite.check("every metric the rules and the dashboard name is exported by the running programs", names_exported)

        # -- faults
        def faults():
            fake.do("allocate erdma_0-1")  # while Prometheus scrapes: the allocation panels get a rate
            ten_days = os.path.join(w, "pki-10d")
            shutil.copytree(ca_dir, ten_days)
            harness.generate_certs(ten_days, "--days", "10")
            before = scrape(WEBHOOK_METRICS)[("erdma_webhook_tls_cert_not_after_seconds", ())]
            tls.update(cert_files(ten_days))
            wait_until("the 10-day certificate in use", lambda: (
                scrape(WEBHOOK_METRICS)[("erdma_webhook_tls_cert_not_after_seconds", ())] != before, None))
            conn = harness.ApiserverConnection(WEBHOOK_PORT, ca)
            dup = harness.pod("dup-0", smcr=True, containers=2)
            dup["spec"]["containers"][1]["name"] = dup["spec"]["containers"][0]["name"]
            status, resp = admit(conn, dup, "refused-1")
            expect(status == 200 and not resp["response"]["allowed"], "a pod with two containers of one name: %s" % resp)
            conn.close()
            conn = harness.ApiserverConnection(WEBHOOK_PORT, ca)
            status, _, _ = harness.post_review(conn, b'{"kind": "AdmissionReview", "request": 7}')
            expect(status == 400, "an unusable review answered %s" % status)
            conn.close()
            other = os.path.join(w, "other-ca")
            harness.generate_certs(other)
            try:
                ctx = ssl.create_default_context(cafile=os.path.join(other, "ca.crt"))
                ctx.wrap_socket(socket.create_connection(("127.0.0.1", WEBHOOK_PORT), 10),
                                server_hostname=harness.SERVICE_NAME)
                raise AssertionError("a client trusting another CA completed the handshake")
            except ssl.SSLCertVerificationError:
                pass
            tls.update({"tls.crt": b"-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n",
                        "tls.key": cert_files(ten_days)["tls.key"]})
            fake.do("pod team-a/host-0 erdma_0-0 host")
            fake.do("prestart erdma_0-0")
            plain_file = os.path.join(w, "not-a-netns")
            with open(plain_file, "w"):
                pass
            fake.do("pod team-a/web-0 erdma_1-0 %s" % plain_file)
            fake.do("prestart erdma_1-0")
            fake.do("kubelet-gone")
            def predicted():
                seen = [(dict(k[1]), v) for k, v in scrape(AGENT_METRICS).items()
                        if k[0] == "erdma_agent_smcr_pod_prediction_total" and v > 0]
                return bool(seen), seen
            predictions = wait_until("the host-network pod predicted", predicted)
            print("    SMC-R prediction for the host-network pod: %s" % predictions)
            expect_alerts({"ErdmaAgentDriverModeMismatch", "ErdmaWebhookCertificateExpiringSoon", "ErdmaWebhookPodsRefused",
                           "ErdmaWebhookInvalidReviews", "ErdmaWebhookCertificateUntrusted", "ErdmaWebhookReloadFailing",
                           "ErdmaSmcrPodsWillFallBack", "ErdmaSmcrPodSetupFailing", "ErdmaAgentNotRegistered"},
                          all_alerts, fired_ever, "faults")
        run_phase("faults: each fires its alert, the device and availability alerts stay silent", faults)

        def dashboard_returns_data():
            nan_only, dra = [], []
            for title, ref, q in mon.dashboard_queries():
                result = query(q)
                if mon.dra_only(mon.metric_names(q)):
                    expect(not result, "panel %r query %s returns data with the DRA driver off: %s" % (title, ref, result))
                    dra.append("%s %s" % (title, ref))
                    continue
                expect(result, "panel %r query %s returns nothing: %s" % (title, ref, q))
                if all(s["value"][1] == "NaN" for s in result):
                    nan_only.append("%s %s" % (title, ref))
            for name, metric, label in mon.variable_queries():
                values = api("label/%s/values" % label, **{"match[]": metric})["data"]
                expect(NODE in values, "variable $%s: label_values(%s, %s) = %s" % (name, metric, label, values))
            print("    %d queries return series, %d variable(s) their values" %
                  (len(mon.dashboard_queries()) - len(dra), len(mon.variable_queries())))
            print("    parse, and return nothing without the DRA driver: %s" % "; ".join(dra))
            if nan_only:
                # Histograms of configured SMC-R pod setups: no kernel SMC here, so none is configured.
                print("    series with no observations yet (NaN quantiles): %s" % "; ".join(nan_only))
        suite.check("dashboard: every query parses and returns data from this Prometheus", dashboard_returns_data)

        # -- expiry, and the device gone
        def expiry():
            short = short_lived_cert(ca_dir, os.path.join(w, "pki-20s"), 20)
            tls.update(short)
            wait_until("the 20-second certificate in use", lambda: (
                scrape(WEBHOOK_METRICS)[("erdma_webhook_tls_cert_not_after_seconds", ())] - time.time() < 30, None))
            state["agent"].stop()
            erdma_1_down = [{"name": "erdma_1", "uverbs": "uverbs1", "netdev": "eth1", "state": "DOWN"}]
            start_agent(agent_config(erdma_1_down, "agent-device-gone"), "agent-device-gone")
            expect_alerts({"ErdmaAgentDriverModeMismatch", "ErdmaWebhookCertificateExpired", "ErdmaWebhookPodsRefused",
                           "ErdmaWebhookInvalidReviews", "ErdmaWebhookCertificateUntrusted", "ErdmaWebhookReloadFailing",
                           "ErdmaSmcrPodsWillFallBack", "ErdmaSmcrPodSetupFailing", "ErdmaAgentNotRegistered",
                           "ErdmaAgentNoHealthyDevice", "ErdmaAgentDeviceUnhealthy"},
                          all_alerts, fired_ever, "expiry")
        run_phase("expiry: the expired certificate and the lost device fire their alerts", expiry)

        # -- down
        # A stopped program's gauges go stale at once, so the alerts on them end; the alerts on
        # increase() over a window keep firing until their window has passed (range vectors keep
        # the samples from before the target went away): "in the last 15 minutes" stays true.
        def down():
            expect(webhook.stop() == 0, "erdma-webhook exit status after SIGTERM")
            increases = {"ErdmaWebhookPodsRefused", "ErdmaWebhookInvalidReviews", "ErdmaWebhookCertificateUntrusted",
                         "ErdmaWebhookReloadFailing", "ErdmaSmcrPodsWillFallBack", "ErdmaSmcrPodSetupFailing"}
            expect_alerts(increases | {"ErdmaWebhookDown", "ErdmaAgentDriverModeMismatch", "ErdmaAgentNotRegistered",
                                       "ErdmaAgentNoHealthyDevice", "ErdmaAgentDeviceUnhealthy"},
                          all_alerts, fired_ever, "webhook stopped")
            expect(state["agent"].stop() == 0, "erdma-agent exit status after SIGTERM")
            expect_alerts(increases | {"ErdmaWebhookDown", "ErdmaAgentDown"}, all_alerts, fired_ever, "agent stopped")
        run_phase("down: no webhook replica, then no agent", down)

        # The alerts over the DRA driver's series stayed silent in every phase (expect_alerts).
        live = {r["alert"] for _, r in mon.alerts(rules) if not mon.dra_only(mon.metric_names(r["expr"]))}
        suite.check("every alert of the rules but the DRA driver's fired against the real programs",
                    lambda: expect(fired_ever == live, "never fired: %s; fired: %s" %
                                   (sorted(live - fired_ever), sorted(fired_ever - live))))
    except Exception as e:  # setup failed: report it as a failed check and clean up
        suite.check("set-up", lambda: (_ for _ in ()).throw(e))
    finally:
        for p in reversed(procs):
            p.stop()
        if state.get("node_dir"):
            shutil.rmtree(state["node_dir"], ignore_errors=True)
    suite.finish()


if __name__ == "__main__":
    main()
