#!/usr/bin/python3
"""Public names quoted by the docs, the chart and the examples against their sources of truth.

Users copy these names into pod specs, alert routes and overlays, so a quoted name that does not
exist fails silently on their side. The sources of truth, read from the tree:

- common/contract.hpp: extended resources (`aliyun/...`), annotation keys
  (`network.alibabacloud.com/...`), the namespace label, the preload library's file and volume
  names, the DRA driver name; DeviceClass names from manifests/dra;
- the DRA names under the driver's domain (`erdma.aliyun.com/<x>`): the CDI class, the taint, the
  device attributes, the config apiVersion and the plugin's files, from agent/core and agent/dra;
- the metrics the programs register (`.counter("erdma_...")`, `.gauge(`, `.histogram(` in agent/,
  webhook/, common/), as exposed in the Prometheus text format: counters and gauges under their
  registered name (counters are registered with their `_total`), histograms as the family name and
  its `_bucket`, `_sum`, `_count` series; a list of `erdma_webhook_warnings_total{kind}` values is
  every kind of webhook/core/warnings.cpp;
- the alert rules (monitoring/prometheus/erdma-controller.rules.yaml): alert names, their `for:`
  durations, range windows and comparison thresholds; other `Erdma...` words (the DRA config kind,
  Event reasons) are string literals of the programs;
- the project version (ERDMA_VERSION of CMakeLists.txt: `project(... VERSION x.y.z)` and the
  pre-release label ERDMA_VERSION_PRERELEASE, e.g. 0.2.0-rc.1): image tags and "Version x.y.z[-label]"
  must be it; a release the docs name ("agents of 0.1", "0.2's", "a release ... (0.1)") must be
  it, have a CHANGELOG.md heading, or be the release one of those pre-releases leads to.

Scanned: README.md, docs/**/*.md, images/README.md, the chart's README files, Chart.yaml, values.yaml (comments
included), NOTES.txt, examples/**, the Grafana dashboard. Each finding names file:line, the quoted
name and the nearest correct one. ALLOWED below lists, with the reason, the few deliberate
mentions of names that are not ours. The checker runs on a broken fake tree too, to show it fails.

Runs with Debian's /usr/bin/python3 (python3-yaml); reads source files only, writes nothing but
its fake tree under a temporary directory.
"""

