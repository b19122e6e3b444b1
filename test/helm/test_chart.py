#!/usr/bin/python3
"""charts/erdma-controller, checked by a real helm (test/helm/build-helm.sh builds it once per machine).

1. Same objects as kustomize. `helm template` with values equivalent to an overlay must render the
   objects `kubectl kustomize` renders for it, object by object (kind, namespace, name): the nine
   overlays manifests/{default,fail-open,nfd,cert-manager,monitoring,network-policy,erdma-env,dra,
   admission-policy}, the four
   other combinations of certificate source, failure policy and NFD (as kustomize overlays
   composed here the way manifests/nfd's comment tells), and test/cluster/lib.sh's site overlay
   with a static device.
   What legitimately differs is normalised first, and only that (see normalise_helm and
   normalise_kustomize):
     - helm's labels helm.sh/chart, app.kubernetes.io/managed-by and app.kubernetes.io/instance on
       every object's metadata (checked for their values, then dropped);
     - the agent's ConfigMap: kustomize's configMapGenerator names it erdma-agent-config-<content
       hash> and the DaemonSet's config volume names that; the chart keeps the fixed name
       erdma-agent-config and rolls the DaemonSet with the pod-template annotation
       checksum/agent-config instead (checked to be the sha256 of the ConfigMap's config.yaml,
       then dropped; the kustomize name's hash suffix is dropped);
     - the config.yaml of both ConfigMaps is compared as parsed YAML: kustomize copies the file
       with its comments, the chart writes the values with toYaml (sorted keys, no comments).
   Any other difference fails, with a unified diff of the object.
2. Every value combination that matters renders and keeps its invariants (certificate source x
   failure policy x NFD x namespace x replicas), and `helm lint --strict` passes on each mode.
   A namespace other than erdma-system is manifests/default with every erdma-system replaced.
   certificates.mode generate is manifests/default plus the Secret and the caBundle, and its
   certificate verifies (openssl) for the Service's name.
3. values.schema.json refuses bad values with a message naming the field.
4. Chart.yaml's version and appVersion are the project version (ERDMA_VERSION of CMakeLists.txt,
   pre-release label included); NOTES.txt tells each mode's next steps.
5. agent.config.dra: with another driver name and other directories, the RBAC, the DeviceClasses
   (their CEL evaluated on sample devices) and the DaemonSet's mounts follow the config.

The agent ConfigMaps the chart renders are also fed to `erdma-agent config` and the webhook's to
`erdma-webhook config` when those are built. Runs with Debian's /usr/bin/python3 (python3-yaml).
Needs no cluster: lookup (the generate mode's reuse on upgrade) can only be seen on one.
"""

import base64
import copy
import difflib
import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("ERDMA_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "../..")))
sys.path.insert(0, os.path.join(SOURCE_DIR, "test/manifests"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "test/webhook/server/integration"))
import admission_match  # noqa: E402
import cel  # noqa: E402  (test/manifests/cel.py: the DeviceClasses' selectors on sample devices)
import test_manifests as tm  # noqa: E402  (kubectl discovery and rendering, the binaries' config check)
from harness import Suite, expect  # noqa: E402

CHART = os.path.join(SOURCE_DIR, "charts/erdma-controller")
BUILD_HELM = os.path.join(HERE, "build-helm.sh")
RELEASE = "erdma-controller"
NS = "erdma-system"
AGENT_CM = "erdma-agent-config"
CHECKSUM = "checksum/agent-config"
HELM_LABEL_KEYS = ("helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance")
# test/cluster/lib.sh's product_site: the agent config with one static device instead of verbs.
STATIC_DEVICES = [{"name": "erdma_0", "uverbs": "uverbs0", "netdev": "eth0"}]
# manifests/monitoring: the PrometheusRule, the metrics Services and ServiceMonitors, the agent on
# the node's IP.
MONITORING_VALUES = {"agent": {"metricsOnNodeIP": True},
                     "monitoring": {"prometheusRule": {"enabled": True}, "serviceMonitor": {"enabled": True}}}
# manifests/dra: the agent's DRA driver, its RBAC and DeviceClasses.
DRA_VALUES = {"agent": {"config": {"dra": {"enabled": True}}}}
# manifests/nccl-only: the chart's values-nccl-only.yaml, as a user passes it with -f.
with open(os.path.join(CHART, "values-nccl-only.yaml")) as _f:
    NCCL_ONLY_VALUES = yaml.safe_load(_f)
# ... with another driver name and other directories (a trailing slash, as the agent allows).
DRA_ELSEWHERE = {"enabled": True, "driverName": "rdma.example.com", "registryDir": "/var/lib/k0s/kubelet/plugins_registry",
                 "pluginDir": "/var/lib/k0s/kubelet/plugins", "cdiDir": "/etc/cdi/", "hookDir": "/opt/erdma/dra/"}
SITE_SETS = ["--set", "agent.config.devices.source=static",
             "--set-json", "agent.config.devices.static=" + json.dumps(STATIC_DEVICES, separators=(",", ":"))]


# --- helm ------------------------------------------------------------------------------------------

def find_helm():
    """(path, None), or (None, why not). ERDMA_HELM names a helm to use; otherwise build-helm.sh
    builds the pinned one (at once when it is already in the machine's cache)."""
    if os.environ.get("ERDMA_HELM"):
        return os.environ["ERDMA_HELM"], None
    if not shutil.which("go") and not os.access("/usr/local/go/bin/go", os.X_OK):
        return None, "no Go toolchain to build helm with (scripts/install-deps.sh installs Go 1.26)"
    try:
        r = subprocess.run([BUILD_HELM], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=1500)
    except subprocess.TimeoutExpired:
        return None, "test/helm/build-helm.sh did not finish in 25 minutes"
    if r.returncode != 0:
        return None, "test/helm/build-helm.sh failed: %s" % r.stderr.strip()[-2000:]
    print(r.stderr.strip())
    return r.stdout.strip().splitlines()[-1], None


class Helm:
    def __init__(self, path, workdir):
        self.path = path
        self.workdir = workdir
        self.count = 0

    def run(self, *args):
        return subprocess.run([self.path, *args], capture_output=True, text=True, timeout=120)

    def values_file(self, values):
        self.count += 1
        path = os.path.join(self.workdir, "values-%d.yaml" % self.count)
        with open(path, "w") as f:
            yaml.safe_dump(values or {}, f)
        return path

    def template_text(self, values=None, args=(), chart=CHART, release=RELEASE):
        r = subprocess.run([self.path, "template", release, chart, "-f", self.values_file(values), *args],
                           capture_output=True, text=True, timeout=120)
        expect(r.returncode == 0, "helm template %s with %s %s exited %d: %s" % (
            os.path.relpath(chart, SOURCE_DIR), values, " ".join(args), r.returncode, r.stderr))
        return r.stdout

    def template(self, values=None, args=(), chart=CHART, release=RELEASE):
        return objects(self.template_text(values, args, chart, release), "helm template")

    def refuses(self, values=None, args=()):
        """helm template's exit status and message for values it should refuse."""
        r = subprocess.run([self.path, "template", RELEASE, CHART, "-f", self.values_file(values), *args],
                           capture_output=True, text=True, timeout=120)
        return r.returncode, r.stderr.strip()

    def lint(self, values=None, args=()):
        r = subprocess.run([self.path, "lint", "--strict", CHART, "-f", self.values_file(values), *args],
                           capture_output=True, text=True, timeout=120)
        return r.returncode, (r.stdout + r.stderr).strip()


def objects(text, what):
    objs = {}
    for d in yaml.safe_load_all(text):
        if not d:
            continue
        key = (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])
        expect(key not in objs, "%s: duplicate object %s" % (what, key))
        objs[key] = d
    return objs


# --- normalisation: exactly what legitimately differs between the two renderings -------------------

