#!/usr/bin/python3
"""The docs against what the programs do: metric names, label values, alert thresholds, links.

1. Every metric name the docs, the chart, the rules and the dashboard mention (erdma_webhook_*,
   erdma_agent_*) is one the code registers (`.counter("...")`, `.gauge(`, `.histogram(` in
   webhook/, agent/, common/; a histogram also as _bucket, _sum, _count), and docs/metrics.md
   (METRICS_PAGE, which the README links) names every metric the code registers.
2. Every list of `erdma_agent_smcr_pod_setups_total{result=...}` values in the docs is exactly the
   agent's PodSetupResult names (agent/core/pod_setup.cpp, to_string).
3. docs/alerts.md: the durations and thresholds in each alert's "Meaning" are the rule's own
   (`for:`, the range windows, the days of the certificate threshold), both ways.
4. Links in README.md, docs/*.md and examples/README.md point inside the repository, to files
   that exist; docs/README.md indexes every page of docs/.
5. Log messages the docs quote (`"msg":"..."`, and "logs `...`", "the log line `...`") are
   messages the programs write: the text, up to a "..." or the ": " that starts an appended
   reason, is a string in webhook/, agent/ or common/.
Each check also runs on a deliberately broken copy, to show it can fail.

Runs with Debian's /usr/bin/python3 (python3-yaml); no network, nothing written.
"""