import difflib
import glob
import os
import re
import shutil
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("ERDMA_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "../..")))
sys.path.insert(0, os.path.join(SOURCE_DIR, "test/webhook/server/integration"))
from harness import Suite, expect, project_version  # noqa: E402

RULES = "monitoring/prometheus/erdma-controller.rules.yaml"

# Deliberate mentions of names that are not (or no longer) ours: (kind, name) -> why. Keep each
# entry narrow, one name, with the reason; a new doc mention of a wrong name must still fail.
ALLOWED = {
    # test/cluster/cdi.sh writes a CDI spec of its own kind to test the runtime, not the agent.
    ("dra name", "erdma.aliyun.com/test"): "the CDI kind of the runtime test in test/cluster/cdi.sh",
}


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def sources(root, tops, pattern="*/**/*.[ch]pp"):
    for path in sorted(glob.glob(os.path.join(root, pattern), recursive=True)):
        if os.path.relpath(path, root).split(os.sep)[0] in tops:
            yield path, read(root, path)


class Truth:
    """The public names, read from the sources of truth under root."""

    def __init__(self, root):
        contract = read(root, "common/contract.hpp")
        self.contract = dict(re.findall(r'inline constexpr std::string_view (k\w+) = "([^"]*)";', contract))
        self.resources = {v for v in self.contract.values() if v.startswith("aliyun/")}
        self.annotations = {v for v in self.contract.values() if v.startswith("network.alibabacloud.com/")}
        self.label = self.contract.get("kNamespaceLabel")
        self.driver = self.contract.get("kDraDriverName")
        self.dra = self._dra_names(root)
        # DeviceClass names are DNS subdomains of the driver's domain (manifests/dra).
        self.device_classes = set()
        for path in glob.glob(os.path.join(root, "manifests/dra/*.yaml")):
            for doc in yaml.safe_load_all(read(root, path)):
                if isinstance(doc, dict) and doc.get("kind") == "DeviceClass":
                    self.device_classes.add(doc["metadata"]["name"])

        self.metric_kinds = {}
        for _, text in sources(root, ("agent", "webhook", "common")):
            for kind, name in re.findall(r'\.(counter|gauge|histogram)\(\s*"(erdma_[a-z0-9_]+)"', text):
                self.metric_kinds[name] = kind
        self.metrics = set(self.metric_kinds)
        for name, kind in self.metric_kinds.items():
            if kind == "histogram":
                self.metrics |= {name + s for s in ("_bucket", "_sum", "_count")}

        self.rules = {r["alert"]: r for g in yaml.safe_load(read(root, RULES))["groups"] for r in g["rules"]}
        literals = set()
        for _, text in sources(root, ("agent", "webhook", "common")):
            literals |= set(re.findall(r'"(Erdma[A-Za-z0-9]+)"', text))
        self.erdma_words = set(self.rules) | literals

        warnings = read(root, "webhook/core/warnings.cpp")
        self.warning_kinds = set(re.findall(r'case WarningKind::\w+: return "([a-z_]+)";', warnings))

        self.version = project_version(root)
        self.releases = {self.version} if self.version else set()
        if os.path.exists(os.path.join(root, "CHANGELOG.md")):
            self.releases |= set(re.findall(r"^## .*?\b(%s)\b" % SEMVER, read(root, "CHANGELOG.md"), re.M))
        # A pre-release names the release it leads to: "0.2.0-rc.1, a pre-release of 0.2.0".
        self.releases |= {v.split("-")[0] for v in self.releases}
        self.release_lines = self.releases | {".".join(v.split(".")[:2]) for v in self.releases}

    def _dra_names(self, root):
        """What follows `<driver>/` in the names the agent makes: the CDI class, the config's
        apiVersion, the taint key, the device attributes, the kubelet plugin's files."""
        out = set()
        for path in ("agent/core/cdi_spec.hpp", "agent/core/dra_claim.hpp"):
            text = read(root, path)
            for name in ("kCdiClass", "kErdmaConfigApiVersion"):
                for value in re.findall(r"%s = \"([^\"]+)\"" % name, text):
                    out.add(value.split("/")[-1])
        for path in ("agent/dra/dra_plugin.hpp", "agent/dra/dra_service.hpp"):
            out |= set(re.findall(r'k(?:DraSocketName|CheckpointFile) = "([^"]+)"', read(root, path)))
        slices = read(root, "agent/core/dra_slices.cpp")
        out |= set(re.findall(r'driver \+ "/([A-Za-z0-9._-]+)"', slices))
        out |= set(re.findall(r'attrs\["([A-Za-z0-9._-]+)"\]', slices))
        return out

    def rule_numbers(self, alert):
        """(durations in seconds, day thresholds, thresholds) the alert's rule states: `for:` and the
        range windows; the N of `/ 86400 < N`; every number compared against."""
        rule = self.rules[alert]
        unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}
        durations = set()
        if rule.get("for"):
            n, u = re.fullmatch(r"(\d+)([smhd])", str(rule["for"])).groups()
            durations.add(int(n) * unit[u])
        durations |= {int(n) * unit[u] for n, u in re.findall(r"\[(\d+)([smhd])\]", rule["expr"])}
        days = {float(n) for n in re.findall(r"/\s*86400\s*[<>]=?\s*(\d+)", rule["expr"])}
        thresholds = {float(n) for n in re.findall(r"(?:[<>]=?|==)\s*(\d+(?:\.\d+)?)", rule["expr"])}
        return durations, days, thresholds


def scanned_files(root):
    pats = ["README.md", "docs/**/*.md", "images/README.md", "charts/**/README*", "charts/**/Chart.yaml", "charts/**/values.yaml",
            "charts/**/NOTES.txt", "examples/**/*", "monitoring/grafana/*.json"]
    out = []
    for pat in pats:
        for path in sorted(glob.glob(os.path.join(root, pat), recursive=True)):
            rel = os.path.relpath(path, root)
            if os.path.isfile(path) and rel not in out:
                out.append(rel)
    return out


def nearest(name, candidates):
    candidates = sorted(c for c in candidates if c)
    best = difflib.get_close_matches(name, candidates, n=1, cutoff=0.0)
    return best[0] if best else "(none)"


