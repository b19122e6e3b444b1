"""What the monitoring tests share: where the shipped rules, dashboard and scrape configuration
are, the metric names they use, the dashboard's queries as Prometheus would run them, and
Debian's Prometheus binaries.

Debian's /usr/bin/python3 (python3-yaml).
"""

import json
import os
import re
import shutil
import subprocess

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("ERDMA_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "../..")))

RULES = os.path.join(SOURCE_DIR, "monitoring/prometheus/erdma-controller.rules.yaml")
SCRAPE_CONFIGS = os.path.join(SOURCE_DIR, "monitoring/prometheus/scrape-configs.yaml")
DASHBOARD = os.path.join(SOURCE_DIR, "monitoring/grafana/erdma-controller.json")
RULES_TEST = os.path.join(HERE, "rules_test.yaml")
PROMETHEUS_RULE = os.path.join(SOURCE_DIR, "manifests/monitoring/prometheus-rule.yaml")
CHART_RULES = os.path.join(SOURCE_DIR, "charts/erdma-controller/files/erdma-controller.rules.yaml")
ALERTS_DOC = os.path.join(SOURCE_DIR, "docs/alerts.md")
DASHBOARD_DOC = os.path.join(SOURCE_DIR, "docs/dashboard.md")

# The jobs the rules and the dashboard name (manifests/monitoring's ServiceMonitors and
# scrape-configs.yaml produce them).
JOBS = ("erdma-webhook", "erdma-agent")

# Grafana's variables, replaced by what Prometheus can run. $node is the dashboard's node
# selector ("All" is .*); the ranges are long enough for a test's minute of data.
GRAFANA_VARS = {"$__rate_interval": "1m", "$__range": "5m", "$node": ".*"}

# The families a histogram's samples come in.
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

# The agent exports these only with its DRA driver on (dra.enabled), which needs an API server;
# the live test's agent has none. Their names are checked against the sources (test_rules.py),
# their labels by the agent's unit tests (agent_dra_test, agent_kube_test).
DRA_ONLY_PREFIX = "erdma_agent_dra_"


def find_tool(name):
    """Debian's prometheus package puts both binaries in /usr/bin."""
    return shutil.which(name) or (("/usr/bin/" + name) if os.access("/usr/bin/" + name, os.X_OK) else None)


def load_rules(path=RULES):
    with open(path) as f:
        return yaml.safe_load(f)


def alerts(rules):
    """[(group name, rule dict)] for every alerting rule."""
    return [(g["name"], r) for g in rules["groups"] for r in g["rules"] if "alert" in r]


def dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def panels(dash):
    """Every panel that is not a row, with its targets."""
    out = []
    for p in dash["panels"]:
        if p.get("type") == "row":
            out.extend(p.get("panels") or [])
        else:
            out.append(p)
    return out


def grafana_to_promql(expr):
    for var, value in GRAFANA_VARS.items():
        expr = expr.replace(var, value)
    left = re.findall(r"\$\{?\w+", expr)
    if left:
        raise AssertionError("query %r uses Grafana variables the test does not know: %s" % (expr, left))
    return expr


def dashboard_queries(dash=None):
    """[(panel title, refId, PromQL)] with Grafana's variables replaced."""
    dash = dash or dashboard()
    return [(p["title"], t["refId"], grafana_to_promql(t["expr"])) for p in panels(dash) for t in p["targets"]]


def variable_queries(dash=None):
    """The dashboard variables of the form label_values(METRIC, LABEL): [(name, metric, label)]."""
    dash = dash or dashboard()
    out = []
    for v in dash["templating"]["list"]:
        if v.get("type") != "query":
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", q.strip())
        if not m:
            raise AssertionError("dashboard variable %s: query %r is not label_values(METRIC, LABEL)" % (v["name"], q))
        out.append((v["name"], m.group(1), m.group(2)))
    return out


_NAME = re.compile(r"\b(erdma_[a-z0-9_]+)\b")


def metric_names(expr):
    """The erdma_* series names an expression selects (up is checked through the jobs)."""
    return set(_NAME.findall(expr))


def dra_only(names):
    """True when `names` (erdma_* metric names) is not empty and each is one the agent exports only
    with its DRA driver on."""
    return bool(names) and all(n.startswith(DRA_ONLY_PREFIX) for n in names)


def used_metric_names():
    """{name: [where]} for every erdma_* name in the rules and the dashboard (queries and variables)."""
    used = {}
    for group, r in alerts(load_rules()):
        for n in metric_names(r["expr"]):
            used.setdefault(n, []).append("alert " + r["alert"])
    for title, ref, q in dashboard_queries():
        for n in metric_names(q):
            used.setdefault(n, []).append("panel %r %s" % (title, ref))
    for name, metric, _ in variable_queries():
        used.setdefault(metric, []).append("variable $" + name)
    return used


def missing_names(used, exported):
    """The used names that no exported sample has: a histogram family counts for its _bucket,
    _sum and _count. `exported` is the set of sample names scraped (or registered)."""
    have = set(exported)
    for n in exported:
        for s in HISTOGRAM_SUFFIXES:
            if n.endswith(s):
                have.add(n[: -len(s)])

    def known(n):
        return n in have or any(n.endswith(s) and n[: -len(s)] in have for s in HISTOGRAM_SUFFIXES)
    return {n: where for n, where in used.items() if not known(n)}


def static_scrape_configs(targets):
    """The jobs of scrape-configs.yaml with Kubernetes' pod discovery replaced by static targets
    that carry the labels that discovery gives a pod (__meta_kubernetes_*), so the shipped
    relabeling runs unchanged. `targets`: {job: [(address, {meta label: value})]}. (Debian's
    Prometheus is built without Kubernetes discovery.)"""
    with open(SCRAPE_CONFIGS) as f:
        jobs = yaml.safe_load(f)["scrape_configs"]
    for j in jobs:
        sd = j.pop("kubernetes_sd_configs")
        if [c.get("role") for c in sd] != ["pod"]:
            raise AssertionError("job %s: want one kubernetes_sd_configs of role pod, got %s" % (j["job_name"], sd))
        j["static_configs"] = [{"targets": [addr], "labels": labels} for addr, labels in targets[j["job_name"]]]
    return jobs


def pod_meta(namespace, pod, node, app, port_name):
    """The discovery labels of one pod container port, as Kubernetes' role: pod gives them."""
    return {"__meta_kubernetes_namespace": namespace, "__meta_kubernetes_pod_name": pod,
            "__meta_kubernetes_pod_node_name": node, "__meta_kubernetes_pod_label_app_kubernetes_io_name": app,
            "__meta_kubernetes_pod_container_port_name": port_name}


def rules_with_short_for(text, seconds):
    """The rules file's text with every `for:` replaced by `seconds`s: only the waiting differs
    from the shipped file (the live test cannot wait 5 to 15 minutes per alert)."""
    out, n = re.subn(r"(?m)^(\s+for:\s*)\S+\s*$", r"\g<1>%ds" % seconds, text)
    return out, n


def run(cmd, timeout=60, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
