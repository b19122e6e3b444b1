"""Shared pieces of the admission server's integration tests.

Starts the real `erdma-webhook serve` on 127.0.0.1 with certificates made at test time by
certs/erdma-certs, and talks to it as kube-apiserver does: HTTPS/1.1, SNI and hostname
verification against erdma-webhook.erdma-system.svc, POST /mutate-pods?timeout=10s.

Runs with Debian's /usr/bin/python3 (it needs python3-prometheus-client). Loopback only; every
wait is bounded.
"""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request

SERVICE_NAME = "erdma-webhook.erdma-system.svc"
SOURCE_DIR = os.environ.get("ERDMA_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "../../../..")))
WEBHOOK = os.environ.get("ERDMA_WEBHOOK", os.path.join(SOURCE_DIR, "build/webhook/erdma-webhook"))
CERTS_TOOL = os.path.join(SOURCE_DIR, "certs/erdma-certs")


def generate_certs(directory, *extra):
    """Runs `erdma-certs generate --dir directory` (reusing a CA already there)."""
    subprocess.run([CERTS_TOOL, "generate", "--dir", directory, *extra], check=True, timeout=60,
                   stderr=subprocess.DEVNULL)


def cert_sha256(pem_path):
    """SHA-256 of the first (leaf) certificate in a PEM file, as lower-case hex."""
    with open(pem_path) as f:
        text = f.read()
    start = text.index("-----BEGIN CERTIFICATE-----")
    end = text.index("-----END CERTIFICATE-----", start) + len("-----END CERTIFICATE-----")
    der = ssl.PEM_cert_to_DER_cert(text[start:end])
    import hashlib
    return hashlib.sha256(der).hexdigest()


def client_context(ca_file, minimum=None, maximum=None):
    ctx = ssl.create_default_context(cafile=ca_file)
    if minimum:
        ctx.minimum_version = minimum
    if maximum:
        ctx.maximum_version = maximum
    return ctx


class ApiserverConnection(http.client.HTTPConnection):
    """An HTTPS/1.1 keep-alive connection to 127.0.0.1:port that sends SNI and verifies the
    certificate against the service name, as kube-apiserver does for service webhooks. `source`
    is the local address to connect from (any 127.0.0.0/8 address is a distinct peer on loopback)."""

    def __init__(self, port, ca_file, timeout=10, context=None, source=None):
        super().__init__("127.0.0.1", port, timeout=timeout)
        self._ctx = context or client_context(ca_file)
        self._source = (source, 0) if source else None

    def connect(self):
        raw = socket.create_connection((self.host, self.port), self.timeout, source_address=self._source)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self._ctx.wrap_socket(raw, server_hostname=SERVICE_NAME)

    def peer_sha256(self):
        import hashlib
        return hashlib.sha256(self.sock.getpeercert(binary_form=True)).hexdigest()


def pod(name="web-0", namespace="team-a", smcr=True, erdma=False, containers=1, generate_name=None):
    meta = {"namespace": namespace}
    if generate_name:
        meta["generateName"] = generate_name
    else:
        meta["name"] = name
    if smcr:
        meta["annotations"] = {"network.alibabacloud.com/erdma-smcr": "true"}
    cs = []
    for i in range(containers):
        c = {"name": "c%d" % i, "image": "registry.example/app:1.0",
             "env": [{"name": "MODE", "value": "serve"}]}
        if erdma:
            c["resources"] = {"limits": {"aliyun/erdma": "1"}}
        cs.append(c)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": cs}}


def review(obj, uid="uid-1"):
    meta = obj.get("metadata", {})
    return json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": meta.get("name", ""), "namespace": meta.get("namespace", "default"),
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": obj, "oldObject": None, "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        }}).encode()


def post_review(conn, body, path="/mutate-pods?timeout=10s", headers=None):
    """POSTs body and returns (status, headers dict, body bytes)."""
    h = {"Content-Type": "application/json", "Accept": "application/json, */*"}
    if headers:
        h.update(headers)
    conn.request("POST", path, body=body, headers=h)
    r = conn.getresponse()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()