RESOURCE = re.compile(r"(?<![\w./-])aliyun/[a-z0-9][a-z0-9._-]*")
DOMAIN_KEY = re.compile(r"(?<![\w./-])((?:[a-z0-9-]+\.)+(?:alibabacloud|aliyun)\.com)(?:/([A-Za-z0-9._-]*))?")
PRELOAD = re.compile(r"\blibsmc[A-Za-z0-9_-]*\.so\b|(?<![\w./-])erdma-smc-[a-z0-9-]*[a-z0-9]")
LABEL = re.compile(r"(?<![\w./-])erdma-inject[a-z-]*")
METRIC = re.compile(r"\berdma_(?:webhook|agent)_[a-z0-9_]*[a-z0-9]")
ERDMA_WORD = re.compile(r"\bErdma[A-Z][A-Za-z0-9]*\b")
# A semantic version with its pre-release label, if any: 0.2.0, 0.2.0-rc.1.
SEMVER = r"\d+\.\d+\.\d+(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
IMAGE_TAG = re.compile(r"\berdma-\{?(?:webhook|agent|controller)[\w{},-]*:(%s)\b" % SEMVER)
STATED_VERSION = re.compile(r"\b(?:[Vv]ersion|the project version),?\s+(%s)\b" % SEMVER)
RELEASE = r"(?:%s|\d+\.\d+)" % SEMVER
RELEASE_REF = re.compile(r"\b(?:agents?|webhooks?|releases?|erdma-controller)\s+(?:of|older than|before|from|newer than)"
                         r"\s+(%s)\b|\b(%s)'s\b|\brelease\b[^()\n]{0,80}\((%s)\)" % (RELEASE, RELEASE, RELEASE))
COMPARISON = re.compile(r"(?:[<>]=?|==)\s*(\d+(?:\.\d+)?)(\s*\*\s*86400)?")
DURATION = re.compile(r"\b(\d+|an|one|a)\s+(minutes?|hours?|days?)\b")
BELOW = re.compile(r"\b(?:below|under|less than|fewer than)\s+(\d+)\b")
WORDS = {"minute": 60, "hour": 3600, "day": 86400}


