#!/usr/bin/python3
"""The shipped monitoring, checked without running the programs (a few seconds):

1. monitoring/prometheus/erdma-controller.rules.yaml passes `promtool check rules`, and its unit
   tests (rules_test.yaml) pass `promtool test rules`: series in, which alerts fire with which
   labels and annotations, which stay silent. Every alert has a test where it fires and one where
   it stays silent, and the tests bite: a copy of the rules with one threshold or `for:` changed
   fails them.
2. The copies of the rules are the same rules: manifests/monitoring/prometheus-rule.yaml's spec
   and the chart's files/erdma-controller.rules.yaml (byte for byte). `test_rules.py --write`
   regenerates both from the plain file.
3. monitoring/prometheus/scrape-configs.yaml passes `promtool check config` with the rules.
4. The Grafana dashboard: every query parses (`promtool check rules` on the queries as recording
   rules, Grafana's variables replaced); panel ids unique; every panel on the Prometheus
   datasource variable.
5. Every metric name the rules and the dashboard use is registered somewhere in the programs'
   sources (test_live_alerts.py checks the same against what the running programs export).
6. docs/alerts.md has a runbook section (meaning, check, fix) for every alert, which the alert's
   runbook annotation names; docs/dashboard.md describes every panel.
7. manifests/monitoring renders with kubectl: manifests/default plus the metrics Services, the
   ServiceMonitors and the PrometheusRule, and an agent listening on $(NODE_IP) at its metrics
   port with probes that follow; the ServiceMonitors select the Services, the Services the pods'
   metrics ports, and the jobs they produce are the ones the rules name.

Debian's /usr/bin/python3 (python3-yaml); promtool from Debian's prometheus package
(scripts/install-deps.sh); kubectl for 7.
"""

import copy
import os
import re
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import monitoring as mon  # noqa: E402

sys.path.insert(0, os.path.join(mon.SOURCE_DIR, "test/webhook/server/integration"))
sys.path.insert(0, os.path.join(mon.SOURCE_DIR, "test/manifests"))
from harness import Suite, expect  # noqa: E402

NS = "erdma-system"
PROMETHEUS_RULE_HEADER = """\
# The alert rules of monitoring/prometheus/erdma-controller.rules.yaml as a PrometheusRule
# (prometheus-operator). Generated from that file by `test/monitoring/test_rules.py --write`;
# test/monitoring fails when the two differ. docs/alerts.md is their runbook.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: erdma-controller
  namespace: erdma-system
  labels:
    app.kubernetes.io/name: erdma-controller
    app.kubernetes.io/component: alerts
    app.kubernetes.io/part-of: erdma-controller
spec:
"""


def prometheus_rule_text():
    with open(mon.RULES) as f:
        text = f.read()
    start = text.index("\ngroups:") + 1
    body = "".join("  " + line if line.strip() else line for line in text[start:].splitlines(True))
    return PROMETHEUS_RULE_HEADER + body


def write_copies():
    with open(mon.PROMETHEUS_RULE, "w") as f:
        f.write(prometheus_rule_text())
    with open(mon.RULES) as f, open(mon.CHART_RULES, "w") as g:
        g.write(f.read())
    print("wrote %s and %s" % (os.path.relpath(mon.PROMETHEUS_RULE, mon.SOURCE_DIR),
                               os.path.relpath(mon.CHART_RULES, mon.SOURCE_DIR)))