def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


def normalise_helm(objs, release=RELEASE):
    """The chart's objects with helm's own labels and the agent config checksum checked and
    dropped, and each config.yaml parsed."""
    version = tm.project_version()
    want = {"helm.sh/chart": "erdma-controller-" + version, "app.kubernetes.io/managed-by": "Helm",
            "app.kubernetes.io/instance": release}
    out = {}
    for key, o in objs.items():
        o = copy.deepcopy(o)
        labels = o["metadata"].get("labels") or {}
        got = {k: labels.pop(k, None) for k in HELM_LABEL_KEYS}
        expect(got == want, "%s %s: helm labels %s, want %s" % (key[0], key[2], got, want))
        if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "erdma-agent":
            tmpl = o["spec"]["template"]["metadata"]
            annotations = tmpl.get("annotations") or {}
            checksum = annotations.pop(CHECKSUM, None)
            cm = objs.get(("ConfigMap", key[1], AGENT_CM))
            expect(cm is not None, "the chart renders no ConfigMap %s" % AGENT_CM)
            expect(checksum == sha256(cm["data"]["config.yaml"]),
                   "DaemonSet erdma-agent: %s %r is not the sha256 of ConfigMap %s's config.yaml" %
                   (CHECKSUM, checksum, AGENT_CM))
            if not annotations:
                tmpl.pop("annotations", None)
        parse_config(o)
        out[key] = o
    return out


def normalise_kustomize(objs):
    """kustomize's objects with the agent ConfigMap's content-hash suffix dropped (in its name and
    in the DaemonSet's reference), and each config.yaml parsed."""
    out = {}
    for key, o in objs.items():
        o = copy.deepcopy(o)
        if o["kind"] == "ConfigMap" and tm.AGENT_CONFIG_NAME.fullmatch(o["metadata"]["name"]):
            o["metadata"]["name"] = AGENT_CM
            key = (key[0], key[1], AGENT_CM)
        if o["kind"] == "DaemonSet":
            v = tm.volume(o["spec"]["template"]["spec"], "config")
            if v and tm.AGENT_CONFIG_NAME.fullmatch(v["configMap"]["name"]):
                v["configMap"]["name"] = AGENT_CM
        parse_config(o)
        expect(key not in out, "two objects normalise to %s" % (key,))
        out[key] = o
    return out


def parse_config(o):
    if o["kind"] == "ConfigMap" and "config.yaml" in (o.get("data") or {}):
        o["data"]["config.yaml"] = yaml.safe_load(o["data"]["config.yaml"])


def differences(kustomize, helm):
    """Readable differences between two normalised renderings, or []."""
    out = []
    for key in sorted(set(kustomize) - set(helm)):
        out.append("only kustomize renders %s %s/%s" % key)
    for key in sorted(set(helm) - set(kustomize)):
        out.append("only the chart renders %s %s/%s" % key)
    for key in sorted(set(kustomize) & set(helm)):
        if kustomize[key] != helm[key]:
            a = yaml.safe_dump(kustomize[key], sort_keys=True, width=1000).splitlines()
            b = yaml.safe_dump(helm[key], sort_keys=True, width=1000).splitlines()
            diff = "\n".join(difflib.unified_diff(a, b, "kustomize", "helm", lineterm="", n=3))
            out.append("%s %s/%s differs:\n%s" % (key[0], key[1], key[2], diff))
    return out


def expect_same(kustomize, helm, what):
    diff = differences(normalise_kustomize(kustomize), normalise_helm(helm))
    expect(not diff, "%s: the chart and kustomize differ:\n%s" % (what, "\n".join(diff)))


# --- kustomize overlays composed from manifests/ ------------------------------------------------------

def compose_overlay(root, name, cert_manager, fail_open, nfd, agent_config=None):
    """An overlay of manifests/ (copied under root) with the chosen pieces, as docs/install.md and
    manifests/nfd tell a site to compose them: cert-manager or default as the base, fail-open's
    patch, nfd's generator and patch; agent_config replaces the agent's config.yaml."""
    d = os.path.join(root, name)
    os.makedirs(d)
    m = os.path.join(root, "manifests")
    k = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
         "resources": ["../manifests/" + ("cert-manager" if cert_manager else "default")]}
    if fail_open:
        shutil.copy(os.path.join(m, "fail-open/failure-policy-ignore.yaml"), d)
        k.setdefault("patches", []).extend(
            yaml.safe_load(open(os.path.join(m, "fail-open/kustomization.yaml")))["patches"])
    if nfd:
        shutil.copy(os.path.join(m, "nfd/agent-nfd.yaml"), d)
        k.setdefault("patches", []).append({"path": "agent-nfd.yaml"})
        shutil.copy(os.path.join(m, "nfd/agent-config.yaml"), d)
    if agent_config is not None:
        with open(os.path.join(d, "agent-config.yaml"), "w") as f:
            f.write(agent_config)
    if nfd or agent_config is not None:
        k["configMapGenerator"] = [{"name": AGENT_CM, "namespace": NS,
                                    "behavior": "replace" if agent_config is not None else "merge",
                                    "files": ["config.yaml=agent-config.yaml"]}]
    with open(os.path.join(d, "kustomization.yaml"), "w") as f:
        yaml.safe_dump(k, f)
    return d


def kustomize(kubectl, directory):
    r = subprocess.run([kubectl, "kustomize", directory], capture_output=True, text=True, timeout=120)
    expect(r.returncode == 0, "%s kustomize %s exited %d: %s" % (kubectl, directory, r.returncode, r.stderr))
    return objects(r.stdout, "kustomize " + directory)


def site_agent_config():
    """test/cluster/lib.sh's product_site edit of the base agent config, done the same way."""
    with open(os.path.join(SOURCE_DIR, "manifests/base/agent-config.yaml")) as f:
        text = f.read()
    edited = re.sub(r"(?m)^  source: verbs$",
                    "  source: static\n  static: [{name: erdma_0, uverbs: uverbs0, netdev: eth0}]", text)
    expect(edited != text, "manifests/base/agent-config.yaml has no line '  source: verbs' to replace")
    return edited


# --- invariants of one rendering -------------------------------------------------------------------

def webhook_configuration(objs):
    mwc = objs[("MutatingWebhookConfiguration", "", "erdma-webhook")]
    expect(len(mwc["webhooks"]) == 1, "want one webhook")
    return mwc, mwc["webhooks"][0]


def excluded_by_selector(hook):
    for e in hook["namespaceSelector"]["matchExpressions"]:
        if e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "NotIn":
            return e["values"]
    return None


def b64(s):
    return base64.b64decode(s).decode()