def check_text(path, text, truth):
    """Findings (strings) for one file's text."""
    found = []

    def report(lineno, kind, name, candidates, what):
        if (kind, name) in ALLOWED:
            return
        hint = "" if candidates is None else "; nearest correct: %s" % nearest(name, candidates)
        found.append("%s:%d: %s %s %s%s" % (path, lineno, kind, name, what, hint))

    rule_metrics = {a: set(METRIC.findall(r["expr"])) for a, r in truth.rules.items()}
    paragraphs = re.split(r"\n\s*\n", text)
    offsets, pos = [], 0
    for para in paragraphs:
        start = text.index(para, pos)
        offsets.append(start)
        pos = start + len(para)

    for lineno, line in enumerate(text.splitlines(), 1):
        for m in RESOURCE.finditer(line):
            name = m.group(0).rstrip(".-_")
            if name not in truth.resources:
                report(lineno, "resource", name, truth.resources, "is not an extended resource of common/contract.hpp")
        for m in DOMAIN_KEY.finditer(line):
            domain, rest = m.group(1), m.group(2)
            if domain == "network.alibabacloud.com":
                if rest:
                    key = "%s/%s" % (domain, rest.rstrip(".-_"))
                    if key not in truth.annotations:
                        report(lineno, "annotation", key, truth.annotations, "is not a key of common/contract.hpp")
            elif domain in truth.device_classes and not rest:
                pass
            elif domain == truth.driver:
                if rest:
                    first = re.split(r"[=]", rest)[0].rstrip(".-_")
                    if first not in truth.dra:
                        name = "%s/%s" % (domain, first)
                        report(lineno, "dra name", name, {"%s/%s" % (domain, x) for x in truth.dra},
                               "is not a name the agent's DRA driver makes")
            else:
                report(lineno, "domain", domain, {"network.alibabacloud.com", truth.driver} | truth.device_classes,
                       "is not one of the project's domains (the annotations', the DRA driver's, its DeviceClasses')")
        for name in PRELOAD.findall(line):
            if name not in (truth.contract.get("kPreloadLibrary"), truth.contract.get("kPreloadVolumeName")):
                report(lineno, "preload name", name, {truth.contract.get("kPreloadLibrary"),
                                                      truth.contract.get("kPreloadVolumeName")},
                       "is neither the preload library nor its volume of common/contract.hpp")
        for m in LABEL.finditer(line):
            name = m.group(0).rstrip("-")
            if name != truth.label:
                report(lineno, "label", name, {truth.label}, "is not the namespace label of common/contract.hpp")
        for name in METRIC.findall(line):
            if name not in truth.metrics:
                report(lineno, "metric", name, truth.metrics, "is not exposed by the programs")
        for name in ERDMA_WORD.findall(line):
            if name not in truth.erdma_words:
                report(lineno, "alert", name, truth.erdma_words,
                       "is neither an alert of %s nor a name the programs write" % RULES)
        for m in IMAGE_TAG.finditer(line):
            if m.group(1) != truth.version:
                report(lineno, "version", m.group(1), {truth.version}, "tags an image, not with the project version")
        for m in STATED_VERSION.finditer(line):
            if m.group(1) != truth.version:
                report(lineno, "version", m.group(1), {truth.version}, "is stated as the version, not the project version")
        for m in RELEASE_REF.finditer(line):
            v = next(g for g in m.groups() if g)
            if v.startswith("0.") and v not in truth.release_lines:
                report(lineno, "version", v, truth.release_lines,
                       "names a release that neither CMakeLists.txt nor CHANGELOG.md has")
        # A list of the webhook's warning kinds is all of them.
        if "erdma_webhook_warnings_total{kind}" in line:
            listed = set(re.findall(r"`([a-z]+(?:_[a-z]+)+)`", line)) - {"erdma_webhook_warnings_total"}
            if len(listed) >= 3:
                for name in sorted(listed - truth.warning_kinds):
                    report(lineno, "warning kind", name, truth.warning_kinds, "is not a kind of webhook/core/warnings.cpp")
                for name in sorted(truth.warning_kinds - listed):
                    report(lineno, "warning kind", name, None, "is missing from the list of kinds")
        # A quoted expression over a metric the alerts use: its comparison is one of theirs. In
        # Markdown only code spans count (prose such as "TLS < 1.2" is no expression).
        users = [a for a, metrics in rule_metrics.items() if any(re.search(r"\b%s\b" % x, line) for x in metrics)]
        if users:
            days, thresholds = set(), set()
            for alert in users:
                _, d, t = truth.rule_numbers(alert)
                days, thresholds = days | d, thresholds | t
            spans = re.findall(r"`([^`]+)`", line) if path.endswith(".md") else [line]
            for span in spans:
                for m in COMPARISON.finditer(span):
                    value = float(m.group(1))
                    if m.group(2):
                        ok, said, want = value in days, "%s*86400" % m.group(1), {"%g*86400" % d for d in days}
                    else:
                        ok, said, want = value in thresholds, m.group(1), {"%g" % t for t in thresholds}
                    if not ok:
                        report(lineno, "threshold", said, want, "differs from the rules of %s" % ", ".join(users))

    # Sentences that name exactly one alert: the durations and "below N" they state are the rule's.
    for para, start in zip(paragraphs, offsets):
        for sent in re.split(r"(?<=[.;:])\s+(?=[A-Z(`])", para):
            alerts = set(re.findall(r"\bErdma[A-Z][A-Za-z0-9]*\b", sent)) & set(truth.rules)
            if len(alerts) != 1:
                continue
            alert = alerts.pop()
            durations, days, thresholds = truth.rule_numbers(alert)
            lineno = text.count("\n", 0, text.index(sent, start)) + 1
            for n, w in DURATION.findall(sent):
                seconds = (1 if n in ("an", "one", "a") else int(n)) * WORDS[w.rstrip("s")]
                if seconds not in durations and seconds / 86400 not in days:
                    report(lineno, "threshold", "%s %s" % (n, w), {"%d s" % d for d in durations} | {"%g days" % d for d in days},
                           "differs from the rule of %s (seconds)" % alert)
            for n in BELOW.findall(sent):
                if float(n) not in thresholds | days:
                    report(lineno, "threshold", "below %s" % n, {"%g" % t for t in thresholds | days},
                           "differs from the rule of %s" % alert)
    return found


def check_tree(root, truth):
    found = []
    for path in scanned_files(root):
        try:
            text = read(root, path)
        except UnicodeDecodeError:
            continue
        found += check_text(path, text, truth)
    return found