import glob
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("ERDMA_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "../..")))
sys.path.insert(0, os.path.join(SOURCE_DIR, "test/webhook/server/integration"))
from harness import Suite, expect  # noqa: E402

RULES = os.path.join(SOURCE_DIR, "monitoring/prometheus/erdma-controller.rules.yaml")
# The page that lists every metric; the README links it instead of listing them itself.
METRICS_PAGE = "docs/metrics.md"
METRIC = re.compile(r"\berdma_(?:webhook|agent)_[a-z0-9_]*[a-z0-9]")


def read(path):
    with open(os.path.join(SOURCE_DIR, path), encoding="utf-8") as f:
        return f.read()


def registered_metrics():
    """{name: kind} of every metric the programs register."""
    out = {}
    for path in glob.glob(os.path.join(SOURCE_DIR, "*/**/*.[ch]pp"), recursive=True):
        rel = os.path.relpath(path, SOURCE_DIR)
        if rel.split(os.sep)[0] not in ("webhook", "agent", "common"):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for kind, name in re.findall(r"\.(counter|gauge|histogram)\(\s*\"(erdma_[a-z0-9_]+)\"", text):
            out[name] = kind
    return out


def accepted_names(registered):
    names = set(registered)
    for name, kind in registered.items():
        if kind == "histogram":
            names |= {name + s for s in ("_bucket", "_sum", "_count")}
    return names


def doc_files():
    files = ["README.md", "charts/erdma-controller/templates/NOTES.txt", "charts/erdma-controller/values.yaml",
             "monitoring/prometheus/erdma-controller.rules.yaml", "charts/erdma-controller/files/erdma-controller.rules.yaml"]
    files += sorted(os.path.relpath(p, SOURCE_DIR) for p in glob.glob(os.path.join(SOURCE_DIR, "docs/*.md")))
    files += sorted(os.path.relpath(p, SOURCE_DIR) for p in glob.glob(os.path.join(SOURCE_DIR, "monitoring/grafana/*.json")))
    files += sorted(os.path.relpath(p, SOURCE_DIR) for p in glob.glob(os.path.join(SOURCE_DIR, "examples/*")))
    files += sorted(os.path.relpath(p, SOURCE_DIR) for p in glob.glob(os.path.join(SOURCE_DIR, "examples/*/*.yaml")))
    files += sorted(os.path.relpath(p, SOURCE_DIR) for p in glob.glob(os.path.join(SOURCE_DIR, "manifests/*/*.yaml")))
    return [f for f in files if os.path.isfile(os.path.join(SOURCE_DIR, f))]


def check_metric_names(texts, registered):
    """texts: {file: text}. Names mentioned but not registered, and registered but not on METRICS_PAGE."""
    p = []
    ok = accepted_names(registered)
    for path, text in texts.items():
        for name in sorted(set(METRIC.findall(text)) - ok):
            p.append("%s names %s, which the programs do not register" % (path, name))
    listed = set(METRIC.findall(texts.get(METRICS_PAGE, "")))
    for name in sorted(set(registered) - listed):
        p.append("%s does not document %s, which the code registers" % (METRICS_PAGE, name))
    return p


def pod_setup_results():
    text = read("agent/core/pod_setup.cpp")
    body = text[text.index("std::string_view to_string(PodSetupResult r)"):]
    body = body[:body.index("\n}\n")]
    return re.findall(r'case PodSetupResult::\w+: return "([a-z_]+)";', body)


def check_setup_results(texts, results):
    p = []
    for path, text in texts.items():
        for m in re.finditer(r'smcr_pod_setups_total\{result=((?:"[a-z_]+"\|?)+)\}', text):
            listed = re.findall(r'"([a-z_]+)"', m.group(1))
            if len(listed) > 1 and sorted(listed) != sorted(results):
                p.append("%s lists smcr_pod_setups_total results %s; the agent's are %s" % (path, listed, results))
    return p


UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}
WORDS = {"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600, "day": 86400, "days": 86400}


def rule_durations(rule):
    """Seconds the rule's text stands for: for:, range windows, and `/ 86400 < N` day thresholds."""
    out = set()
    if rule.get("for"):
        m = re.fullmatch(r"(\d+)([smhd])", str(rule["for"]))
        out.add(int(m.group(1)) * UNIT[m.group(2)])
    for n, u in re.findall(r"\[(\d+)([smhd])\]", rule["expr"]):
        out.add(int(n) * UNIT[u])
    for n in re.findall(r"/\s*86400\s*<\s*(\d+)", rule["expr"]):
        out.add(int(n) * 86400)
    return out


def doc_durations(text):
    out = set()
    for n, w in re.findall(r"\b(\d+|an|one|a)\s+(minutes?|hours?|days?)\b", text):
        out.add((1 if n in ("an", "one", "a") else int(n)) * WORDS[w])
    for w in re.findall(r"\bthe last (minute|hour|day)\b", text):
        out.add(WORDS[w])
    return out


def check_alert_numbers(doc, rules):
    p = []
    for rule in rules:
        a = rule["alert"]
        i = doc.find("### %s\n" % a)
        if i < 0:
            p.append("docs/alerts.md has no section for %s" % a)
            continue
        m = re.search(r"\*\*Meaning\.\*\*(.*?)\n\n", doc[i:], re.S)
        if not m:
            p.append("docs/alerts.md, %s: no Meaning paragraph" % a)
            continue
        said, want = doc_durations(m.group(1)), rule_durations(rule)
        if said != want:
            p.append("docs/alerts.md, %s: the Meaning says %s, the rule has %s (seconds)" %
                     (a, sorted(said), sorted(want)))
    return p


LINK = re.compile(r"\]\(([^)\s]+)\)")
# Pages that still name the benchmark's peer programs outside the repository; their owners move
# them in (issue #30). Links there must still resolve; only the outside mentions are let through.
OUTSIDE_MENTIONS_LEFT = {"docs/performance.md", "docs/design.md"}


def check_links(files):
    """files: {path: text}. Relative links resolve to repository files; none leaves the repository."""
    p = []
    for path, text in files.items():
        for target in LINK.findall(text):
            if re.match(r"[a-z]+://", target) or target.startswith("#") or target.startswith("mailto:"):
                continue
            rel = target.split("#", 1)[0]
            full = os.path.normpath(os.path.join(SOURCE_DIR, os.path.dirname(path), rel))
            if not full.startswith(SOURCE_DIR + os.sep):
                p.append("%s links to %s, outside the repository" % (path, target))
            elif not os.path.exists(full):
                p.append("%s links to %s, which does not exist" % (path, target))
        for m in re.finditer(r"(?:\.\./)+shared/|/work/", "" if path in OUTSIDE_MENTIONS_LEFT else text):
            p.append("%s points outside the repository: %r" % (path, text[m.start():m.start() + 40]))
    return p


LOG_QUOTES = [re.compile(r'"msg":"([^"]+)"'),
              re.compile(r"\b(?:logs|log line|logged|logs at \w+|line)\s+[`\"]([^`\"]{6,})[`\"]")]


def program_source():
    out = []
    for path in glob.glob(os.path.join(SOURCE_DIR, "*/**/*.[ch]pp"), recursive=True):
        if os.path.relpath(path, SOURCE_DIR).split(os.sep)[0] in ("webhook", "agent", "common"):
            with open(path, encoding="utf-8") as f:
                out.append(f.read())
    return "\n".join(out)


def check_log_quotes(files, source):
    p = []
    for path, text in files.items():
        for pattern in LOG_QUOTES:
            for quoted in pattern.findall(text):
                fragment = quoted.split("...")[0].strip()
                if fragment and fragment not in source and fragment.split(": ")[0] not in source:
                    p.append("%s quotes the log message %r, which the programs do not write" % (path, quoted))
    return p


def check_index(index, pages):
    return ["docs/README.md does not list %s" % page for page in pages if "(%s)" % page not in index]


def main():
    suite = Suite("docs")
    registered = registered_metrics()
    texts = {f: read(f) for f in doc_files()}

    def metrics():
        expect(len(registered) >= 30, "found only %d registered metrics: the pattern no longer matches the code (%s)" %
               (len(registered), sorted(registered)))
        p = check_metric_names(texts, registered)
        expect(not p, p)
        broken = dict(texts)
        broken["docs/alerts.md"] += "\n`erdma_agent_smcr_pod_setup_total`\n"
        expect(any("erdma_agent_smcr_pod_setup_total" in x for x in check_metric_names(broken, registered)),
               "a misspelt metric name is not caught")
        less = dict(texts)
        expect("erdma_webhook_build_info" in less[METRICS_PAGE], "%s does not name erdma_webhook_build_info" % METRICS_PAGE)
        less[METRICS_PAGE] = less[METRICS_PAGE].replace("erdma_webhook_build_info", "")
        expect(any("erdma_webhook_build_info" in x for x in check_metric_names(less, registered)),
               "a metric missing from %s is not caught" % METRICS_PAGE)
        expect("(docs/metrics.md)" in texts["README.md"], "README.md does not link %s" % METRICS_PAGE)
    suite.check("metric names in the docs are the ones the programs register; %s lists them all" % METRICS_PAGE,
                metrics)

    def setup_results():
        results = pod_setup_results()
        expect(len(results) >= 8, results)
        p = check_setup_results(texts, results)
        expect(not p, p)
        broken = {"x.md": 'smcr_pod_setups_total{result="configured"|"failed"}'}
        expect(check_setup_results(broken, results), "a short result list is not caught")
    suite.check("every smcr_pod_setups_total{result} list in the docs is the agent's", setup_results)

    def alert_numbers():
        rules = [r for g in yaml.safe_load(read(RULES))["groups"] for r in g["rules"]]
        doc = read("docs/alerts.md")
        p = check_alert_numbers(doc, rules)
        expect(not p, p)
        broken = doc.replace("for 10 minutes", "for 5 minutes", 1)
        expect(broken != doc and check_alert_numbers(broken, rules), "a changed duration is not caught")
        changed = [dict(r, expr=r["expr"].replace("< 14", "< 7")) for r in rules]
        expect(check_alert_numbers(doc, changed), "a changed certificate threshold is not caught")
    suite.check("docs/alerts.md: each alert's durations and thresholds are its rule's", alert_numbers)

    def links():
        files = {f: read(f) for f in ["README.md"] + sorted(
            os.path.relpath(p, SOURCE_DIR) for p in glob.glob(os.path.join(SOURCE_DIR, "docs/*.md")))}
        if os.path.exists(os.path.join(SOURCE_DIR, "examples/README.md")):
            files["examples/README.md"] = read("examples/README.md")
        p = check_links(files)
        expect(not p, p)
        expect(check_links({"docs/x.md": "see [notes](../../shared/notes/x.md)"}), "a link outside is not caught")
        expect(check_links({"docs/x.md": "see [gone](gone.md)"}), "a dangling link is not caught")
        pages = sorted(os.path.basename(p) for p in glob.glob(os.path.join(SOURCE_DIR, "docs/*.md"))
                       if os.path.basename(p) != "README.md")
        p = check_index(read("docs/README.md"), pages)
        expect(not p, p)
        expect(check_index("", pages), "a page missing from the index is not caught")
    suite.check("links stay inside the repository and resolve; docs/README.md indexes every page", links)

    def log_quotes():
        files = {f: read(f) for f in ["README.md", "examples/README.md"] + sorted(
            os.path.relpath(p, SOURCE_DIR) for p in glob.glob(os.path.join(SOURCE_DIR, "docs/*.md")))
            if os.path.exists(os.path.join(SOURCE_DIR, f))}
        source = program_source()
        p = check_log_quotes(files, source)
        expect(not p, p)
        expect(check_log_quotes({"x.md": 'the agent logs `registred with kubelet`'}, source),
               "a misquoted log message is not caught")
    suite.check("log messages the docs quote are ones the programs write", log_quotes)
    suite.finish()


if __name__ == "__main__":
    main()