def promtool_test(promtool, rules_path, workdir, name):
    """`promtool test rules` of rules_test.yaml against rules_path (a copy of the test file whose
    rule_files names it). Returns the CompletedProcess."""
    with open(mon.RULES_TEST) as f:
        tests = yaml.safe_load(f)
    tests["rule_files"] = [rules_path]
    path = os.path.join(workdir, name + "-rules_test.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(tests, f, sort_keys=False)
    return mon.run([promtool, "test", "rules", path], timeout=120)


def registered_names():
    """Every erdma_* string literal in the programs' C++ sources: the names they can register."""
    names = set()
    for top in ("webhook", "agent", "common"):
        for dirpath, _, files in os.walk(os.path.join(mon.SOURCE_DIR, top)):
            for n in files:
                if n.endswith((".cpp", ".hpp")):
                    with open(os.path.join(dirpath, n), errors="replace") as f:
                        names.update(re.findall(r'"(erdma_[a-z0-9_]+)"', f.read()))
    # Histograms are exported as _bucket, _sum and _count; missing_names() maps them back.
    return names


def markdown_anchor(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


def main():
    if "--write" in sys.argv[1:]:
        write_copies()
        return 0
    suite = Suite("monitoring-rules")
    w = suite.workdir
    rules = mon.load_rules()
    alert_rules = mon.alerts(rules)
    names = [r["alert"] for _, r in alert_rules]
    print("alerts: %s" % ", ".join(names))
    promtool = mon.find_tool("promtool")

    # 1. promtool
    if not promtool:
        suite.skip("promtool check and test rules", "no promtool (Debian's package prometheus; "
                   "scripts/install-deps.sh installs it)")
    else:
        r = mon.run([promtool, "--version"])
        print("promtool: %s" % (r.stdout or r.stderr).splitlines()[0])

        def check_rules():
            r = mon.run([promtool, "check", "rules", mon.RULES])
            expect(r.returncode == 0, r.stdout + r.stderr)
            expect("SUCCESS: %d rules found" % len(rules["groups"][0]["rules"] + rules["groups"][1]["rules"])
                   in r.stdout, r.stdout)
        suite.check("promtool check rules: %d alerts" % len(names), check_rules)

        def unit_tests():
            r = mon.run([promtool, "test", "rules", mon.RULES_TEST], timeout=120)
            print(r.stdout.strip())
            expect(r.returncode == 0, r.stdout + r.stderr)
        suite.check("promtool test rules test/monitoring/rules_test.yaml", unit_tests)

        def every_alert_fires_and_stays_silent_in_a_test():
            with open(mon.RULES_TEST) as f:
                tests = yaml.safe_load(f)
            fires, silent = set(), set()
            for t in tests["tests"]:
                for a in t.get("alert_rule_test") or []:
                    (fires if a.get("exp_alerts") else silent).add(a["alertname"])
            expect(not set(names) - fires, "alerts no unit test sees firing: %s" % sorted(set(names) - fires))
            expect(not set(names) - silent, "alerts no unit test sees silent: %s" % sorted(set(names) - silent))
            expect(not (fires | silent) - set(names), "unit tests of unknown alerts: %s" % sorted((fires | silent) - set(names)))
        suite.check("every alert has a unit test where it fires and one where it stays silent",
                    every_alert_fires_and_stays_silent_in_a_test)

        def tests_bite():
            with open(mon.RULES) as f:
                text = f.read()
            for what, old, new in (("a 1-day certificate threshold", "/ 86400 < 14 > 0", "/ 86400 < 1 > 0"),
                                   ("ErdmaAgentDown after 50 minutes", 'up{job="erdma-agent"} == 0\n    for: 5m\n',
                                    'up{job="erdma-agent"} == 0\n    for: 50m\n'),
                                   ("refusals matched as outcome=\"refused\"", 'outcome="rejected"', 'outcome="refused"'),
                                   ("a 10-second DRA prepare threshold", "[10m]))) > 5\n", "[10m]))) > 10\n")):
                expect(text.count(old) == 1, "the rules file has no single %r to change" % old)
                path = os.path.join(w, "changed.rules.yaml")
                with open(path, "w") as f:
                    f.write(text.replace(old, new))
                r = promtool_test(promtool, path, w, "changed")
                expect(r.returncode != 0, "the unit tests pass with %s" % what)
        suite.check("the unit tests fail for rules with a changed threshold, `for:` or label value", tests_bite)

    # 2. the copies
    def copies_identical():
        with open(mon.RULES) as f, open(mon.CHART_RULES) as g:
            expect(f.read() == g.read(), "%s differs from %s: run test/monitoring/test_rules.py --write" %
                   (mon.CHART_RULES, mon.RULES))
        with open(mon.PROMETHEUS_RULE) as f:
            text = f.read()
        expect(text == prometheus_rule_text(), "%s is not generated from %s: run test/monitoring/test_rules.py "
               "--write" % (mon.PROMETHEUS_RULE, mon.RULES))
        pr = yaml.safe_load(text)
        expect(pr["spec"] == rules, "the PrometheusRule's spec is not the rules file")
    suite.check("the PrometheusRule and the chart's copy are the rules file", copies_identical)

    # 3. the scrape configuration
    def scrape_config():
        with open(mon.SCRAPE_CONFIGS) as f:
            sc = yaml.safe_load(f)
        jobs = [j["job_name"] for j in sc["scrape_configs"]]
        expect(sorted(jobs) == sorted(mon.JOBS), "scrape-configs.yaml's jobs %s, the rules use %s" % (jobs, mon.JOBS))
        if not promtool:
            return
        # Debian's Prometheus has no Kubernetes discovery: the pods it would find become static
        # targets with the same discovery labels, so the relabeling is checked as shipped.
        targets = {
            "erdma-webhook": [("10.0.0.5:8080", mon.pod_meta(NS, "erdma-webhook-1", "gpu-1", "erdma-webhook", "metrics")),
                              ("10.0.0.5:8443", mon.pod_meta(NS, "erdma-webhook-1", "gpu-1", "erdma-webhook", "https"))],
            "erdma-agent": [("10.0.1.1:9467", mon.pod_meta(NS, "erdma-agent-x", "gpu-1", "erdma-agent", "metrics"))]}
        cfg = {"global": {"scrape_interval": "30s", "evaluation_interval": "30s"},
               "rule_files": [mon.RULES], "scrape_configs": mon.static_scrape_configs(targets)}
        path = os.path.join(w, "prometheus.yml")
        with open(path, "w") as f:
            yaml.safe_dump(cfg, f)
        r = mon.run([promtool, "check", "config", path])
        expect(r.returncode == 0, r.stdout + r.stderr)
    suite.check("scrape-configs.yaml: the rules' jobs, and promtool check config", scrape_config)

    # 4. the dashboard
    def dashboard_shape():
        dash = mon.dashboard()
        ps = mon.panels(dash)
        ids = [p["id"] for p in dash["panels"]]
        expect(len(ids) == len(set(ids)), "panel ids repeat: %s" % ids)
        titles = [p["title"] for p in ps]
        expect(len(titles) == len(set(titles)), "panel titles repeat: %s" % titles)
        ds = [v for v in dash["templating"]["list"] if v["type"] == "datasource"]
        expect(len(ds) == 1 and ds[0]["query"] == "prometheus", "want one datasource variable of type prometheus")
        for p in ps:
            expect(p["datasource"] == {"type": "prometheus", "uid": "${%s}" % ds[0]["name"]},
                   "panel %r: datasource %s" % (p["title"], p["datasource"]))
            expect(p["targets"] and all(t.get("expr") for t in p["targets"]), "panel %r has no query" % p["title"])
        mon.variable_queries(dash)  # each is label_values(METRIC, LABEL)
    suite.check("dashboard: unique panels, each with queries on the Prometheus datasource variable", dashboard_shape)

    if promtool:
        def dashboard_queries_parse():
            queries = mon.dashboard_queries()
            groups = [{"name": "dashboard", "rules": [
                {"record": "dashboard:panel_%d" % i, "expr": q} for i, (_, _, q) in enumerate(queries)]}]
            path = os.path.join(w, "dashboard-queries.yaml")
            with open(path, "w") as f:
                yaml.safe_dump({"groups": groups}, f)
            r = mon.run([promtool, "check", "rules", path])
            expect(r.returncode == 0, "a dashboard query does not parse:\n%s%s" % (r.stdout, r.stderr))
            print("    %d queries parse" % len(queries))
        suite.check("dashboard: every query parses (promtool)", dashboard_queries_parse)

    # 5. metric names against the sources
    def names_registered():
        used = mon.used_metric_names()
        missing = mon.missing_names(used, registered_names())
        expect(not missing, "names no program registers: %s" % missing)
        print("    %d metric names used, each registered in the sources" % len(used))
    suite.check("every metric the rules and the dashboard use is registered in the programs' sources", names_registered)

    # 6. the docs
    def runbook_per_alert():
        with open(mon.ALERTS_DOC) as f:
            doc = f.read()
        sections = {}
        current = None
        for line in doc.splitlines():
            m = re.match(r"^### (\S+)\s*$", line)
            if m:
                current = m.group(1)
                sections[current] = []
            elif line.startswith("## "):
                current = None
            elif current:
                sections[current].append(line)
        problems = []
        for _, r in alert_rules:
            a = r["alert"]
            if a not in sections:
                problems.append("docs/alerts.md has no section '### %s'" % a)
                continue
            text = "\n".join(sections[a])
            for part in ("**Meaning.**", "**Check.**", "**Fix.**"):
                if part not in text:
                    problems.append("docs/alerts.md, %s: no %s paragraph" % (a, part))
            want = "docs/alerts.md#" + markdown_anchor(a)
            if r["annotations"].get("runbook") != want:
                problems.append("%s: runbook annotation %r, want %r" % (a, r["annotations"].get("runbook"), want))
        extra = set(sections) - set(names)
        if extra:
            problems.append("docs/alerts.md describes alerts the rules do not have: %s" % sorted(extra))
        expect(not problems, "\n".join(problems))
    suite.check("docs/alerts.md: meaning, check and fix for every alert, named by its runbook annotation",
                runbook_per_alert)

    def panel_per_section():
        with open(mon.DASHBOARD_DOC) as f:
            headings = set(re.findall(r"(?m)^### (.+?)\s*$", f.read()))
        titles = {p["title"] for p in mon.panels(mon.dashboard())}
        expect(titles <= headings, "docs/dashboard.md has no section for panels %s" % sorted(titles - headings))
        expect(headings <= titles, "docs/dashboard.md describes panels the dashboard lacks: %s" % sorted(headings - titles))
    suite.check("docs/dashboard.md: a section for every panel", panel_per_section)

    # 7. manifests/monitoring
    import test_manifests as tm
    kubectls = tm.kubectls()
    if not kubectls:
        suite.skip("manifests/monitoring", "no kubectl on PATH (scripts/install-deps.sh installs one)")
    for k in kubectls:
        suite.check("manifests/monitoring = manifests/default + monitoring objects, agent on the node IP (%s)" % k,
                    lambda k=k: overlay(k, rules))
    suite.finish()


def overlay(kubectl, rules):
    default, mon_objs = tm_render(kubectl, "default"), tm_render(kubectl, "monitoring")
    added = sorted(set(mon_objs) - set(default))
    expect(added == [("PrometheusRule", NS, "erdma-controller"), ("Service", NS, "erdma-agent-metrics"),
                     ("Service", NS, "erdma-webhook-metrics"), ("ServiceMonitor", NS, "erdma-agent"),
                     ("ServiceMonitor", NS, "erdma-webhook")], "manifests/monitoring adds %s" % added)
    expect(not set(default) - set(mon_objs), "manifests/monitoring drops %s" % sorted(set(default) - set(mon_objs)))
    changed = sorted(key for key in default if default[key] != mon_objs[key])
    expect(changed == [("DaemonSet", NS, "erdma-agent")], "manifests/monitoring changes %s" % changed)
    expect(mon_objs[("PrometheusRule", NS, "erdma-controller")]["spec"] == rules, "PrometheusRule spec")

    # The agent: listens on $(NODE_IP) at its metrics port; the probes lose host, nothing else changes.
    ds = mon_objs[("DaemonSet", NS, "erdma-agent")]
    c = ds["spec"]["template"]["spec"]["containers"][0]
    port = [p["containerPort"] for p in c["ports"] if p["name"] == "metrics"][0]
    expect(c["args"][-1] == "--metrics-listen=$(NODE_IP):%d" % port, "agent args %s" % c["args"])
    expect(c.get("env") == [{"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}],
           "agent env %s" % c.get("env"))
    for probe in ("readinessProbe", "livenessProbe"):
        expect("host" not in c[probe]["httpGet"], "%s still has host %s" % (probe, c[probe]["httpGet"]))
    back = copy.deepcopy(ds)
    bc = back["spec"]["template"]["spec"]["containers"][0]
    bc["args"] = bc["args"][:-1]
    del bc["env"]
    for probe in ("readinessProbe", "livenessProbe"):
        bc[probe]["httpGet"]["host"] = "127.0.0.1"
    expect(back == default[("DaemonSet", NS, "erdma-agent")], "the agent patch changes more than args, env and probes")

    # Each ServiceMonitor selects its Service, whose port `metrics` reaches the pods' `metrics`
    # port; the job (jobLabel) is a job of the rules.
    pods = {"erdma-webhook": default[("Deployment", NS, "erdma-webhook")]["spec"]["template"],
            "erdma-agent": ds["spec"]["template"]}
    for job in mon.JOBS:
        sm = mon_objs[("ServiceMonitor", NS, job)]["spec"]
        svcs = [o for key, o in mon_objs.items() if key[0] == "Service" and
                all(o["metadata"]["labels"].get(lk) == lv for lk, lv in sm["selector"]["matchLabels"].items())]
        expect(len(svcs) == 1 and svcs[0]["metadata"]["name"] == job + "-metrics",
               "ServiceMonitor %s selects %s" % (job, [s["metadata"]["name"] for s in svcs]))
        svc = svcs[0]
        expect(svc["metadata"]["labels"][sm["jobLabel"]] == job, "ServiceMonitor %s: job would be %r" %
               (job, svc["metadata"]["labels"].get(sm["jobLabel"])))
        expect(sm["namespaceSelector"]["matchNames"] == [NS], sm["namespaceSelector"])
        tmpl = pods[job]
        expect(all(tmpl["metadata"]["labels"].get(k) == v for k, v in svc["spec"]["selector"].items()),
               "Service %s does not select the %s pods" % (svc["metadata"]["name"], job))
        sport = [p for p in svc["spec"]["ports"] if p["name"] == sm["endpoints"][0]["port"]]
        cports = {p["name"]: p["containerPort"] for p in tmpl["spec"]["containers"][0]["ports"]}
        expect(sport and sport[0]["targetPort"] in cports, "Service %s port %s" % (svc["metadata"]["name"], sport))
        expect(sport[0]["port"] == cports[sport[0]["targetPort"]], "Service %s port %s is not the pods' %s" %
               (svc["metadata"]["name"], sport[0]["port"], cports))
        expect(svc["spec"].get("clusterIP") == "None", "Service %s is not headless" % svc["metadata"]["name"])
    used_jobs = set(re.findall(r'job="([^"]+)"', yaml.safe_dump(rules)))
    expect(used_jobs == set(mon.JOBS), "the rules name jobs %s" % sorted(used_jobs))


def tm_render(kubectl, overlay_name):
    import test_manifests as tm
    return tm.render(kubectl, overlay_name)


if __name__ == "__main__":
    sys.exit(main())