def check_invariants(objs, mode, fail_open, nfd, ns, create, replicas):
    p = []
    kinds = {}
    for (kind, o_ns, name), o in objs.items():
        kinds.setdefault(kind, []).append(name)
        if kind not in ("Namespace", "MutatingWebhookConfiguration") and o_ns != ns:
            p.append("%s %s in namespace %r, want %s" % (kind, name, o_ns, ns))
    if (("Namespace", "", ns) in objs) != create:
        p.append("Namespace %s rendered: %s, namespace.create: %s" % (ns, ("Namespace", "", ns) in objs, create))
    if [k for k in objs if k[0] == "Namespace" and k[2] != ns]:
        p.append("another Namespace is rendered")
    mwc, hook = webhook_configuration(objs)
    svc = hook["clientConfig"]["service"]
    if (svc["name"], svc["namespace"]) != ("erdma-webhook", ns) or ("Service", ns, "erdma-webhook") not in objs:
        p.append("the webhook configuration calls Service %s/%s" % (svc["namespace"], svc["name"]))
    if hook["name"] != "pods.erdma-webhook.%s.svc" % ns:
        p.append("webhook name %s" % hook["name"])
    if hook["failurePolicy"] != ("Ignore" if fail_open else "Fail"):
        p.append("failurePolicy %s" % hook["failurePolicy"])
    excluded = excluded_by_selector(hook)
    config = yaml.safe_load(objs[("ConfigMap", ns, "erdma-webhook-config")]["data"]["config.yaml"])
    if excluded != ["kube-system", ns] or config.get("excludedNamespaces") != excluded:
        p.append("excluded namespaces: selector %s, config %s, want [kube-system, %s] in both" %
                 (excluded, config.get("excludedNamespaces"), ns))
    # the certificate source
    secret = objs.get(("Secret", ns, "erdma-webhook-tls"))
    ca_bundle = hook["clientConfig"].get("caBundle")
    annotations = mwc["metadata"].get("annotations") or {}
    cert_manager_objs = sorted(k[2] for k in objs if k[0] in ("Issuer", "Certificate"))
    if mode == "generate":
        if not secret or secret.get("type") != "kubernetes.io/tls":
            p.append("generate: no kubernetes.io/tls Secret erdma-webhook-tls")
        elif ca_bundle != secret["data"].get("ca.crt"):
            p.append("generate: caBundle is not the Secret's ca.crt")
    elif secret or ca_bundle:
        p.append("%s: the chart renders the Secret (%s) or the caBundle (%s), which erdma-certs or "
                 "cert-manager own" % (mode, bool(secret), bool(ca_bundle)))
    if mode == "certManager":
        if annotations.get("cert-manager.io/inject-ca-from") != ns + "/erdma-webhook":
            p.append("certManager: inject-ca-from %s" % annotations.get("cert-manager.io/inject-ca-from"))
        cert = objs.get(("Certificate", ns, "erdma-webhook"))
        if not cert or "erdma-webhook.%s.svc" % ns not in cert["spec"]["dnsNames"] or \
                cert["spec"]["secretName"] != "erdma-webhook-tls":
            p.append("certManager: the Certificate does not cover erdma-webhook.%s.svc into erdma-webhook-tls" % ns)
        if cert_manager_objs != ["erdma-ca", "erdma-selfsigned", "erdma-webhook", "erdma-webhook-ca"]:
            p.append("certManager: Issuers and Certificates %s" % cert_manager_objs)
    elif annotations or cert_manager_objs:
        p.append("%s: cert-manager objects %s or annotations %s" % (mode, cert_manager_objs, annotations))
    dep = objs[("Deployment", ns, "erdma-webhook")]
    tls = tm.volume(dep["spec"]["template"]["spec"], "tls")
    if tls["secret"]["secretName"] != "erdma-webhook-tls":
        p.append("the Deployment mounts Secret %s" % tls["secret"]["secretName"])
    # replicas and the PodDisruptionBudget
    if dep["spec"]["replicas"] != replicas:
        p.append("replicas %s, want %s" % (dep["spec"]["replicas"], replicas))
    if (("PodDisruptionBudget", ns, "erdma-webhook") in objs) != (replicas >= 2):
        p.append("a PodDisruptionBudget with %d replica(s): %s" % (replicas, not replicas >= 2))
    # the agent: NFD and the config checksum
    ds = objs[("DaemonSet", ns, "erdma-agent")]
    pod = ds["spec"]["template"]["spec"]
    cm = objs[("ConfigMap", ns, AGENT_CM)]
    agent_cfg = yaml.safe_load(cm["data"]["config.yaml"])
    features = tm.volume(pod, "nfd-features")
    mounted = tm.mount_for(pod["containers"][0], tm.NFD_FEATURES_DIR + "/erdma")
    if nfd:
        if agent_cfg.get("nfdFeatureFile") != tm.NFD_FEATURES_DIR + "/erdma" or not features or \
                features["hostPath"]["path"] != tm.NFD_FEATURES_DIR or not mounted or mounted.get("readOnly"):
            p.append("nfd: nfdFeatureFile %r, volume %s, mount %s" % (agent_cfg.get("nfdFeatureFile"), features, mounted))
    elif agent_cfg.get("nfdFeatureFile") != "" or features or mounted:
        p.append("no nfd: nfdFeatureFile %r, volume %s" % (agent_cfg.get("nfdFeatureFile"), features))
    if ds["spec"]["template"]["metadata"]["annotations"].get(CHECKSUM) != sha256(cm["data"]["config.yaml"]):
        p.append("the DaemonSet's %s is not the ConfigMap's sha256" % CHECKSUM)
    if tm.volume(pod, "config")["configMap"]["name"] != AGENT_CM:
        p.append("the DaemonSet mounts ConfigMap %s" % tm.volume(pod, "config")["configMap"]["name"])
    # no DRA driver unless asked for: no token, no RBAC, no DeviceClass, none of its directories
    dra_objs = sorted(k for k in objs if k[0] in ("ClusterRole", "ClusterRoleBinding", "DeviceClass"))
    dra_dirs = sorted(v["hostPath"]["path"] for v in pod["volumes"]
                      if "hostPath" in v and v["hostPath"]["path"] in
                      tm.dra_host_dirs(tm.dra_config({"dra": {"enabled": True}})).values())
    if pod.get("automountServiceAccountToken") is not False or dra_objs or dra_dirs or \
            (agent_cfg.get("dra") or {}).get("enabled"):
        p.append("without agent.config.dra.enabled: token %s, DRA objects %s, DRA directories %s" %
                 (pod.get("automountServiceAccountToken"), dra_objs, dra_dirs))
    return p


def openssl(*args, stdin=None):
    r = subprocess.run(["openssl", *args], input=stdin, capture_output=True, text=True, timeout=60)
    expect(r.returncode == 0, "openssl %s exited %d: %s" % (" ".join(args), r.returncode, r.stderr))
    return r.stdout


def check_generated_pair(objs, ns, workdir, days):
    """The generate mode's Secret: a serving certificate for the Service's names, ECDSA P-256,
    signed by the CA in ca.crt, which is the caBundle; its key matches; valid for `days`."""
    secret = objs[("Secret", ns, "erdma-webhook-tls")]
    d = os.path.join(workdir, "generated-" + ns)
    os.makedirs(d, exist_ok=True)
    files = {}
    for key in ("tls.crt", "tls.key", "ca.crt"):
        files[key] = os.path.join(d, key)
        with open(files[key], "w") as f:
            f.write(b64(secret["data"][key]))
    pems = re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n?", b64(secret["data"]["tls.crt"]), re.S)
    expect(len(pems) == 2, "tls.crt holds %d certificates, want the leaf and its CA" % len(pems))
    expect(pems[1].strip() == b64(secret["data"]["ca.crt"]).strip(), "tls.crt's second certificate is not ca.crt")
    leaf = os.path.join(d, "leaf.crt")
    with open(leaf, "w") as f:
        f.write(pems[0])
    out = openssl("verify", "-CAfile", files["ca.crt"], "-purpose", "sslserver", leaf)
    expect(out.strip().endswith("OK"), out)
    for name in ("erdma-webhook.%s.svc" % ns, "erdma-webhook.%s.svc.cluster.local" % ns, "erdma-webhook.%s" % ns):
        out = openssl("x509", "-in", leaf, "-noout", "-checkhost", name)
        expect("does match" in out, "the serving certificate does not cover %s: %s" % (name, out.strip()))
    expect(openssl("x509", "-in", leaf, "-noout", "-pubkey") == openssl("pkey", "-in", files["tls.key"], "-pubout"),
           "tls.key is not the serving certificate's key")
    text = openssl("pkey", "-in", files["tls.key"], "-noout", "-text")
    expect("prime256v1" in text or "P-256" in text, "the serving key is not ECDSA P-256: %s" % text[:200])
    _, hook = webhook_configuration(objs)
    expect(b64(hook["clientConfig"]["caBundle"]).strip() == b64(secret["data"]["ca.crt"]).strip(),
           "caBundle is not ca.crt")
    r = subprocess.run(["openssl", "x509", "-in", leaf, "-noout", "-checkend", str((days - 1) * 86400)],
                       capture_output=True, text=True, timeout=60)
    expect(r.returncode == 0, "the serving certificate expires within %d days" % (days - 1))
    r = subprocess.run(["openssl", "x509", "-in", leaf, "-noout", "-checkend", str((days + 1) * 86400)],
                       capture_output=True, text=True, timeout=60)
    expect(r.returncode != 0, "the serving certificate is valid for more than %d days" % (days + 1))