class Server:
    """One `erdma-webhook serve` process with its own certificate directory and log file."""

    def __init__(self, workdir, cert_dir=None, extra_args=(), config=None, key_type="ecdsa"):
        self.workdir = workdir
        self.cert_dir = cert_dir or os.path.join(workdir, "certs")
        if not os.path.exists(os.path.join(self.cert_dir, "tls.crt")):
            generate_certs(self.cert_dir, "--key-type", key_type)
        self.ca = os.path.join(self.cert_dir, "ca.crt")
        self.cert = os.path.join(self.cert_dir, "tls.crt")
        self.key = os.path.join(self.cert_dir, "tls.key")
        self.port_file = os.path.join(workdir, "ports.json")
        self.log_path = os.path.join(workdir, "server.log")
        args = [WEBHOOK, "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                "--tls-cert", self.cert, "--tls-key", self.key, "--port-file", self.port_file]
        if config:
            args += ["--config", config]
        args += list(extra_args)
        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.monotonic() + 15
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None:
                raise RuntimeError("server exited with %d at start; log:\n%s" % (self.proc.returncode, self.read_log()))
            if time.monotonic() > deadline:
                raise RuntimeError("server did not report its ports within 15 s")
            time.sleep(0.02)
        with open(self.port_file) as f:
            ports = json.load(f)
        self.port = ports["https"]
        self.metrics_port = ports["metrics"]

    def connect(self, timeout=10, context=None, source=None):
        return ApiserverConnection(self.port, self.ca, timeout=timeout, context=context, source=source)

    def metrics_text(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port, timeout=10) as r:
            return r.read().decode()

    def metrics(self):
        """Parses /metrics with prometheus_client's text parser: {(name, labels tuple): value}."""
        from prometheus_client.parser import text_string_to_metric_families
        out = {}
        for fam in text_string_to_metric_families(self.metrics_text()):
            for s in fam.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return -1

    def hwm_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return -1

    def read_log(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def log_lines(self):
        """The complete lines of the log. A read can land while the server is writing a batch of
        lines, so a last line without its newline is not finished yet: it is left for the next read."""
        text = self.read_log()
        if not text.endswith("\n"):
            text = text[: text.rfind("\n") + 1]
        out = []
        for line in text.splitlines():
            out.append(json.loads(line))  # every complete line must be JSON
        return out

    def log_lines_when(self, ready, seconds=5):
        """The log's lines once ready(lines) holds, or as they are after `seconds`. Info and debug
        lines are written by a flush the server's event loop runs after the answer, so a client
        can read an answer before its line is in the log."""
        deadline = time.monotonic() + seconds
        while True:
            lines = self.log_lines()
            if ready(lines) or time.monotonic() >= deadline:
                return lines
            time.sleep(0.02)

    def alive(self):
        return self.proc.poll() is None

    def terminate(self, timeout=20):
        """SIGTERM and wait; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.log.close()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if not self.log.closed:
            self.log.close()


class Volume:
    """A directory written the way the kubelet's atomic writer updates a Secret or ConfigMap
    volume: the files live in a timestamped directory, `..data` points at it, and each name is a
    symlink through `..data`; an update commits with one rename of `..data`."""

    def __init__(self, path):
        self.path = path
        self.gen = 0
        self.current = None
        os.makedirs(path, exist_ok=True)

    def update(self, files):
        self.gen += 1
        stamp = "..2026_12_02_00_00_%02d.%d" % (self.gen % 60, self.gen)
        os.makedirs(os.path.join(self.path, stamp))
        for name, data in files.items():
            with open(os.path.join(self.path, stamp, name), "wb") as f:
                f.write(data)
            link = os.path.join(self.path, name)
            if not os.path.islink(link):
                os.symlink(os.path.join("..data", name), link)
        tmp = os.path.join(self.path, "..data_tmp")
        os.symlink(stamp, tmp)
        os.rename(tmp, os.path.join(self.path, "..data"))  # the commit point
        if self.current:
            shutil.rmtree(os.path.join(self.path, self.current))
        self.current = stamp

    def file(self, name):
        return os.path.join(self.path, name)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def project_version(source_dir=SOURCE_DIR):
    """The tree's version as the programs, images, manifests and chart carry it (ERDMA_VERSION of
    CMakeLists.txt): `project(... VERSION x.y.z)`, then "-" and ERDMA_VERSION_PRERELEASE unless
    that label is "" ("0.2.0-rc.1", or "0.2.0" on a release). None when either line is missing,
    so that a reworded CMakeLists.txt fails the checks that compare against it."""
    with open(os.path.join(source_dir, "CMakeLists.txt"), encoding="utf-8") as f:
        text = f.read()
    numbers = re.search(r"^project\(\s*[\w-]+\s+VERSION\s+(\d+\.\d+\.\d+)\b", text, re.M)
    label = re.search(r'^set\(ERDMA_VERSION_PRERELEASE\s+"([^"]*)"\)', text, re.M)
    if not numbers or not label:
        return None
    return numbers.group(1) + ("-" + label.group(1) if label.group(1) else "")


def running_under_ci():
    """Whether this run is CI's: CI=true in the environment (.ci/run sets it). Every Python skip
    asks this; C++ asks running_under_ci in test/skip.hpp, shell in test/cluster/checks.sh."""
    return os.environ.get("CI") == "true"


def skip_case(case, reason, provided_by_install=True):
    """A unittest case that cannot run on this machine: case.skipTest(reason). Under CI=true a
    case whose needs CI's machine provides (the default: a package scripts/install-deps.sh
    installs, or root, which the README's test command runs as) fails instead.
    provided_by_install=False is for what no install step gives (hardware, this kernel)."""
    if provided_by_install and running_under_ci():
        case.fail("would be skipped (%s), but under CI=true the install step provides what this needs" % reason)
    case.skipTest(reason)


def unittest_main():
    """unittest.main for ctest: exit 1 when a case failed or erred (or none ran), 77 when a case
    was skipped (SKIP_RETURN_CODE 77: ctest shows Skipped, a failure still outranks it), else 0.
    unittest's own exit status is 0 with skips, so ctest would otherwise show them as passed."""
    import unittest
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful() or result.testsRun == 0:
        sys.exit(1)
    sys.exit(77 if result.skipped else 0)


class Suite:
    """A tiny runner: named checks, each reported, and the closing 'N passed, N failed' line
    (', N skipped' when a check could not run here)."""

    def __init__(self, name):
        self.name = name
        self.passed = 0
        self.failed = 0
        self.skipped = 0
        self.workdir = tempfile.mkdtemp(prefix="erdma-%s-" % name)

    def check(self, name, fn, *args):
        t0 = time.monotonic()
        try:
            fn(*args)
        except Exception:  # a failed check is reported and the suite goes on
            self.failed += 1
            print("FAIL %s (%.2f s)" % (name, time.monotonic() - t0))
            traceback.print_exc(file=sys.stdout)
        else:
            self.passed += 1
            print("ok   %s (%.2f s)" % (name, time.monotonic() - t0))
        sys.stdout.flush()

    def skip(self, name, reason, provided_by_install=True):
        """Reports a check that cannot run on this machine, with the reason. Under CI=true a check
        whose needs CI's machine provides (the default: a package scripts/install-deps.sh installs,
        or root, which the README's test command runs as) must not be skipped: it fails.
        provided_by_install=False is for what no install step can give (hardware, a later
        release's build target)."""
        if provided_by_install and running_under_ci():
            self.failed += 1
            print("FAIL %s: would be skipped (%s), but under CI=true the install step provides what it "
                  "needs" % (name, reason))
        else:
            self.skipped += 1
            print("skip %s: %s" % (name, reason))
        sys.stdout.flush()

    def finish(self):
        if self.skipped:
            print("%s: %d passed, %d failed, %d skipped" % (self.name, self.passed, self.failed, self.skipped))
        else:
            print("%s: %d passed, %d failed" % (self.name, self.passed, self.failed))
        if self.failed and not running_under_ci():
            print("work directory kept: %s" % self.workdir)
        else:
            if self.failed:
                self._print_logs()
            shutil.rmtree(self.workdir, ignore_errors=True)
        # 77: something was skipped (ctest's SKIP_RETURN_CODE shows the test as skipped, not passed)
        sys.exit(1 if self.failed else (77 if self.skipped else 0))

    def _print_logs(self, limit=40):
        """The last lines of every log in the work directory (CI keeps no files)."""
        for dirpath, _, names in os.walk(self.workdir):
            for n in sorted(names):
                if n.endswith((".log", ".err", ".out")):
                    p = os.path.join(dirpath, n)
                    try:
                        with open(p, errors="replace") as f:
                            lines = f.read().splitlines()[-limit:]
                    except OSError:
                        continue
                    print("--- %s (last %d lines)" % (os.path.relpath(p, self.workdir), len(lines)))
                    for line in lines:
                        print("    " + line)


def expect(cond, message):
    if not cond:
        raise AssertionError(message)


WAIT_S = 60  # far above what any event here takes on a loaded 2-core machine; only a hang reaches it


def wait_until(cond, what, seconds=WAIT_S):
    """Waits for an event instead of sleeping a fixed time and hoping: polls cond() every 10 ms
    and returns its first true value; fails, naming `what`, when `seconds` pass first."""
    deadline = time.monotonic() + seconds
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("waited for %s: not within %g s" % (what, seconds))
        time.sleep(0.01)