def fake_tree(root):
    """The smallest tree Truth reads, plus docs with one wrong name of each kind."""
    files = {
        "common/contract.hpp": read(SOURCE_DIR, "common/contract.hpp"),
        "CMakeLists.txt": "project(erdma-controller VERSION 0.8.0 LANGUAGES C CXX)\nset(ERDMA_VERSION_PRERELEASE \"rc.1\")\n",
        "CHANGELOG.md": "# Changelog\n\n## Unreleased\n\n## 0.8.0-rc.1 (not tagged)\n\n## 0.7.3\n",
        RULES: read(SOURCE_DIR, RULES),
        "agent/core/cdi_spec.hpp": 'inline constexpr std::string_view kCdiClass = "claim";\n',
        "agent/core/dra_claim.hpp": 'inline constexpr std::string_view kErdmaConfigApiVersion = "erdma.aliyun.com/v1alpha1";\n',
        "agent/dra/dra_plugin.hpp": 'inline constexpr std::string_view kDraSocketName = "dra.sock";\n',
        "agent/dra/dra_service.hpp": "",
        "webhook/core/warnings.cpp": 'case WarningKind::A: return "resource_added";\n'
                                     'case WarningKind::B: return "resource_zero";\n'
                                     'case WarningKind::C: return "windows_pod";\n'
                                     'case WarningKind::D: return "smcr_not_allowed";\n',
        "agent/core/dra_slices.cpp": 'attrs["ibDevice"] = 1; key = f.driver + "/unhealthy";\n',
        "agent/metrics/m.cpp": 'r.counter("erdma_agent_scans_total", "h"); r.histogram("erdma_agent_allocate_duration_seconds", "h", b);\n'
                              'r.gauge("erdma_webhook_tls_cert_not_after_seconds", "h"); r.counter("erdma_webhook_reloads_total", "h");\n'
                              'r.counter("erdma_webhook_warnings_total", "h");\n',
        "manifests/dra/deviceclass.yaml": "kind: DeviceClass\nmetadata: {name: smcr.erdma.aliyun.com}\n",
        "README.md": "Request `aliyun/erdma: 1`; see `erdma_agent_scans_total` and ErdmaAgentDown.\n"
                     "**Status.** Version 0.8.0-rc.1, tag `erdma-agent:0.8.0-rc.1`. Agents of 0.7 and 0.8's webhook.\n"
                     "Label `erdma-injection=enabled`; remove with `erdma-injection-`. Volume `erdma-smc-preload`.\n"
                     "Alert on `erdma_webhook_tls_cert_not_after_seconds - time() < 14*86400` (TLS < 1.2 is prose).\n"
                     "ErdmaWebhookCertificateExpiringSoon fires when fewer than 14 days are left, for an hour.\n"
                     "The class `smcr.erdma.aliyun.com`; CDI `erdma.aliyun.com/claim=uid-erdma_0`.\n",
        "docs/broken.md": "Ask for `aliyun/erdma-smc: 1`.\n"
                          "Annotate `network.alibabacloud.com/erdma-smr: \"true\"`.\n"
                          "Label `erdma-injected=enabled`; preload `libsmc_preload.so`.\n"
                          "Watch `erdma_agent_scan_total` and `erdma_agent_allocate_duration_seconds_bucket`.\n"
                          "ErdmaAgentDwn fires.\n"
                          "Alert on `erdma_webhook_tls_cert_not_after_seconds - time() < 30*86400`.\n"
                          "ErdmaAgentNotRegistered fires after 3 minutes.\n"
                          "| `erdma_webhook_warnings_total{kind}` | `resource_added`, `resource_zer`, `windows_pod`, `resource_zero` |\n"
                          "Tag `erdma-agent:0.6.0`, `erdma-webhook:0.8.0`. Nodes older than the agents of 0.5. A release that did it (0.4).\n"
                          "CDI names `erdma.aliyun.com/rdma=erdma_0`, keys `smc.alibabacloud.com/x`.\n",
        "examples/pod.yaml": "resources: {limits: {aliyun/ermda: 1}}\n",
        "charts/c/values.yaml": "# adds aliyun/erdma-smcr; metric erdma_webhook_reload_total\n",
    }
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)