def chart_yaml():
    with open(os.path.join(CHART, "Chart.yaml")) as f:
        return yaml.safe_load(f)


# --- the suite ---------------------------------------------------------------------------------------

def main():
    suite = Suite("helm")
    w = suite.workdir
    version = tm.project_version()

    def chart_version_is_project_version():
        c = chart_yaml()
        expect(c["apiVersion"] == "v2", "Chart.yaml apiVersion %s" % c["apiVersion"])
        expect(str(c["version"]) == version and str(c["appVersion"]) == version,
               "Chart.yaml version %s, appVersion %s; CMakeLists.txt's ERDMA_VERSION is %s: keep them equal" %
               (c["version"], c["appVersion"], version))
    suite.check("Chart.yaml: version and appVersion are the project version", chart_version_is_project_version)

    path, why = find_helm()
    if not path:
        suite.skip("the chart, rendered by helm", why)
        suite.finish()
    helm = Helm(path, w)
    r = subprocess.run([path, "version", "--template", "{{.Version}}"], capture_output=True, text=True, timeout=60)
    print("helm: %s (%s)" % (path, r.stdout.strip()))

    def show_values_is_values_yaml():
        r = helm.run("show", "values", CHART)
        with open(os.path.join(CHART, "values.yaml")) as f:
            expect(r.returncode == 0 and r.stdout.strip() == f.read().strip(), "helm show values: %s" % r.stderr)
    suite.check("helm show values prints values.yaml", show_values_is_values_yaml)

    def schema_covers_values():
        """Every object the schema closes (additionalProperties false) and gives required keys lists
        every key it allows as required, so each has a default in values.yaml, documented there.
        (Objects without required keys, such as resources, are Kubernetes fields whose keys are all
        optional.)"""
        with open(os.path.join(CHART, "values.schema.json")) as f:
            schema = json.load(f)
        defs = schema.get("definitions", {})
        loose = []

        def walk(node, where):
            if "$ref" in node:
                node = defs[node["$ref"].rsplit("/", 1)[1]]
            if node.get("additionalProperties") is False and "required" in node and \
                    set(node.get("properties", {})) != set(node["required"]):
                loose.append("%s: properties %s, required %s" % (where, sorted(node["properties"]),
                                                                  sorted(node.get("required", []))))
            for k, v in (node.get("properties") or {}).items():
                if isinstance(v, dict):
                    walk(v, where + "." + k)
        walk(schema, "values")
        expect(not loose, loose)
    suite.check("values.schema.json closes objects only over keys values.yaml sets", schema_covers_values)

    modes = [("erdmaCerts", {}), ("certManager", {"certificates": {"mode": "certManager"}}),
             ("generate", {"certificates": {"mode": "generate"}})]

    def lint_each_mode():
        bad = []
        for name, values in modes + [("monitoring", MONITORING_VALUES),
                                     ("dra", DRA_VALUES),
                                     ("admission policy with monitoring",
                                      dict(MONITORING_VALUES, admission={"mode": "policy"})),
                                     ("fail-open and nfd", {"webhook": {"failurePolicy": "Ignore"},
                                                              "agent": {"nfd": {"enabled": True}}}),
                                     ("one replica in another namespace", {"webhook": {"replicas": 1},
                                                                           "namespace": {"name": "team-erdma",
                                                                                         "create": False}})]:
            rc, out = helm.lint(values)
            if rc != 0 or "0 chart(s) failed" not in out:
                bad.append("%s: %s" % (name, out))
        rc, out = helm.lint({"webhook": {"failurePolicy": "Maybe"}})
        if rc == 0:
            bad.append("helm lint --strict accepted failurePolicy: Maybe")
        rc, out = helm.lint({"admission": {"mode": "cel"}})
        if rc == 0 or "/admission/mode" not in out:
            bad.append("helm lint --strict accepted admission.mode: cel: %s" % out)
        expect(not bad, "\n".join(bad))
    suite.check("helm lint --strict: default values and each mode", lint_each_mode)

    # 1. the same objects as kustomize
    kubectls = tm.kubectls()
    if not kubectls:
        suite.skip("the chart against kustomize", "no kubectl 1.%d or newer (test/manifests.kubectls)" %
                   tm.MIN_KUBECTL_MINOR)
    for kubectl in kubectls:
        print("kubectl: %s (%s)" % (kubectl, tm.kubectl_version(kubectl)))
    overlays = [("default", {}), ("fail-open", {"webhook": {"failurePolicy": "Ignore"}}),
                ("nfd", {"agent": {"nfd": {"enabled": True}}}),
                ("cert-manager", {"certificates": {"mode": "certManager"}}),
                ("monitoring", MONITORING_VALUES),
                ("network-policy", {"networkPolicy": {"enabled": True, "apiserverCIDRs": [tm.APISERVER_PLACEHOLDER]}}),
                ("erdma-env", {"webhook": {"config": {"erdmaEnv": [{"name": "NCCL_DEBUG", "value": "INFO"}]}}}),
                ("dra", DRA_VALUES),
                ("admission-policy", {"admission": {"mode": "policy"}}),
                ("agent-only", {"admission": {"mode": "none"}}),
                ("nccl-only", NCCL_ONLY_VALUES)]
    for kubectl in kubectls:
        label = " (%s)" % kubectl if len(kubectls) > 1 else ""
        for overlay, values in overlays:
            suite.check("manifests/%s = helm template with %s%s" % (overlay, json.dumps(values), label),
                        lambda k=kubectl, o=overlay, v=values: expect_same(
                            tm.render(k, o), helm.template(v), "manifests/" + o))

        def composed(k=kubectl):
            root = os.path.join(w, "composed")
            shutil.rmtree(root, ignore_errors=True)
            shutil.copytree(os.path.join(SOURCE_DIR, "manifests"), os.path.join(root, "manifests"))
            for cert_manager, fail_open, nfd in itertools.product((False, True), repeat=3):
                if [cert_manager, fail_open, nfd].count(True) < 2:
                    continue  # the named overlays above
                name = "combo-%d%d%d" % (cert_manager, fail_open, nfd)
                values = {"certificates": {"mode": "certManager" if cert_manager else "erdmaCerts"},
                          "webhook": {"failurePolicy": "Ignore" if fail_open else "Fail"},
                          "agent": {"nfd": {"enabled": nfd}}}
                expect_same(kustomize(k, compose_overlay(root, name, cert_manager, fail_open, nfd)),
                            helm.template(values), "%s = %s" % (name, json.dumps(values)))
            shutil.rmtree(root, ignore_errors=True)
        suite.check("the other combinations of cert-manager, fail-open and nfd, composed as overlays%s" % label,
                    composed)

        def site(k=kubectl):
            root = os.path.join(w, "site")
            shutil.rmtree(root, ignore_errors=True)
            shutil.copytree(os.path.join(SOURCE_DIR, "manifests"), os.path.join(root, "manifests"))
            d = compose_overlay(root, "site", False, False, False, agent_config=site_agent_config())
            expect_same(kustomize(k, d), helm.template(args=SITE_SETS), "the site overlay = " + " ".join(SITE_SETS))
            shutil.rmtree(root, ignore_errors=True)
        suite.check("test/cluster/lib.sh's site overlay (a static device) = helm template %s%s" %
                    (" ".join(SITE_SETS), label), site)

    def chart_copy(name, old, new):
        """A copy of the chart under the work directory with `old` in values.yaml replaced by `new`."""
        copy_dir = os.path.join(w, name)
        shutil.rmtree(copy_dir, ignore_errors=True)
        shutil.copytree(CHART, copy_dir)
        path = os.path.join(copy_dir, "values.yaml")
        with open(path) as f:
            text = f.read()
        edited = text.replace(old, new, 1)
        expect(edited != text, "values.yaml has no %r to change" % old.strip())
        with open(path, "w") as f:
            f.write(edited)
        return copy_dir

    def a_changed_chart_is_caught():
        """The comparison itself: a chart copy with one changed default and one extra object must
        fail it, with a diff that shows the change."""
        copy_dir = chart_copy("changed-chart", "      cpu: 50m\n", "      cpu: 60m\n")
        with open(os.path.join(copy_dir, "templates", "extra.yaml"), "w") as f:
            f.write("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: erdma-system\n"
                    "  labels:\n    {{- include \"erdma.helmLabels\" . | nindent 4 }}\n")
        try:
            expect_same(tm.render(kubectls[0], "default"), helm.template(chart=copy_dir), "changed chart")
        except AssertionError as e:
            message = str(e)
        else:
            raise AssertionError("a chart with another agent cpu request and an extra ConfigMap passed the comparison")
        for want in ("-            cpu: 50m", "+            cpu: 60m", "only the chart renders ConfigMap erdma-system/extra"):
            expect(want in message, "the report does not show %r:\n%s" % (want, message))
        shutil.rmtree(copy_dir, ignore_errors=True)
    if kubectls:
        suite.check("the comparison reports a changed chart with a diff", a_changed_chart_is_caught)

    def other_namespace():
        k = kubectls[0]
        default = normalise_kustomize(tm.render(k, "default"))
        moved = {}
        for key, o in default.items():
            o = json.loads(json.dumps(o).replace(NS, "team-erdma"))
            moved[tuple(x.replace(NS, "team-erdma") for x in key)] = o
        for create in (True, False):
            want = {k2: o for k2, o in moved.items() if create or k2[0] != "Namespace"}
            got = normalise_helm(helm.template({"namespace": {"name": "team-erdma", "create": create}}))
            diff = differences(want, got)
            expect(not diff, "namespace.name team-erdma, create %s:\n%s" % (create, "\n".join(diff)))
    if kubectls:
        suite.check("namespace.name: manifests/default with every erdma-system replaced; create: false drops "
                    "the Namespace", other_namespace)

    def generate_is_default_plus_secret_and_ca_bundle():
        objs = helm.template({"certificates": {"mode": "generate"}})
        rest = copy.deepcopy(objs)
        expect(rest.pop(("Secret", NS, "erdma-webhook-tls"), None), "no Secret")
        _, hook = webhook_configuration(rest)
        expect(hook["clientConfig"].pop("caBundle", None), "no caBundle")
        diff = differences(normalise_helm(helm.template()), normalise_helm(rest))
        expect(not diff, "\n".join(diff))
        check_generated_pair(objs, NS, w, 3650)
        other = helm.template({"certificates": {"mode": "generate", "generate": {"validityDays": 30}},
                               "namespace": {"name": "team-erdma"}})
        check_generated_pair(other, "team-erdma", w, 30)
    suite.check("certificates.mode generate: default + a Secret whose certificate verifies + its caBundle",
                generate_is_default_plus_secret_and_ca_bundle)

    # 2. the value combinations that matter
    def every_combination():
        problems = []
        n = 0
        for (mode, _), fail_open, nfd, (ns, create), replicas in itertools.product(
                modes, (False, True), (False, True), ((NS, True), ("team-erdma", False)), (1, 2)):
            values = {"certificates": {"mode": mode}, "webhook": {"failurePolicy": "Ignore" if fail_open else "Fail",
                                                                  "replicas": replicas},
                      "agent": {"nfd": {"enabled": nfd}}, "namespace": {"name": ns, "create": create}}
            objs = helm.template(values)
            normalise_helm(objs)  # the helm labels and the checksum
            problems += ["%s: %s" % (json.dumps(values), x)
                         for x in check_invariants(objs, mode, fail_open, nfd, ns, create, replicas)]
            n += 1
        print("    %d combinations rendered" % n)
        expect(not problems, "\n".join(problems))
    suite.check("every combination of mode, failure policy, nfd, namespace and replicas keeps its invariants",
                every_combination)

    def images():
        def image_of(objs, kind, name):
            c = objs[(kind, NS, name)]["spec"]["template"]["spec"]["containers"][0]
            return c["image"], c["imagePullPolicy"]
        objs = helm.template()
        expect(image_of(objs, "Deployment", "erdma-webhook") ==
               ("registry.example.com/erdma-controller/erdma-webhook:" + version, "IfNotPresent"), "default webhook")
        expect(image_of(objs, "DaemonSet", "erdma-agent") ==
               ("registry.example.com/erdma-controller/erdma-agent:" + version, "IfNotPresent"), "default agent")
        digest = "sha256:" + "ab" * 32
        own_tag = "rebuilt-" + version  # a user's tag: never the appVersion, so the override shows
        objs = helm.template({"webhook": {"image": {"registry": "registry.mycorp.example:5000", "repository": "erdma/wh",
                                                    "tag": own_tag, "pullPolicy": "Always"}},
                              "agent": {"image": {"registry": "", "repository": "erdma/agent", "digest": digest}},
                              "imagePullSecrets": [{"name": "my-registry"}]})
        expect(image_of(objs, "Deployment", "erdma-webhook") ==
               ("registry.mycorp.example:5000/erdma/wh:" + own_tag, "Always"), image_of(objs, "Deployment", "erdma-webhook"))
        expect(image_of(objs, "DaemonSet", "erdma-agent") == ("erdma/agent@" + digest, "IfNotPresent"),
               image_of(objs, "DaemonSet", "erdma-agent"))
        for kind, name in (("Deployment", "erdma-webhook"), ("DaemonSet", "erdma-agent")):
            expect(objs[(kind, NS, name)]["spec"]["template"]["spec"].get("imagePullSecrets") == [{"name": "my-registry"}],
                   "%s: imagePullSecrets" % name)
    suite.check("images: registry, repository, tag (default appVersion), digest, pullPolicy, pull secrets", images)

    def agent_values():
        base = helm.template()
        ds0 = base[("DaemonSet", NS, "erdma-agent")]
        objs = helm.template({"agent": {"nodeSelector": {"aliyun.accelerator/erdma": None,
                                                         "node.mycorp.example/rdma": "erdma"},
                                        "tolerations": [], "logLevel": "debug",
                                        "resources": {"limits": {"memory": "512Mi"}}},
                              "webhook": {"resources": {"requests": {"cpu": "200m"}}, "logLevel": "warn"}})
        pod = objs[("DaemonSet", NS, "erdma-agent")]["spec"]["template"]["spec"]
        expect(pod["nodeSelector"] == {"kubernetes.io/os": "linux", "node.mycorp.example/rdma": "erdma"},
               pod["nodeSelector"])
        expect("tolerations" not in pod, pod.get("tolerations"))
        c = pod["containers"][0]
        expect(c["resources"]["limits"] == {"cpu": "500m", "memory": "512Mi"}, c["resources"])
        expect("--log-level=debug" in c["args"], c["args"])
        wc = objs[("Deployment", NS, "erdma-webhook")]["spec"]["template"]["spec"]["containers"][0]
        expect(wc["resources"]["requests"] == {"cpu": "200m", "memory": "64Mi"}, wc["resources"])
        expect("--log-level=warn" in wc["args"], wc["args"])
        expect(objs[("DaemonSet", NS, "erdma-agent")]["spec"]["template"]["metadata"] ==
               ds0["spec"]["template"]["metadata"], "a change outside the agent config changed the checksum")
        # the metrics listen address: config, container port and the probes' host follow it
        for addr, host, port in (("127.0.0.1:9500", "127.0.0.1", 9500), ("0.0.0.0:9467", None, 9467),
                                 ("[::1]:9467", "::1", 9467)):
            objs = helm.template({"agent": {"metricsListen": addr}})
            c = objs[("DaemonSet", NS, "erdma-agent")]["spec"]["template"]["spec"]["containers"][0]
            cfg = yaml.safe_load(objs[("ConfigMap", NS, AGENT_CM)]["data"]["config.yaml"])
            expect(cfg["metricsListen"] == addr, cfg["metricsListen"])
            expect(tm.container_port(c, "metrics") == port, c["ports"])
            for probe in ("readinessProbe", "livenessProbe"):
                expect(c[probe]["httpGet"].get("host") == host and c[probe]["httpGet"]["port"] == "metrics",
                       "%s with %s: %s" % (probe, addr, c[probe]))
    suite.check("agent and webhook values: nodeSelector (null drops a default key), tolerations, resources, "
                "log level, metrics address", agent_values)

    def config_change_rolls_only_the_agent():
        before = helm.template()
        after = helm.template({"agent": {"config": {"slotsPerDevice": 32}}})
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        expect(changed == [("ConfigMap", NS, AGENT_CM), ("DaemonSet", NS, "erdma-agent")], changed)
        b, a = before[("DaemonSet", NS, "erdma-agent")], after[("DaemonSet", NS, "erdma-agent")]
        expect(b["spec"]["template"]["metadata"]["annotations"][CHECKSUM] !=
               a["spec"]["template"]["metadata"]["annotations"][CHECKSUM], "the checksum did not change")
        a = copy.deepcopy(a)
        a["spec"]["template"]["metadata"]["annotations"] = b["spec"]["template"]["metadata"]["annotations"]
        expect(a == b, "the DaemonSet changed in more than its checksum")
        cfg = yaml.safe_load(after[("ConfigMap", NS, AGENT_CM)]["data"]["config.yaml"])
        expect(cfg["slotsPerDevice"] == 32 and cfg["devices"]["source"] == "verbs", "maps do not merge: %s" % cfg)
        # the webhook reloads its config in place: nothing else changes
        after = helm.template({"webhook": {"config": {"smcr": {"libraryFrom": "hostPath"}}}})
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        expect(changed == [("ConfigMap", NS, "erdma-webhook-config")], changed)
        # the agent's host paths follow its config
        objs = helm.template({"agent": {"config": {"criSocket": "/run/k3s/containerd/containerd.sock",
                                                   "smcr": {"preloadHostDir": "/opt/erdma/lib"}}}})
        pod = objs[("DaemonSet", NS, "erdma-agent")]["spec"]["template"]["spec"]
        expect(tm.volume(pod, "containerd-run")["hostPath"]["path"] == "/run/k3s/containerd" and
               tm.mount_for(pod["containers"][0], "/run/k3s/containerd/containerd.sock")["name"] == "containerd-run",
               "the CRI socket's directory is not mounted")
        expect(tm.volume(pod, "preload")["hostPath"]["path"] == "/opt/erdma/lib" and
               tm.mount_for(pod["containers"][0], "/opt/erdma/lib/libsmc-preload.so")["name"] == "preload",
               "the preload directory is not mounted")
    suite.check("an agent config change rolls the DaemonSet by its checksum alone; a webhook config change "
                "changes its ConfigMap alone", config_change_rolls_only_the_agent)

    def notes():
        """NOTES.txt, rendered through tpl in a copy of the chart (helm prints it only after an
        install against a cluster): the next steps each mode needs."""
        copy_dir = os.path.join(w, "notes-chart")
        shutil.rmtree(copy_dir, ignore_errors=True)
        shutil.copytree(CHART, copy_dir)
        shutil.copy(os.path.join(CHART, "templates", "NOTES.txt"), os.path.join(copy_dir, "notes.txt"))
        with open(os.path.join(copy_dir, "templates", "notes-render.yaml"), "w") as f:
            f.write('apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n'
                    'data:\n  notes: {{ tpl (.Files.Get "notes.txt") . | quote }}\n')

        def text(values, *args):
            return helm.template(values, ("--show-only", "templates/notes-render.yaml") + args,
                                 chart=copy_dir)[("ConfigMap", "", "notes")]["data"]["notes"]
        t = text({})
        for want in ("certs/erdma-certs generate --dir ./erdma-pki  ", "certs/erdma-certs apply --dir ./erdma-pki  ",
                     "kubectl label namespace team-a erdma-injection=enabled", "registry.example.com",
                     "kubectl label node NODE aliyun.accelerator/erdma=true", "erdma-agent cleanup"):
            expect(want in t, "NOTES (erdmaCerts) lack %r:\n%s" % (want, t))
        t = text({"namespace": {"name": "team-erdma"}})
        expect("apply --dir ./erdma-pki --namespace team-erdma" in t, "NOTES do not pass the namespace:\n" + t)
        t = text({}, "--is-upgrade")
        expect("erdma-certs generate" not in t and "nothing to do" in t, "NOTES on upgrade:\n" + t)
        t = text({"certificates": {"mode": "certManager"}, "webhook": {"image": {"registry": "r.example.org"}},
                  "agent": {"image": {"registry": "r.example.org"}}})
        expect("wait certificate/erdma-webhook" in t and "erdma-certs" not in t and "placeholder" not in t, t)
        t = text({"certificates": {"mode": "generate"}})
        expect("delete secret erdma-webhook-tls" in t and "erdma-certs" not in t, t)
        expect("DRA" not in t and "resourceslices" not in t, "NOTES mention DRA with the driver off:\n" + t)
        t = text({"admission": {"mode": "policy"}})
        for want in ("kubectl get mutatingadmissionpolicy,mutatingadmissionpolicybinding erdma-smcr",
                     "rollout status daemonset/erdma-agent", "kubectl label namespace team-a erdma-injection=enabled"):
            expect(want in t, "NOTES (policy) lack %r:\n%s" % (want, t))
        expect("erdma-certs" not in t and "deployment/erdma-webhook" not in t, "NOTES (policy) name the webhook:\n" + t)
        t = text(NCCL_ONLY_VALUES)
        expect("erdma-agent alone" in t and "rollout status daemonset/erdma-agent" in t and "erdma-certs" not in t and
               "erdma-injection" not in t and "deployment/erdma-webhook" not in t, "NOTES (nccl-only):\n" + t)
        t = text(DRA_VALUES)
        for want in ("DeviceClasses erdma.aliyun.com (RDMA) and", "smcr.erdma.aliyun.com (SMC-R)", "examples/dra/",
                     "kubectl get resourceslices"):
            expect(want in t, "NOTES (dra) lack %r:\n%s" % (want, t))
        shutil.rmtree(copy_dir, ignore_errors=True)
    suite.check("NOTES.txt: the next steps of each mode", notes)

    def values_table_is_generated():
        """The chart README's values table is the one scripts/chart-values-table.py makes from
        values.schema.json and values.yaml; a chart copy with a changed default fails the check."""
        tool = os.path.join(SOURCE_DIR, "scripts/chart-values-table.py")
        r = subprocess.run(["/usr/bin/python3", tool, "--check"], capture_output=True, text=True, timeout=60)
        expect(r.returncode == 0, "charts/erdma-controller/README.md: %s" % r.stderr.strip())
        copy_dir = chart_copy("table-chart", "  replicas: 2\n", "  replicas: 3\n")
        r = subprocess.run(["/usr/bin/python3", tool, "--chart", copy_dir, "--check"], capture_output=True, text=True,
                           timeout=60)
        expect(r.returncode == 1 and "--write" in r.stderr, "a changed default passed the check: %s" % r.stderr)
        shutil.rmtree(copy_dir, ignore_errors=True)
    suite.check("the chart README's values table is generated from values.schema.json and values.yaml",
                values_table_is_generated)

    def admission_policy_mode():
        """admission.mode policy: the overlay's policy (files/ holds an identical copy) with the
        resource names, library path and namespaces of the values; settings a policy cannot follow
        are refused by name; no webhook object, ServiceMonitor or alert is left."""
        with open(os.path.join(SOURCE_DIR, "manifests/admission-policy/smcr-policy.yaml")) as a, \
                open(os.path.join(CHART, "files/smcr-policy.yaml")) as b:
            expect(a.read() == b.read(), "charts/erdma-controller/files/smcr-policy.yaml differs from "
                   "manifests/admission-policy/smcr-policy.yaml: copy it")
        objs = helm.template({"admission": {"mode": "policy"}, "namespace": {"name": "team-erdma"},
                              "webhook": {"excludedNamespaces": ["kube-system", "infra"],
                                          "config": {"resourceName": "example.com/rdma",
                                                     "smcr": {"resourceName": "", "mountPath": "/opt/smc/",
                                                              "allowedNamespaces": ["team-a", "team-b"]}}},
                              "monitoring": MONITORING_VALUES["monitoring"], "agent": MONITORING_VALUES["agent"]})
        variables = {v["name"]: v["expression"]
                     for v in objs[("MutatingAdmissionPolicy", "", "erdma-smcr")]["spec"]["variables"]}
        expect([variables["erdma"], variables["smcr"], variables["library"]] ==
               ["'example.com/rdma'", "'example.com/rdma'", "'/opt/smc/libsmc-preload.so'"],
               "the policy's variables: %s" % [variables["erdma"], variables["smcr"], variables["library"]])
        sel = objs[("MutatingAdmissionPolicyBinding", "", "erdma-smcr")]["spec"]["matchResources"]["namespaceSelector"]
        expect(sel["matchExpressions"][1:] == [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "infra", "team-erdma"]},
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a", "team-b"]}],
            "the binding's namespaces: %s" % sel)
        webhook_left = sorted(k for k in objs if "erdma-webhook" in k[2])
        expect(not webhook_left, "admission.mode policy renders webhook objects: %s" % webhook_left)
        rules = objs[("PrometheusRule", "team-erdma", "erdma-controller")]["spec"]["groups"]
        expect([g["name"] for g in rules] == ["erdma-agent"], "alert groups: %s" % [g["name"] for g in rules])
        for values, want in (
                ({"webhook": {"config": {"smcr": {"libraryFrom": "hostPath"}}}}, "smcr.libraryFrom hostPath needs the webhook"),
                ({"webhook": {"config": {"smcr": {"addResource": False}}}}, "smcr.addResource false needs the webhook"),
                ({"webhook": {"config": {"erdmaEnv": [{"name": "A", "value": "1"}]}}}, "erdmaEnv, deviceMounts and smcr.env"),
                ({"webhook": {"config": {"smcr": {"library": "other.so"}}}}, "installs libsmc-preload.so only"),
                ({"networkPolicy": {"enabled": True, "apiserverCIDRs": ["10.0.0.0/28"]}},
                 "admission.mode policy runs none; set networkPolicy.enabled=false")):
            values = dict(values, admission={"mode": "policy"})
            rc, message = helm.refuses(values)
            expect(rc != 0 and want in message, "%s: exit %d, %s" % (json.dumps(values), rc, message[-300:]))
        rc, message = helm.refuses({"admission": {"mode": "policy"}}, ("--kube-version", "1.35.4"))
        expect(rc != 0 and "needs Kubernetes 1.36 or newer" in message and "v1.35.4" in message, message[-300:])
        rc, message = helm.refuses({}, ("--kube-version", "1.27.9"))
        expect(rc != 0 and "kubeVersion" in message, "Chart.yaml's kubeVersion let 1.27 through: %s" % message[-300:])
    suite.check("admission.mode policy: the overlay's policy with the values' names and namespaces; what it cannot "
                "follow is refused", admission_policy_mode)

    have_webhook, have_agent = os.access(tm.WEBHOOK, os.X_OK), os.access(tm.AGENT, os.X_OK)

    def match_conditions_follow_the_config():
        """The matchConditions derived from webhook.config: for each config, their shape, their
        verdicts on the sample pods against the documented rule, and (with the webhook built) the
        real webhook's answers under that very config (test/manifests/admission_match.py)."""
        mounts = [{"name": "erdma-dev", "hostPath": "/dev/infiniband", "mountPath": "/dev/infiniband"}]
        configs = [
            ("default", {}, "asks-for-smcr"),
            ("erdmaEnv", {"erdmaEnv": [{"name": "NCCL_DEBUG", "value": "INFO"}]}, "asks-for-smcr-or-erdma"),
            ("deviceMounts", {"deviceMounts": mounts}, "asks-for-smcr-or-erdma"),
            ("erdmaEnv and another resourceName", {"resourceName": "example.com/rdma",
                                                   "erdmaEnv": [{"name": "NCCL_DEBUG", "value": "INFO"}]},
             "asks-for-smcr-or-erdma"),
        ]
        problems = []
        for label, values, name in configs:
            objs = helm.template({"webhook": {"config": values}})
            _, hook = webhook_configuration(objs)
            conds = hook["matchConditions"]
            text = objs[("ConfigMap", NS, "erdma-webhook-config")]["data"]["config.yaml"]
            cfg = yaml.safe_load(text)
            if [c["name"] for c in conds] != ["not-opted-out", name]:
                problems.append("%s: matchConditions %s, want not-opted-out and %s" % (label, [c["name"] for c in conds],
                                                                                      name))
            problems += ["%s: %s" % (label, x) for x in admission_match.check_structure(conds, cfg) +
                         admission_match.check_intended(conds, cfg)]
            if have_webhook:
                found, verdicts = admission_match.check_agreement(tm.WEBHOOK, text, conds, SOURCE_DIR, w,
                                                                  cfg.get("resourceName", "aliyun/erdma"))
                problems += ["%s: %s" % (label, x) for x in found]
                print("    %s: %d pods, %d sent, %d changed by the webhook" % (
                    label, len(verdicts), sum(1 for v in verdicts if v[2]), sum(1 for v in verdicts if v[1] == "injects")))
        expect(not problems, "\n".join(problems))
    suite.check("matchConditions follow webhook.config: SMC-R pods by default, eRDMA pods with erdmaEnv or "
                "deviceMounts%s" % ("" if have_webhook else " (without the webhook binary: CEL only)"),
                match_conditions_follow_the_config)

    # 5. the DRA objects follow agent.config.dra
    def dra_follows_the_config():
        objs = helm.template({"agent": {"config": {"dra": DRA_ELSEWHERE}}})
        driver = DRA_ELSEWHERE["driverName"]
        problems = tm.check_agent(objs)  # token, NODE_NAME, exactly the host paths the config names
        pod = objs[("DaemonSet", NS, "erdma-agent")]["spec"]["template"]["spec"]
        mounts = {m["mountPath"]: tm.volume(pod, m["name"])["hostPath"]["path"]
                  for m in pod["containers"][0]["volumeMounts"] if "hostPath" in tm.volume(pod, m["name"])}
        for key in tm.DRA_DIRS:
            path = DRA_ELSEWHERE[key].rstrip("/") + ("/" + driver if key == "pluginDir" else "")
            if mounts.get(path) != path:
                problems.append("dra.%s %s is not mounted from the host at the same path: %s" % (key, path, mounts))
        rules = objs[("ClusterRole", "", tm.DRA_ROLE)]["rules"]
        names = [r.get("resourceNames") for r in rules if "resourceclaims/driver" in r["resources"]]
        if names != [[driver]]:
            problems.append("ClusterRole: resourceclaims/driver for %s, want [%s]" % (names, driver))
        classes = sorted(k[2] for k in objs if k[0] == "DeviceClass")
        if classes != sorted([driver, "smcr." + driver]):
            problems.append("DeviceClasses %s, want %s and smcr.%s" % (classes, driver, driver))
        else:
            def device(d, smcr):
                return {"device": {"driver": d, "attributes": {d: {"smcrCapable": smcr}}, "capacity": {d: {}}}}
            for name, wants in ((driver, lambda d, smcr: d == driver),
                                ("smcr." + driver, lambda d, smcr: d == driver and smcr)):
                spec = objs[("DeviceClass", "", name)]["spec"]
                exprs = [sel["cel"]["expression"] for sel in spec["selectors"]]
                for d in (driver, tm.DRA_DRIVER, "gpu.nvidia.com"):
                    for smcr in (True, False):
                        got = all(cel.evaluate(cel.parse(e), device(d, smcr)) is True for e in exprs)
                        if got != wants(d, smcr):
                            problems.append("DeviceClass %s: %s %s a device of %s (smcrCapable %s)" %
                                            (name, exprs, "accepts" if got else "refuses", d, smcr))
                for c in spec.get("config") or []:
                    if c["opaque"]["driver"] != driver:
                        problems.append("DeviceClass %s: opaque config for driver %s" % (name, c["opaque"]["driver"]))
        expect(not problems, "\n".join(problems))
    suite.check("agent.config.dra with another driver name and directories: RBAC, DeviceClasses and mounts follow",
                dra_follows_the_config)

    # 3. refusals
    def refusals():
        cases = [
            ({"webhook": {"failurePolicy": "Maybe"}}, (), "/webhook/failurePolicy"),
            ({}, ("--set-string", "webhook.replicas=two"), "/webhook/replicas"),
            ({"webhook": {"replicas": 0}}, (), "/webhook/replicas"),
            ({"foo": 1}, (), "'foo' not allowed"),
            ({"webhook": {"replica": 3}}, (), "'replica' not allowed"),
            ({"certificates": {"mode": "vault"}}, (), "/certificates/mode"),
            ({"namespace": {"name": "Erdma_System"}}, (), "/namespace/name"),
            ({"agent": {"metricsListen": "localhost:9467"}}, (), "/agent/metricsListen"),
            ({"agent": {"nodeSelector": {"x": 1}}}, (), "/agent/nodeSelector/x"),
            ({"agent": {"tolerations": [{"operator": "Maybe"}]}}, (), "/agent/tolerations/0/operator"),
            ({"webhook": {"image": {"pullPolicy": "Sometimes"}}}, (), "/webhook/image/pullPolicy"),
            ({"agent": {"image": {"digest": "latest"}}}, (), "/agent/image/digest"),
            ({"webhook": {"logLevel": "verbose"}}, (), "/webhook/logLevel"),
            ({"certificates": {"generate": {"validityDays": "ten"}}}, (), "/certificates/generate/validityDays"),
            ({"agent": {"config": {"criSocket": None}}}, (), "missing property 'criSocket'"),
            ({"agent": {"config": {"metricsListen": "0.0.0.0:9467"}}}, (), "agent.config.metricsListen: set agent.metricsListen"),
            ({"agent": {"config": {"nfdFeatureFile": "/x/y"}}}, (), "agent.config.nfdFeatureFile: set agent.nfd"),
            ({"webhook": {"config": {"excludedNamespaces": ["a"]}}}, (), "webhook.config.excludedNamespaces: set webhook.excludedNamespaces"),
            ({"monitoring": {"serviceMonitor": {"enabled": True}}}, (), "monitoring.serviceMonitor.enabled needs agent.metricsOnNodeIP"),
            ({"monitoring": {"serviceMonitor": {"interval": "often"}}}, (), "/monitoring/serviceMonitor/interval"),
            ({"agent": {"metricsOnNodeIP": "yes"}}, (), "/agent/metricsOnNodeIP"),
            ({"networkPolicy": {"enabled": True}}, (), "networkPolicy.apiserverCIDRs: list the addresses"),
            ({"networkPolicy": {"apiserverCIDRs": ["10.0.0.1"]}}, (), "/networkPolicy/apiserverCIDRs/0"),
            ({"networkPolicy": {"metricsNamespaceSelector": {"matchLabel": {}}}}, (), "'matchLabel' not allowed"),
            ({"agent": {"config": {"dra": {"enable": True}}}}, (), "'enable' not allowed"),
            ({"agent": {"config": {"dra": {"enabled": "yes"}}}}, (), "/agent/config/dra/enabled"),
            ({"agent": {"config": {"dra": {"healthPolicy": "ignore"}}}}, (), "/agent/config/dra/healthPolicy"),
            ({"agent": {"config": {"dra": {"driverName": "erdma"}}}}, (), "/agent/config/dra/driverName"),
            ({"agent": {"config": {"dra": {"cdiDir": "run/cdi"}}}}, (), "/agent/config/dra/cdiDir"),
            ({"agent": {"config": {"dra": {"slotsPerDevice": -1}}}}, (), "/agent/config/dra/slotsPerDevice"),
            ({"agent": {"config": {"dra": {"extendedResource": True}}}}, (),
             "agent.config.dra.extendedResource: needs agent.config.dra.enabled"),
        ]
        missed = []
        for values, args, want in cases:
            rc, msg = helm.refuses(values, args)
            said = [x for x in msg.splitlines() if x.startswith(("Error:", "- at"))]
            print("    %s %s -> %s" % (json.dumps(values), " ".join(args), said[-1] if said else "(nothing)"))
            if rc == 0 or want not in msg:
                missed.append("%s %s: exit %d, message %r, want one naming %r" % (json.dumps(values), " ".join(args),
                                                                                rc, msg, want))
        expect(not missed, "\n".join(missed))
    suite.check("bad values are refused with a message naming the field", refusals)

    def binaries_accept():
        objs = helm.template({"webhook": {"config": {"smcr": {"libraryFrom": "hostPath"}}},
                              "namespace": {"name": "team-erdma"}})
        if have_webhook:
            tm.binary_accepts(tm.WEBHOOK, "config", objs[("ConfigMap", "team-erdma", "erdma-webhook-config")]["data"]
                              ["config.yaml"], w, "helm-webhook")
        if have_agent:
            for name, values, args in (("default", {}, ()), ("nfd", {"agent": {"nfd": {"enabled": True}}}, ()),
                                       ("site", {}, SITE_SETS), ("metrics", {"agent": {"metricsListen": "[::1]:9500"}}, ()),
                                       ("dra", DRA_VALUES, ()), ("dra-elsewhere", {"agent": {"config": {"dra": DRA_ELSEWHERE}}}, ())):
                cm = helm.template(values, args)[("ConfigMap", NS, AGENT_CM)]
                tm.binary_accepts(tm.AGENT, "config", cm["data"]["config.yaml"], w, "helm-agent-" + name)
    if have_webhook or have_agent:
        suite.check("the chart's ConfigMaps are accepted by %s" % " and ".join(
            b for b, have in (("erdma-webhook config", have_webhook), ("erdma-agent config", have_agent)) if have),
            binaries_accept)
    if not (have_webhook and have_agent):
        suite.skip("the chart's ConfigMaps checked by the programs", "%s or %s is not built" % (tm.WEBHOOK, tm.AGENT))
    suite.finish()


if __name__ == "__main__":
    main()