def main():
    suite = Suite("docs-public-names")

    def sources_of_truth():
        truth = Truth(SOURCE_DIR)
        expect({"kResourceName", "kSmcrResourceName", "kSmcrAnnotation", "kNamespaceLabel", "kDraDriverName"}
               <= set(truth.contract), "contract.hpp no longer parses: %s" % sorted(truth.contract))
        expect(len(truth.resources) >= 2 and len(truth.annotations) >= 5, (truth.resources, truth.annotations))
        expect(len(truth.metric_kinds) >= 30, "found only %d registered metrics: the pattern no longer matches "
               "the code" % len(truth.metric_kinds))
        expect({"claim", "v1alpha1", "unhealthy", "ibDevice", "dra.sock", "checkpoint.json"} <= truth.dra,
               "the DRA names no longer parse: %s" % sorted(truth.dra))
        expect(len(truth.rules) >= 10 and truth.version, (sorted(truth.rules), truth.version))
    suite.check("the sources of truth parse (contract.hpp, metric registrations, DRA names, rules, version)",
                sources_of_truth)

    def real_tree():
        found = check_tree(SOURCE_DIR, Truth(SOURCE_DIR))
        expect(not found, "\n" + "\n".join(found))
    suite.check("every public name quoted in README, docs, chart and examples exists in its source of truth",
                real_tree)

    def broken_tree():
        root = tempfile.mkdtemp(prefix="erdma-public-names-")
        try:
            fake_tree(root)
            found = check_tree(root, Truth(root))
        finally:
            shutil.rmtree(root)
        text = "\n".join(found)
        want = [
            "docs/broken.md:1: resource aliyun/erdma-smc is not an extended resource of common/contract.hpp; "
            "nearest correct: aliyun/erdma-smcr",
            "docs/broken.md:2: annotation network.alibabacloud.com/erdma-smr is not a key of common/contract.hpp; "
            "nearest correct: network.alibabacloud.com/erdma-smcr",
            "docs/broken.md:3: label erdma-injected is not the namespace label",
            "docs/broken.md:3: preload name libsmc_preload.so", "nearest correct: libsmc-preload.so",
            "docs/broken.md:4: metric erdma_agent_scan_total is not exposed by the programs; "
            "nearest correct: erdma_agent_scans_total",
            "docs/broken.md:6: threshold 30*86400 differs from the rules of ErdmaWebhookCertificateExpiringSoon, "
            "ErdmaWebhookCertificateExpired; nearest correct: 14*86400",
            "docs/broken.md:5: alert ErdmaAgentDwn is neither an alert", "nearest correct: ErdmaAgentDown",
            "docs/broken.md:7: threshold 3 minutes differs from the rule of ErdmaAgentNotRegistered",
            "docs/broken.md:8: warning kind resource_zer is not a kind", "nearest correct: resource_zero",
            "docs/broken.md:8: warning kind smcr_not_allowed is missing",
            "docs/broken.md:9: version 0.6.0 tags an image",
            "docs/broken.md:9: version 0.8.0 tags an image, not with the project version; nearest correct: 0.8.0-rc.1",
            "docs/broken.md:9: version 0.5 names a release",
            "docs/broken.md:9: version 0.4 names a release",
            "docs/broken.md:10: dra name erdma.aliyun.com/rdma", "nearest correct: erdma.aliyun.com/claim",
            "docs/broken.md:10: domain smc.alibabacloud.com",
            "examples/pod.yaml:1: resource aliyun/ermda", "nearest correct: aliyun/erdma",
            "charts/c/values.yaml:1: metric erdma_webhook_reload_total", "nearest correct: erdma_webhook_reloads_total",
        ]
        missing = [w for w in want if w not in text]
        expect(not missing, "not reported: %s\nreported:\n%s" % (missing, text))
        expect(not [f for f in found if f.startswith("README.md")], "correct names reported:\n" + text)
        expect(len(found) == 18, "expected exactly the 18 planted mistakes:\n" + text)
    suite.check("a fake tree with a wrong name of each kind fails, naming file:line and the nearest name",
                broken_tree)

    def allow_list_is_narrow():
        for (kind, name), why in ALLOWED.items():
            expect(why and kind in ("resource", "annotation", "label", "preload name", "warning kind", "metric", "alert", "dra name", "domain",
                                    "version", "threshold") and "*" not in name, (kind, name, why))
    suite.check("each allow-list entry is one name with its reason", allow_list_is_narrow)
    suite.finish()


if __name__ == "__main__":
    main()
