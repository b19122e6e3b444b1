#!/usr/bin/python3
"""The kustomize manifests: every overlay renders, and what one object says about another holds.

Renders manifests/{base,default,cert-manager,fail-open,nfd,network-policy,erdma-env,dra} with `kubectl kustomize` (the
kubectl on PATH when it is 1.21 or newer, else the pinned one test/cluster/build-k8s.sh built, or
each binary in ERDMA_KUBECTL, colon-separated; with several, their outputs must be the same
objects), parses the YAML and cross-checks names, namespaces, selectors, ports, probes,
Secret and ConfigMap references, images, the webhook configuration (namespaceSelector evaluated
on sample namespaces, matchConditions evaluated on sample pods by a small CEL evaluator and
compared with what the real webhook does to the same pods and to examples/: admission_match.py),
the agent's host paths and privileges, and the certificate sources (erdma-certs' defaults,
cert-manager's Certificate). manifests/mixed-pools (two agent DaemonSets on disjoint nodes) and
manifests/cleanup (erdma-agent cleanup from the agent image) have checks of their own.
manifests/dra is manifests/default with the agent's DRA driver on and exactly what that needs:
dra.enabled in the agent config, the documented RBAC bound to the agent's ServiceAccount, the
token, NODE_NAME and the driver's three host directories at the paths the config names (no other
overlay has any of these), and two DeviceClasses whose CEL selectors, evaluated on sample devices,
pick the agent's DRA driver (common/contract.hpp), the SMC-R class only its smcrCapable cards,
with an opaque config the agent accepts (agent/core/dra_claim.hpp); the claims of examples/dra
ask for those classes.
The agent's ConfigMap is generated (erdma-agent-config-<content hash>): a copy of manifests/ with
an edited agent config must render a new name that the DaemonSet mounts, so applying it rolls the
DaemonSet. The ConfigMaps are fed to the real binaries (`erdma-webhook config`, `erdma-agent config`), and
the webhook Deployment's own command line is started on loopback with its volumes laid out from
the rendered objects. Each check is also run on deliberately broken copies, to show it can fail.

Runs with Debian's /usr/bin/python3 (python3-yaml). Loopback only; every wait is bounded.
"""

import base64
import copy
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("ERDMA_SOURCE_DIR", os.path.abspath(os.path.join(HERE, "../..")))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(SOURCE_DIR, "test/webhook/server/integration"))
import admission_match  # noqa: E402
import cel  # noqa: E402
import harness  # noqa: E402
from harness import Suite, expect  # noqa: E402  (the shared runner of the Python suites)

WEBHOOK = os.environ.get("ERDMA_WEBHOOK", os.path.join(SOURCE_DIR, "build/webhook/erdma-webhook"))
AGENT = os.environ.get("ERDMA_AGENT", os.path.join(SOURCE_DIR, "build/agent/erdma-agent"))
CERTS_TOOL = os.path.join(SOURCE_DIR, "certs/erdma-certs")
OVERLAYS = ["base", "default", "cert-manager", "fail-open", "nfd", "network-policy", "erdma-env", "dra", "admission-policy", "agent-only",
            "nccl-only"]
NS = "erdma-system"
# configMapGenerator's name for the agent config: this prefix and a 10-character content hash.
AGENT_CONFIG = "erdma-agent-config"
AGENT_CONFIG_NAME = re.compile(re.escape(AGENT_CONFIG) + r"-[a-z0-9]{10}")
AGENT_CONFIG_LABELS = {"app.kubernetes.io/name": "erdma-agent", "app.kubernetes.io/component": "agent-config",
                       "app.kubernetes.io/part-of": "erdma-controller"}
# manifests/network-policy's stand-in for the apiservers' addresses: a documentation range (RFC 5737)
# that the admin replaces (docs/hardening.md says so, and names this range).
APISERVER_PLACEHOLDER = "192.0.2.0/24"
# node-feature-discovery's local source reads this host directory (manifests/nfd mounts it).
NFD_FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"
# Kinds without a namespace that overlays render.
CLUSTER_SCOPED = {"Namespace", "MutatingWebhookConfiguration", "ClusterRole", "ClusterRoleBinding", "DeviceClass",
                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


def contract_names():
    """The names webhook and agent share, read from common/contract.hpp, where they are defined."""
    with open(os.path.join(SOURCE_DIR, "common/contract.hpp")) as f:
        names = dict(re.findall(r'inline constexpr std::string_view (k\w+) = "([^"]*)";', f.read()))
    for want in ("kSmcrAnnotation", "kInjectAnnotation", "kResourceName", "kPreloadHostDir", "kPreloadLibrary",
                 "kDraDriverName"):
        if want not in names:
            raise SystemExit("common/contract.hpp no longer defines %s; update test/manifests" % want)
    return names


CONTRACT = contract_names()
SMCR_ANNOTATION = CONTRACT["kSmcrAnnotation"]
OPT_OUT_ANNOTATION = CONTRACT["kInjectAnnotation"]
RESOURCE = CONTRACT["kResourceName"]
DRA_DRIVER = CONTRACT["kDraDriverName"]
SMCR_CLASS = "smcr." + DRA_DRIVER
DRA_ROLE = "erdma-agent-dra"
# The ValidatingAdmissionPolicy (and binding) that keeps the agent's slice writes on its own node.
SLICE_POLICY = "erdma-agent-own-node-slices"
# The DRA driver's host directories: config key -> the agent's default (agent/core/config.hpp).
DRA_DIRS = {"registryDir": "/var/lib/kubelet/plugins_registry", "pluginDir": "/var/lib/kubelet/plugins",
            "cdiDir": "/var/run/cdi", "hookDir": "/var/lib/erdma-controller/dra"}
# What the driver does with the API (manifests/dra/rbac.yaml and docs/dra.md say why): exactly
# these rules, as (apiGroup, resource, resourceNames, verbs).
DRA_RULES = sorted([
    ("resource.k8s.io", "resourceslices", (), ("create", "delete", "list", "update", "watch")),
    ("resource.k8s.io", "resourceclaims", (), ("get",)),
    ("resource.k8s.io", "resourceclaims/status", (), ("update",)),
    ("resource.k8s.io", "resourceclaims/driver", (DRA_DRIVER,), ("associated-node:update",)),
    ("", "nodes", (), ("get",)),
    ("", "events", (), ("create",)),
])


def erdma_config_contract():
    """The opaque config the agent's DRA driver accepts (agent/core/dra_claim.hpp): apiVersion and kind."""
    with open(os.path.join(SOURCE_DIR, "agent/core/dra_claim.hpp")) as f:
        names = dict(re.findall(r'inline constexpr std::string_view (k\w+) = "([^"]*)";', f.read()))
    for want in ("kErdmaConfigApiVersion", "kErdmaConfigKind"):
        if want not in names:
            raise SystemExit("agent/core/dra_claim.hpp no longer defines %s; update test/manifests" % want)
    return names["kErdmaConfigApiVersion"], names["kErdmaConfigKind"]


ERDMA_CONFIG_API_VERSION, ERDMA_CONFIG_KIND = erdma_config_contract()

# The agent's host paths: exactly these, each with its container path and access.
AGENT_HOST_PATHS = {
    "/var/lib/kubelet/device-plugins": ("/var/lib/kubelet/device-plugins", False),
    "/var/lib/kubelet/pod-resources": ("/var/lib/kubelet/pod-resources", True),
    "/run/containerd": ("/run/containerd", True),
    "/var/run/netns": ("/var/run/netns", True),
    "/dev/infiniband": ("/dev/infiniband", True),
    CONTRACT["kPreloadHostDir"]: (CONTRACT["kPreloadHostDir"], False),
    "/proc": ("/host/proc", False),
}
AGENT_CAPABILITIES = {"NET_ADMIN", "SYS_ADMIN", "SYS_PTRACE"}


def project_version():
    """ERDMA_VERSION of CMakeLists.txt, pre-release label included (e.g. "0.2.0-rc.1"): the images' tag
    and the app.kubernetes.io/version labels."""
    version = harness.project_version(SOURCE_DIR)
    if not version:
        raise SystemExit("CMakeLists.txt: no project(... VERSION x.y.z) and set(ERDMA_VERSION_PRERELEASE ...)")
    return version


# The overlays use directories under `resources:` and `patches:`: kubectl 1.21's kustomize (v4) or later.
MIN_KUBECTL_MINOR = 21


def pinned_kubectl():
    """The kubectl of the pinned Kubernetes release (test/cluster/build-k8s.sh), if it is built."""
    try:
        r = subprocess.run([os.path.join(SOURCE_DIR, "test/cluster/build-k8s.sh"), "--print"], capture_output=True,
                           text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    path = os.path.join(r.stdout.strip().splitlines()[-1], "kubectl") if r.returncode == 0 and r.stdout.strip() else ""
    return path if path and os.access(path, os.X_OK) else None


def kubectl_minor(kubectl):
    m = re.match(r"v1\.(\d+)", kubectl_version(kubectl))
    return int(m.group(1)) if m else 0


def kubectls():
    """ERDMA_KUBECTL (colon-separated) as given; else the kubectl on PATH when it is 1.21 or newer,
    else the pinned one test/cluster/build-k8s.sh built (scripts/test.sh builds it before ctest)."""
    listed = [p for p in os.environ.get("ERDMA_KUBECTL", "").split(":") if p]
    if listed:
        return listed
    for found in (shutil.which("kubectl"), pinned_kubectl()):
        if not found:
            continue
        if kubectl_minor(found) >= MIN_KUBECTL_MINOR:
            return [found]
        print("kubectl: %s (%s) is older than 1.%d, whose kustomize the overlays need; not used" %
              (found, kubectl_version(found), MIN_KUBECTL_MINOR))
    return []


def kubectl_version(kubectl):
    r = subprocess.run([kubectl, "version", "--client"], capture_output=True, text=True, timeout=60)
    text = r.stdout + r.stderr
    m = re.search(r'GitVersion:"(v[^"]+)"', text) or re.search(r"Client Version: (\S+)", text)
    k = re.search(r"Kustomize Version: (\S+)", text)
    return (m.group(1) if m else "unknown") + (", kustomize " + k.group(1) if k else "")


def render(kubectl, overlay, root=SOURCE_DIR):
    r = subprocess.run([kubectl, "kustomize", os.path.join(root, "manifests", overlay)],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError("%s kustomize manifests/%s exited %d: %s" % (kubectl, overlay, r.returncode, r.stderr))
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    objs = {}
    for d in docs:
        key = (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])
        expect(key not in objs, "duplicate object %s" % (key,))
        objs[key] = d
    return objs


# --- helpers over rendered objects -------------------------------------------------------------

def one(objs, kind, name, ns=NS):
    return objs.get((kind, ns, name))


def of_kind(objs, kind):
    return [o for (k, _, _), o in objs.items() if k == kind]


def selector_matches(selector, labels):
    """Kubernetes label selector semantics (matchLabels AND matchExpressions)."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def flag(args, name):
    """Value of --name=VALUE or --name VALUE in an argument list, or None."""
    for i, a in enumerate(args):
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
        if a == name and i + 1 < len(args):
            return args[i + 1]
    return None


def port_of(addr):
    return int(addr.rsplit(":", 1)[1])


def container_port(container, ref):
    """Resolves a port reference (number or name) to a container port number, or None."""
    for p in container.get("ports") or []:
        if ref == p.get("name") or ref == p.get("containerPort"):
            return p["containerPort"]
    return None


def mount_for(container, path):
    """The volumeMount whose mountPath contains `path`, or None."""
    for m in container.get("volumeMounts") or []:
        mp = m["mountPath"].rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            return m
    return None


def volume(pod_spec, name):
    for v in pod_spec.get("volumes") or []:
        if v["name"] == name:
            return v
    return None


def webhook_config_of(objs):
    cm = one(objs, "ConfigMap", "erdma-webhook-config")
    return yaml.safe_load(cm["data"]["config.yaml"]) if cm else None


def agent_config_maps(objs):
    """The agent ConfigMaps: erdma-agent-config, with or without the generator's hash suffix."""
    return [o for (k, ns, n), o in objs.items()
            if k == "ConfigMap" and ns == NS and (n == AGENT_CONFIG or n.startswith(AGENT_CONFIG + "-"))]


def agent_config_map(objs):
    """The ConfigMap the agent DaemonSet's `config` volume mounts, else the only agent ConfigMap."""
    ds = one(objs, "DaemonSet", "erdma-agent")
    v = volume(ds["spec"]["template"]["spec"], "config") if ds else None
    if v and "configMap" in v:
        cm = one(objs, "ConfigMap", v["configMap"].get("name", ""))
        if cm:
            return cm
    cms = agent_config_maps(objs)
    return cms[0] if len(cms) == 1 else None


def agent_config_of(objs):
    cm = agent_config_map(objs)
    return yaml.safe_load(cm["data"]["config.yaml"]) if cm else None


def certs_defaults(workdir):
    """The Secret and webhook names erdma-certs uses by default (apply --dry-run, with the key: the
    Deployment's command line is started with the Secret's files)."""
    d = os.path.join(workdir, "certs-defaults")
    if not os.path.exists(os.path.join(d, "tls.crt")):
        subprocess.run([CERTS_TOOL, "generate", "--dir", d], check=True, capture_output=True, timeout=60)
    out = subprocess.run([CERTS_TOOL, "apply", "--dir", d, "--dry-run", "--with-key"], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    patch, secret = [x for x in yaml.safe_load_all(out) if x]
    return d, patch, secret


# --- the checks: each returns a list of problems -----------------------------------------------

def check_inventory(name, objs):
    p = []
    want = {("Namespace", "", NS), ("ServiceAccount", NS, "erdma-webhook"), ("ServiceAccount", NS, "erdma-agent"),
            ("ConfigMap", NS, "erdma-webhook-config"), ("ConfigMap", NS, AGENT_CONFIG + "-<hash>"),
            ("Deployment", NS, "erdma-webhook"), ("Service", NS, "erdma-webhook"),
            ("PodDisruptionBudget", NS, "erdma-webhook"), ("MutatingWebhookConfiguration", "", "erdma-webhook"),
            ("DaemonSet", NS, "erdma-agent")}
    if name == "network-policy":
        want |= {("NetworkPolicy", NS, "erdma-webhook")}
    if name == "dra":
        want |= {("ClusterRole", "", DRA_ROLE), ("ClusterRoleBinding", "", DRA_ROLE), ("DeviceClass", "", DRA_DRIVER),
                 ("DeviceClass", "", SMCR_CLASS), ("ValidatingAdmissionPolicy", "", SLICE_POLICY),
                 ("ValidatingAdmissionPolicyBinding", "", SLICE_POLICY)}
    if name == "cert-manager":
        want |= {("Issuer", NS, "erdma-selfsigned"), ("Issuer", NS, "erdma-ca"),
                 ("Certificate", NS, "erdma-webhook-ca"), ("Certificate", NS, "erdma-webhook")}
    # the generated agent ConfigMap: any content hash, but a hash there must be
    have = {("ConfigMap", NS, AGENT_CONFIG + "-<hash>") if k[0] == "ConfigMap" and AGENT_CONFIG_NAME.fullmatch(k[2])
            else k for k in objs}
    for cm in agent_config_maps(objs):
        n = cm["metadata"]["name"]
        if not AGENT_CONFIG_NAME.fullmatch(n):
            p.append("ConfigMap %s has no content-hash suffix (configMapGenerator): an edit of the agent config "
                     "would not change the DaemonSet and so not roll it" % n)
        labels = cm["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in AGENT_CONFIG_LABELS.items()):
            p.append("ConfigMap %s: labels %s, want %s (to find old generated ConfigMaps)" % (n, labels,
                                                                                              AGENT_CONFIG_LABELS))
    for k in sorted(want - have):
        p.append("missing %s %s/%s" % k)
    for k in sorted(have - want):
        p.append("unexpected %s %s/%s" % k)
    for (kind, ns, n), o in objs.items():
        if kind not in CLUSTER_SCOPED and ns != NS:
            p.append("%s %s is in namespace %r, not %s" % (kind, n, ns, NS))
        if kind in CLUSTER_SCOPED and ns:
            p.append("%s %s is cluster-scoped but has namespace %r" % (kind, n, ns))
        if kind == "Secret":
            p.append("Secret %s is in the manifests: keys never live in git" % n)
    return p


def check_images(objs, version):
    p = []
    for kind in ("Deployment", "DaemonSet"):
        for o in of_kind(objs, kind):
            spec = o["spec"]["template"]["spec"]
            for c in (spec.get("initContainers") or []) + spec["containers"]:
                image = c["image"]
                m = re.fullmatch(r"([a-z0-9.-]+(?::\d+)?/)?([a-z0-9._/-]+):([A-Za-z0-9._-]+)", image)
                if not m:
                    p.append("%s %s: image %r has no tag" % (kind, o["metadata"]["name"], image))
                    continue
                if m.group(3) == "latest":
                    p.append("%s %s: image %r uses :latest" % (kind, o["metadata"]["name"], image))
                elif m.group(3) != version:
                    p.append("%s %s: image %r is not at the project version %s" %
                             (kind, o["metadata"]["name"], image, version))
                if c.get("imagePullPolicy") == "Always":
                    p.append("%s %s: imagePullPolicy Always with a pinned tag" % (kind, o["metadata"]["name"]))
            for where, meta in (("", o["metadata"]), (" pod template", o["spec"]["template"]["metadata"])):
                labels = meta.get("labels") or {}
                if labels.get("app.kubernetes.io/version") not in (None, version):
                    p.append("%s %s%s: version label %s, project %s" % (kind, o["metadata"]["name"], where,
                                                                        labels["app.kubernetes.io/version"], version))
    return p


def check_webhook_workload(objs, secret_name):
    p = []
    dep = one(objs, "Deployment", "erdma-webhook")
    svc = one(objs, "Service", "erdma-webhook")
    pdb = one(objs, "PodDisruptionBudget", "erdma-webhook")
    if not (dep and svc and pdb):
        return ["webhook Deployment, Service or PDB missing"]
    spec = dep["spec"]
    pod_labels = spec["template"]["metadata"].get("labels", {})
    pod = spec["template"]["spec"]
    if spec.get("replicas", 1) < 2:
        p.append("Deployment erdma-webhook: %s replica(s), want at least 2" % spec.get("replicas", 1))
    if not selector_matches(spec["selector"], pod_labels):
        p.append("Deployment erdma-webhook: selector does not match its pod labels")
    if not selector_matches({"matchLabels": svc["spec"].get("selector") or {}}, pod_labels) or not svc["spec"].get("selector"):
        p.append("Service erdma-webhook: selector does not match the webhook pods")
    agent = one(objs, "DaemonSet", "erdma-agent")
    if agent and selector_matches({"matchLabels": svc["spec"].get("selector") or {}},
                                  agent["spec"]["template"]["metadata"].get("labels", {})):
        p.append("Service erdma-webhook: selector also matches the agent pods")
    if not selector_matches(pdb["spec"].get("selector"), pod_labels):
        p.append("PodDisruptionBudget erdma-webhook: selector does not match the webhook pods")
    if pdb["spec"].get("minAvailable", 0) >= spec.get("replicas", 1) or pdb["spec"].get("minAvailable", 0) < 1:
        p.append("PodDisruptionBudget erdma-webhook: minAvailable must be at least 1 and below the replica count")
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    if rolling.get("maxUnavailable") not in (0, "0", "0%"):
        p.append("Deployment erdma-webhook: rollingUpdate.maxUnavailable should be 0")
    terms = (((pod.get("affinity") or {}).get("podAntiAffinity") or {})
             .get("preferredDuringSchedulingIgnoredDuringExecution") or [])
    terms = [t["podAffinityTerm"] for t in terms] + (((pod.get("affinity") or {}).get("podAntiAffinity") or {})
                                                      .get("requiredDuringSchedulingIgnoredDuringExecution") or [])
    if not any(t.get("topologyKey") == "kubernetes.io/hostname" and selector_matches(t.get("labelSelector"), pod_labels)
               for t in terms):
        p.append("Deployment erdma-webhook: no pod anti-affinity on kubernetes.io/hostname matching its pods")
    sa = pod.get("serviceAccountName")
    if not one(objs, "ServiceAccount", sa or ""):
        p.append("Deployment erdma-webhook: serviceAccountName %r is not in the manifests" % sa)
    if pod.get("automountServiceAccountToken") is not False:
        p.append("Deployment erdma-webhook: the webhook needs no API token (automountServiceAccountToken: false)")
    psc = pod.get("securityContext") or {}
    if len(pod["containers"]) != 1:
        return p + ["Deployment erdma-webhook: want exactly one container"]
    c = pod["containers"][0]
    sc = c.get("securityContext") or {}
    if not (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")):
        p.append("webhook container: runAsNonRoot not set")
    if (sc.get("runAsUser", psc.get("runAsUser")) or 0) == 0:
        p.append("webhook container: runAsUser must be a non-zero uid")
    if sc.get("readOnlyRootFilesystem") is not True:
        p.append("webhook container: readOnlyRootFilesystem not set")
    if sc.get("allowPrivilegeEscalation") is not False:
        p.append("webhook container: allowPrivilegeEscalation not false")
    caps = sc.get("capabilities") or {}
    if caps.get("drop") != ["ALL"] or caps.get("add"):
        p.append("webhook container: capabilities must drop ALL and add none")
    if sc.get("privileged"):
        p.append("webhook container: privileged")
    seccomp = (sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
    if seccomp != "RuntimeDefault":
        p.append("webhook container: seccompProfile %r, want RuntimeDefault" % seccomp)
    res = c.get("resources") or {}
    for part in ("requests", "limits"):
        for r in ("cpu", "memory"):
            if r not in (res.get(part) or {}):
                p.append("webhook container: resources.%s.%s missing" % (part, r))
    args = (c.get("args") or [])
    if (c.get("command") or [None])[0] != "/usr/bin/erdma-webhook" or not args or args[0] != "serve":
        p.append("webhook container: command must be /usr/bin/erdma-webhook serve ...")
    listen, metrics = flag(args, "--listen"), flag(args, "--metrics-listen")
    https_port, metrics_port = container_port(c, "https"), container_port(c, "metrics")
    if listen is None or https_port is None or port_of(listen) != https_port:
        p.append("webhook container: --listen %r does not match container port https %r" % (listen, https_port))
    if metrics is None or metrics_port is None or port_of(metrics) != metrics_port:
        p.append("webhook container: --metrics-listen %r does not match container port metrics %r" %
                 (metrics, metrics_port))
    ports = svc["spec"].get("ports") or []
    if len(ports) != 1 or ports[0].get("port") != 443:
        p.append("Service erdma-webhook: want one port, 443")
    elif container_port(c, ports[0].get("targetPort")) != https_port or https_port is None:
        p.append("Service erdma-webhook: targetPort %r is not the container's https port %r" %
                 (ports[0].get("targetPort"), https_port))
    for probe_name, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        probe = (c.get(probe_name) or {}).get("httpGet")
        if not probe:
            p.append("webhook container: %s missing" % probe_name)
            continue
        if probe.get("path") != path:
            p.append("webhook container: %s path %r, want %s" % (probe_name, probe.get("path"), path))
        port = container_port(c, probe.get("port"))
        scheme = probe.get("scheme", "HTTP")
        if port is None or (port == https_port) != (scheme == "HTTPS"):
            p.append("webhook container: %s port %r with scheme %s does not fit the container ports" %
                     (probe_name, probe.get("port"), scheme))
    # files named in the arguments live in the mounted volumes
    for fl, kind, key in (("--tls-cert", "secret", "tls.crt"), ("--tls-key", "secret", "tls.key"),
                          ("--config", "configMap", "config.yaml")):
        path = flag(args, fl)
        m = mount_for(c, path or "")
        if not path or not m:
            p.append("webhook container: %s %r is not inside a volume mount" % (fl, path))
            continue
        if m.get("subPath"):
            p.append("webhook container: %s is a subPath mount, which never sees Secret/ConfigMap updates" % path)
        v = volume(pod, m["name"])
        if not v or kind not in v:
            p.append("webhook container: %s is not from a %s volume" % (fl, kind))
            continue
        if os.path.relpath(path, m["mountPath"]) != key:
            p.append("webhook container: %s %r is not the %s key %s" % (fl, path, kind, key))
        if kind == "secret" and v["secret"].get("secretName") != secret_name:
            p.append("webhook container: Secret volume %r, but the certificate source writes %r" %
                     (v["secret"].get("secretName"), secret_name))
        if kind == "configMap":
            cm = one(objs, "ConfigMap", v["configMap"].get("name"))
            if not cm or key not in cm.get("data", {}):
                p.append("webhook container: ConfigMap %r with key %s is not in the manifests" %
                         (v["configMap"].get("name"), key))
    return p


def check_webhook_configuration(objs, failure_policy):
    p = []
    mwc = one(objs, "MutatingWebhookConfiguration", "erdma-webhook", ns="")
    svc = one(objs, "Service", "erdma-webhook")
    if not mwc or not svc:
        return ["MutatingWebhookConfiguration or Service erdma-webhook missing"]
    hooks = mwc.get("webhooks") or []
    if len(hooks) != 1:
        return ["MutatingWebhookConfiguration erdma-webhook: want exactly one webhook, got %d" % len(hooks)]
    h = hooks[0]
    cc = h.get("clientConfig") or {}
    if "url" in cc:
        p.append("webhook: clientConfig.url set; the service is the way in")
    if "caBundle" in cc:
        p.append("webhook: caBundle in the manifests would be reset by every kubectl apply")
    s = cc.get("service") or {}
    if s.get("name") != svc["metadata"]["name"] or s.get("namespace") != svc["metadata"]["namespace"]:
        p.append("webhook: clientConfig.service %s/%s is not the Service %s/%s" %
                 (s.get("namespace"), s.get("name"), svc["metadata"]["namespace"], svc["metadata"]["name"]))
    if s.get("port", 443) not in [x.get("port") for x in svc["spec"].get("ports") or []]:
        p.append("webhook: clientConfig.service.port %r is not a Service port" % s.get("port", 443))
    if s.get("path") != "/mutate-pods":
        p.append("webhook: clientConfig.service.path %r, want /mutate-pods" % s.get("path"))
    rules = h.get("rules") or []
    if rules != [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                  "scope": "Namespaced"}]:
        p.append("webhook: rules must be exactly CREATE of core/v1 pods, got %s" % json.dumps(rules))
    for field, want in (("sideEffects", "None"), ("admissionReviewVersions", ["v1"]),
                        ("reinvocationPolicy", "IfNeeded"), ("failurePolicy", failure_policy)):
        if h.get(field) != want:
            p.append("webhook: %s %r, want %r" % (field, h.get(field), want))
    t = h.get("timeoutSeconds")
    if not isinstance(t, int) or not 1 <= t <= 5:
        p.append("webhook: timeoutSeconds %r, want 1..5" % t)
    if not h.get("name", "").count(".") >= 2:
        p.append("webhook: name %r must be fully qualified" % h.get("name"))
    # namespaceSelector, evaluated on sample namespaces
    sel = h.get("namespaceSelector")
    cases = [({"erdma-injection": "enabled", "kubernetes.io/metadata.name": "team-a"}, True),
             ({"kubernetes.io/metadata.name": "team-b"}, False),
             ({"erdma-injection": "disabled", "kubernetes.io/metadata.name": "team-c"}, False),
             ({"erdma-injection": "enabled", "kubernetes.io/metadata.name": "kube-system"}, False),
             ({"erdma-injection": "enabled", "kubernetes.io/metadata.name": NS}, False)]
    for labels, want in cases:
        if selector_matches(sel, labels) != want:
            p.append("webhook: namespaceSelector %s namespace %s labelled %s" %
                     ("skips" if want else "selects", labels["kubernetes.io/metadata.name"], labels))
    cfg = webhook_config_of(objs) or {}
    for ns in ("kube-system", NS):
        if ns not in (cfg.get("excludedNamespaces") or []):
            p.append("webhook config: excludedNamespaces lacks %s" % ns)
    # matchConditions
    conds = h.get("matchConditions") or []
    if not conds:
        p.append("webhook: no matchConditions")
    if len({c.get("name") for c in conds}) != len(conds) or len(conds) > 64:
        p.append("webhook: matchConditions names must be unique, at most 64")
    return p


def check_match_conditions(objs):
    """The matchConditions fit the webhook's config (test/manifests/admission_match.py): their shape,
    and their verdict on the table of sample pods against the documented rule."""
    mwc = one(objs, "MutatingWebhookConfiguration", "erdma-webhook", ns="")
    conds = mwc["webhooks"][0].get("matchConditions") or []
    cfg = webhook_config_of(objs) or {}
    return admission_match.check_structure(conds, cfg) + admission_match.check_intended(conds, cfg)


def check_agent(objs):
    p = []
    ds = one(objs, "DaemonSet", "erdma-agent")
    if not ds:
        return ["DaemonSet erdma-agent missing"]
    spec = ds["spec"]
    pod_labels = spec["template"]["metadata"].get("labels", {})
    pod = spec["template"]["spec"]
    if not selector_matches(spec["selector"], pod_labels):
        p.append("DaemonSet erdma-agent: selector does not match its pod labels")
    if not one(objs, "ServiceAccount", pod.get("serviceAccountName") or ""):
        p.append("DaemonSet erdma-agent: serviceAccountName %r is not in the manifests" % pod.get("serviceAccountName"))
    cfg = agent_config_of(objs) or {}
    dra = dra_config(cfg)
    if dra["enabled"] and pod.get("automountServiceAccountToken") is not True:
        p.append("DaemonSet erdma-agent: dra.enabled, but no API token (automountServiceAccountToken: true): the "
                 "DRA driver publishes ResourceSlices and reads claims through the API")
    if not dra["enabled"] and pod.get("automountServiceAccountToken") is not False:
        p.append("DaemonSet erdma-agent: the agent needs no API token without the DRA driver "
                 "(automountServiceAccountToken: false)")
    if pod.get("hostNetwork") is not True:
        p.append("DaemonSet erdma-agent: hostNetwork must be true (the node's SMC pnet table)")
    if pod.get("hostPID") or pod.get("hostIPC"):
        p.append("DaemonSet erdma-agent: hostPID/hostIPC not needed")
    if not (pod.get("nodeSelector") or {}).get("aliyun.accelerator/erdma"):
        p.append("DaemonSet erdma-agent: no eRDMA node selector")
    if len(pod["containers"]) != 1:
        return p + ["DaemonSet erdma-agent: want exactly one container"]
    c = pod["containers"][0]
    sc = c.get("securityContext") or {}
    if sc.get("privileged"):
        p.append("agent container: privileged")
    caps = sc.get("capabilities") or {}
    if caps.get("drop") != ["ALL"] or set(caps.get("add") or []) != AGENT_CAPABILITIES:
        p.append("agent container: capabilities must drop ALL and add exactly %s, got %s" %
                 (sorted(AGENT_CAPABILITIES), caps))
    if sc.get("allowPrivilegeEscalation") is False and {"SYS_ADMIN", "CAP_SYS_ADMIN"} & set(caps.get("add") or []):
        p.append("agent container: allowPrivilegeEscalation false with SYS_ADMIN is refused by the apiserver")
    if sc.get("readOnlyRootFilesystem") is not True:
        p.append("agent container: readOnlyRootFilesystem not set")
    seccomp = (sc.get("seccompProfile") or (pod.get("securityContext") or {}).get("seccompProfile") or {}).get("type")
    if seccomp != "RuntimeDefault":
        p.append("agent container: seccompProfile %r, want RuntimeDefault" % seccomp)
    res = c.get("resources") or {}
    for part in ("requests", "limits"):
        for r in ("cpu", "memory"):
            if r not in (res.get(part) or {}):
                p.append("agent container: resources.%s.%s missing" % (part, r))
    # host paths: exactly the expected set, each mounted where and how the agent needs it; with
    # nfdFeatureFile set, also the file's directory, read-write at the same path; with the DRA
    # driver on, its three directories, read-write at the paths its config names
    nfd_file = cfg.get("nfdFeatureFile") or ""
    want_host = dict(AGENT_HOST_PATHS)
    if nfd_file:
        want_host[os.path.dirname(nfd_file)] = (os.path.dirname(nfd_file), False)
    if dra["enabled"]:
        for path in dra_host_dirs(dra).values():
            want_host[path] = (path, False)
    host = {}
    for v in pod.get("volumes") or []:
        if "hostPath" in v:
            host[v["name"]] = v["hostPath"]["path"]
    if set(host.values()) != set(want_host):
        p.append("agent: host paths %s, want exactly %s" % (sorted(host.values()), sorted(want_host)))
    if nfd_file:
        m = mount_for(c, nfd_file)
        if not m or m["name"] not in host or host[m["name"]] != m["mountPath"] or m.get("readOnly") or \
                m["mountPath"] != os.path.dirname(nfd_file):
            p.append("agent config: nfdFeatureFile %r is not in a host directory mounted read-write at the same "
                     "path (NFD reads the host's %s)" % (nfd_file, os.path.dirname(nfd_file)))
    for m in c.get("volumeMounts") or []:
        if m["name"] in host:
            want_path, want_ro = want_host.get(host[m["name"]], (None, None))
            if m["mountPath"] != want_path or bool(m.get("readOnly")) != want_ro:
                p.append("agent: host path %s mounted at %s readOnly=%s, want %s readOnly=%s" %
                         (host[m["name"]], m["mountPath"], bool(m.get("readOnly")), want_path, want_ro))
            if host[m["name"]] == "/var/run/netns" and m.get("mountPropagation") != "HostToContainer":
                p.append("agent: /var/run/netns needs mountPropagation HostToContainer")
    mounted = {m["name"] for m in c.get("volumeMounts") or []}
    for name in host:
        if name not in mounted:
            p.append("agent: host path volume %s is not mounted" % name)
    node_name = [e for e in c.get("env") or [] if e.get("name") == "NODE_NAME"]
    if dra["enabled"] and not dra["nodeName"] and \
            [e.get("valueFrom") for e in node_name] != [{"fieldRef": {"fieldPath": "spec.nodeName"}}]:
        p.append("agent: dra.enabled with dra.nodeName unset, but env NODE_NAME is %s, not the pod's "
                 "spec.nodeName: the driver would not know its node" % node_name)
    # configuration: file under the ConfigMap mount; its values agree with the mounts and ports
    args = c.get("args") or []
    if (c.get("command") or [None])[0] != "/usr/bin/erdma-agent" or not args or args[0] != "run":
        p.append("agent container: command must be /usr/bin/erdma-agent run ...")
    path = flag(args, "--config")
    m = mount_for(c, path or "")
    v = volume(pod, m["name"]) if m else None
    cm = one(objs, "ConfigMap", v["configMap"].get("name", "")) if v and "configMap" in v else None
    if not cm or cm not in agent_config_maps(objs) or os.path.relpath(path, m["mountPath"]) not in cm.get("data", {}):
        p.append("agent container: --config %r is not a key of the generated %s-<hash> ConfigMap volume (%s)" %
                 (path, AGENT_CONFIG, (v or {}).get("configMap")))
    dp_dir = cfg.get("devicePluginDir", "/var/lib/kubelet/device-plugins")
    if not mount_for(c, dp_dir) or (host.get(mount_for(c, dp_dir)["name"]) != dp_dir):
        p.append("agent: devicePluginDir %s is not the kubelet's directory mounted at the same path" % dp_dir)
    metrics = cfg.get("metricsListen", "127.0.0.1:9467")
    mport = container_port(c, "metrics")
    if not metrics or mport is None or port_of(metrics) != mport:
        p.append("agent: metricsListen %r does not match container port metrics %r" % (metrics, mport))
    # On the host network a probe without host goes to the node's IP: a loopback listener must be
    # probed on loopback, and the default must stay loopback (not the whole node network).
    listen_host = (metrics or "").rsplit(":", 1)[0].strip("[]")
    if listen_host != "127.0.0.1":
        p.append("agent: metricsListen %r is not loopback; the manifests keep the agent's metrics on 127.0.0.1 "
                 "(docs/design.md, \"Metrics listen address\")" % metrics)
    for probe_name, want in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        probe = (c.get(probe_name) or {}).get("httpGet") or {}
        if probe.get("path") != want or container_port(c, probe.get("port")) != mport:
            p.append("agent container: %s must GET %s on the metrics port" % (probe_name, want))
        if probe.get("host") != listen_host:
            p.append("agent container: %s host %r, want %r (metricsListen's address: on the host network kubelet "
                     "would otherwise probe the node's IP)" % (probe_name, probe.get("host"), listen_host))
    wcfg = webhook_config_of(objs) or {}
    preload = (wcfg.get("smcr") or {}).get("preloadHostDir", CONTRACT["kPreloadHostDir"])
    if preload not in host.values():
        p.append("agent: the webhook's smcr.preloadHostDir %s is not a host path of the agent" % preload)
    agent_preload = (cfg.get("smcr") or {}).get("preloadHostDir", CONTRACT["kPreloadHostDir"])
    if agent_preload.rstrip("/") != preload.rstrip("/"):
        p.append("agent: smcr.preloadHostDir %s is not the webhook's smcr.preloadHostDir %s: SMC-R pods would "
                 "find no library and stay on TCP" % (agent_preload, preload))
    library = (wcfg.get("smcr") or {}).get("library", CONTRACT["kPreloadLibrary"])
    if library != CONTRACT["kPreloadLibrary"]:
        p.append("webhook: smcr.library %s is not %s, the file name the agent installs" %
                 (library, CONTRACT["kPreloadLibrary"]))
    # The SMC-R keys (agent builds that have them): each must point where the DaemonSet mounts
    # the thing. procRoot is required once SMC-R is configured: the container's own /proc/sys is
    # read-only, so the default /proc cannot set a pod's net.smc.* sysctls.
    mount_of_host = {host[m["name"]]: m["mountPath"] for m in c.get("volumeMounts") or [] if m["name"] in host}
    # SMC-R is on unless smcr.enabled says otherwise, so a config without procRoot is wrong too.
    if (cfg.get("smcr") or {}).get("enabled", True) and "procRoot" not in cfg:
        p.append("agent config: smcr is configured but procRoot is not set to the host /proc mount %s" %
                 mount_of_host.get("/proc"))
    if "procRoot" in cfg and cfg["procRoot"] != mount_of_host.get("/proc"):
        p.append("agent config: procRoot %r is not where the host /proc is mounted (%s)" %
                 (cfg["procRoot"], mount_of_host.get("/proc")))
    cri_dir = mount_of_host.get("/run/containerd")
    if "criSocket" in cfg and (cri_dir is None or os.path.dirname(cfg["criSocket"]) != cri_dir):
        p.append("agent config: criSocket %r is not in the mounted containerd directory %r" % (cfg["criSocket"], cri_dir))
    cri_mount = [m for m in c.get("volumeMounts") or [] if host.get(m["name"]) == "/run/containerd"]
    if cri_mount and cri_mount[0].get("mountPropagation") != "HostToContainer":
        p.append("agent: /run/containerd must be mounted with mountPropagation HostToContainer, or the "
                 "agent's copy keeps containers' rootfs mounts busy")
    if "podResourcesSocket" in cfg and \
            os.path.dirname(cfg["podResourcesSocket"]) != mount_of_host.get("/var/lib/kubelet/pod-resources"):
        p.append("agent config: podResourcesSocket %r is not in the mounted pod-resources directory" %
                 cfg["podResourcesSocket"])
    smcr = cfg.get("smcr") or {}
    if "preloadHostDir" in smcr and (smcr["preloadHostDir"] != preload or
                                     mount_of_host.get(smcr["preloadHostDir"]) != smcr["preloadHostDir"]):
        p.append("agent config: smcr.preloadHostDir %r differs from the webhook's %s or is not mounted at the same "
                 "path" % (smcr["preloadHostDir"], preload))
    if "preloadSource" in smcr and smcr["preloadSource"] not in agent_image_files():
        p.append("agent config: smcr.preloadSource %r is not a file the agent image ships (%s)" %
                 (smcr["preloadSource"], sorted(agent_image_files())))
    if cfg.get("resourceName", RESOURCE) != wcfg.get("resourceName", RESOURCE):
        p.append("agent resourceName %s differs from the webhook's %s" %
                 (cfg.get("resourceName"), wcfg.get("resourceName")))
    return p


def agent_image_files():
    """Destinations of the files the agent image copies from its build stage."""
    out = set()
    with open(os.path.join(SOURCE_DIR, "images/erdma-agent/Dockerfile")) as f:
        for line in f:
            m = re.match(r"\s*COPY\s+--from=\S+\s+\S+\s+(\S+)", line)
            if m:
                out.add(m.group(1))
    return out


def check_certificate_source(name, objs, certs_patch, certs_secret):
    p = []
    dep = one(objs, "Deployment", "erdma-webhook")
    mwc = one(objs, "MutatingWebhookConfiguration", "erdma-webhook", ns="")
    secret_vols = [v["secret"]["secretName"] for v in dep["spec"]["template"]["spec"].get("volumes") or [] if "secret" in v]
    svc = "erdma-webhook.%s.svc" % NS
    if name == "cert-manager":
        ann = (mwc["metadata"].get("annotations") or {}).get("cert-manager.io/inject-ca-from", "")
        ns, _, cert_name = ann.partition("/")
        cert = one(objs, "Certificate", cert_name, ns=ns)
        if not cert:
            return ["cert-manager: inject-ca-from %r names no Certificate in the manifests" % ann]
        cs = cert["spec"]
        if cs.get("secretName") not in secret_vols:
            p.append("cert-manager: Certificate %s writes Secret %r, the Deployment mounts %s" %
                     (cert_name, cs.get("secretName"), secret_vols))
        for dns in ("erdma-webhook", "erdma-webhook.%s" % NS, svc, svc + ".cluster.local"):
            if dns not in (cs.get("dnsNames") or []):
                p.append("cert-manager: Certificate %s lacks dnsName %s" % (cert_name, dns))
        for c in of_kind(objs, "Certificate"):
            pk = c["spec"].get("privateKey") or {}
            if pk.get("algorithm") != "ECDSA" or pk.get("size") != 256:
                p.append("cert-manager: Certificate %s is not ECDSA P-256" % c["metadata"]["name"])
            ref = c["spec"].get("issuerRef") or {}
            issuer = one(objs, ref.get("kind", "Issuer"), ref.get("name", ""))
            if not issuer:
                p.append("cert-manager: Certificate %s: issuer %s not in the manifests" % (c["metadata"]["name"], ref))
        ca_issuer = one(objs, "Issuer", (cs.get("issuerRef") or {}).get("name", ""))
        ca_secret = ((ca_issuer or {}).get("spec") or {}).get("ca", {}).get("secretName")
        ca_certs = [c for c in of_kind(objs, "Certificate") if c["spec"].get("secretName") == ca_secret]
        if not ca_certs or not ca_certs[0]["spec"].get("isCA"):
            p.append("cert-manager: the serving certificate's issuer is not backed by a CA Certificate")
        elif (ca_certs[0]["spec"].get("privateKey") or {}).get("rotationPolicy") != "Never":
            p.append("cert-manager: the CA must keep its key on renewal (rotationPolicy: Never)")
    else:
        if mwc["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from"):
            p.append("%s: cert-manager annotation on an overlay whose caBundle comes from erdma-certs" % name)
        if certs_secret["metadata"]["name"] not in secret_vols or certs_secret["metadata"]["namespace"] != NS:
            p.append("erdma-certs writes Secret %s/%s, the Deployment mounts %s" %
                     (certs_secret["metadata"]["namespace"], certs_secret["metadata"]["name"], secret_vols))
        if certs_patch["metadata"]["name"] != mwc["metadata"]["name"] or \
                [w["name"] for w in certs_patch["webhooks"]] != [w["name"] for w in mwc["webhooks"]]:
            p.append("erdma-certs patches %s %s, the manifests have %s %s" %
                     (certs_patch["metadata"]["name"], [w["name"] for w in certs_patch["webhooks"]],
                      mwc["metadata"]["name"], [w["name"] for w in mwc["webhooks"]]))
    return p


def check_nfd(name, objs):
    """manifests/nfd turns nfdFeatureFile on, into NFD's features.d; every other overlay leaves it off."""
    nfd_file = (agent_config_of(objs) or {}).get("nfdFeatureFile") or ""
    if name == "nfd" and os.path.dirname(nfd_file) != NFD_FEATURES_DIR:
        return ["nfd: nfdFeatureFile %r is not a file in NFD's local features directory %s" %
                (nfd_file, NFD_FEATURES_DIR)]
    if name != "nfd" and nfd_file:
        return ["%s: nfdFeatureFile %r is set; it is off except in manifests/nfd" % (name, nfd_file)]
    return []


def check_network_policy(objs):
    """A NetworkPolicy on the webhook pods, when there is one: it selects them, restricts ingress
    only, admits to the admission port (the Service's target) ipBlocks alone (the apiservers), to
    the metrics port a namespace selector (Prometheus) and no ipBlock, and to no other port."""
    pols = of_kind(objs, "NetworkPolicy")
    if not pols:
        return []
    p = []
    dep = one(objs, "Deployment", "erdma-webhook")
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    container = dep["spec"]["template"]["spec"]["containers"][0]
    ports = {cp["name"]: cp["containerPort"] for cp in container.get("ports") or []}
    svc_target = one(objs, "Service", "erdma-webhook")["spec"]["ports"][0]["targetPort"]
    for pol in pols:
        n = pol["metadata"]["name"]
        spec = pol["spec"]
        if not selector_matches(spec.get("podSelector"), pod_labels):
            p.append("NetworkPolicy %s: podSelector %s does not select the webhook pods" % (n, spec.get("podSelector")))
        if spec.get("policyTypes") != ["Ingress"]:
            p.append("NetworkPolicy %s: policyTypes %s, want [Ingress] (egress is not restricted)" %
                     (n, spec.get("policyTypes")))
        by_port = {}
        for i, rule in enumerate(spec.get("ingress") or []):
            if not rule.get("from") or not rule.get("ports"):
                p.append("NetworkPolicy %s: ingress[%d] without from or ports admits everyone or every port" % (n, i))
                continue
            for port in rule["ports"]:
                name = port.get("port")
                if name not in ports and name not in ports.values():
                    p.append("NetworkPolicy %s: ingress[%d] port %r is not a port of the webhook container %s" %
                             (n, i, name, ports))
                    continue
                by_port.setdefault(name if name in ports else
                                   [k for k, v in ports.items() if v == name][0], []).extend(rule["from"])
        https = by_port.get(svc_target, [])
        if not https:
            p.append("NetworkPolicy %s: nothing may reach port %s, the Service's targetPort: kube-apiserver cannot "
                     "call the webhook" % (n, svc_target))
        for peer in https:
            if set(peer) != {"ipBlock"}:
                p.append("NetworkPolicy %s: port %s admits %s; only the apiservers' ipBlocks may reach it" %
                         (n, svc_target, peer))
            elif (peer["ipBlock"].get("cidr") or "").endswith("/0"):
                p.append("NetworkPolicy %s: port %s admits %s, i.e. everyone" % (n, svc_target, peer["ipBlock"]))
        metrics = by_port.get("metrics", [])
        if not any("namespaceSelector" in peer for peer in metrics):
            p.append("NetworkPolicy %s: no namespace (Prometheus) may reach port metrics" % n)
        for peer in metrics:
            if "ipBlock" in peer:
                p.append("NetworkPolicy %s: port metrics admits %s; kubelet's probes come from the pod's own node, "
                         "which NetworkPolicy always admits" % (n, peer["ipBlock"]))
        for name in sorted(set(by_port) - {svc_target, "metrics"}):
            p.append("NetworkPolicy %s: admits port %s, which the webhook does not serve to others" % (n, name))
    return p


def dra_host_dirs(dra):
    """The host directories the DRA driver is given, from dra_config's answer: the kubelet's plugin
    directory only as the driver's own <pluginDir>/<driverName> (other drivers' sockets and
    checkpoints stay out of reach), the others whole."""
    out = {k: dra[k] for k in DRA_DIRS}
    out["pluginDir"] = dra["pluginDir"].rstrip("/") + "/" + dra["driverName"]
    return out


def dra_config(cfg):
    """The agent config's dra section with the agent's defaults for keys left out, dirs without a
    trailing slash (as the agent reads them)."""
    d = cfg.get("dra") or {}
    out = {"enabled": bool(d.get("enabled", False)), "driverName": d.get("driverName") or DRA_DRIVER,
           "nodeName": d.get("nodeName") or ""}
    for key, default in DRA_DIRS.items():
        path = d.get(key) or default
        out[key] = path.rstrip("/") or "/"
    return out


def slice_policy_problems(objs):
    """The slice policy binds (Deny) on the agent's own service account and every write of a
    ResourceSlice, and compares the slice's node with the token's; what it refuses is tried on the
    real cluster (test/cluster/dra.sh)."""
    p = []
    policy = one(objs, "ValidatingAdmissionPolicy", SLICE_POLICY, ns="")
    binding = one(objs, "ValidatingAdmissionPolicyBinding", SLICE_POLICY, ns="")
    if not policy or not binding:
        return ["dra: no ValidatingAdmissionPolicy and binding %s" % SLICE_POLICY]
    spec, bspec = policy.get("spec") or {}, binding.get("spec") or {}
    if bspec.get("policyName") != SLICE_POLICY or bspec.get("validationActions") != ["Deny"]:
        p.append("ValidatingAdmissionPolicyBinding %s: %s, want policyName %s and validationActions [Deny]" %
                 (SLICE_POLICY, bspec, SLICE_POLICY))
    rules = (spec.get("matchConstraints") or {}).get("resourceRules") or []
    if [(r.get("apiGroups"), sorted(r.get("operations") or []), r.get("resources")) for r in rules] != [
            (["resource.k8s.io"], ["CREATE", "DELETE", "UPDATE"], ["resourceslices"])]:
        p.append("ValidatingAdmissionPolicy %s: resourceRules %s, want every write of resource.k8s.io resourceslices" %
                 (SLICE_POLICY, rules))
    who = "system:serviceaccount:%s:erdma-agent" % NS
    conditions = [c.get("expression", "") for c in spec.get("matchConditions") or []]
    if conditions != ["request.userInfo.username == '%s'" % who]:
        p.append("ValidatingAdmissionPolicy %s: matchConditions %s, want the agent's service account %s alone" %
                 (SLICE_POLICY, conditions, who))
    if spec.get("failurePolicy") != "Fail":
        p.append("ValidatingAdmissionPolicy %s: failurePolicy %s, want Fail" % (SLICE_POLICY, spec.get("failurePolicy")))
    text = json.dumps(spec.get("variables") or [])
    if "authentication.kubernetes.io/node-name" not in text or "spec.nodeName" not in text:
        p.append("ValidatingAdmissionPolicy %s: its variables do not compare spec.nodeName with the token's node" %
                 SLICE_POLICY)
    return p


def check_dra(name, objs):
    """The DRA driver: on in manifests/dra alone. There: the RBAC exactly the documented rules, bound
    to the agent's ServiceAccount; the DeviceClasses select the agent's driver (the SMC-R class
    only smcrCapable cards), the SMC-R class's opaque config is one the agent accepts, the RDMA
    class serves the agent's resourceName as its extended resource."""
    p = []
    cfg = agent_config_of(objs) or {}
    dra = dra_config(cfg)
    if dra["enabled"] != (name == "dra"):
        p.append("%s: dra.enabled is %s; the DRA driver is on in manifests/dra alone" % (name, dra["enabled"]))
    if name != "dra":
        return p
    if dra["driverName"] != DRA_DRIVER:
        p.append("dra: dra.driverName %s is not common/contract.hpp's %s, which the DeviceClasses select" %
                 (dra["driverName"], DRA_DRIVER))
    # RBAC
    role = one(objs, "ClusterRole", DRA_ROLE, ns="")
    if role:
        rules = []
        for r in role.get("rules") or []:
            for g in r.get("apiGroups") or []:
                for res in r.get("resources") or []:
                    rules.append((g, res, tuple(sorted(r.get("resourceNames") or [])), tuple(sorted(r.get("verbs") or []))))
        if sorted(rules) != DRA_RULES:
            p.append("ClusterRole %s: rules %s, want exactly %s (docs/dra.md, manifests/dra/rbac.yaml)" %
                     (DRA_ROLE, sorted(set(rules) ^ set(DRA_RULES)), DRA_RULES))
    p += slice_policy_problems(objs)
    binding = one(objs, "ClusterRoleBinding", DRA_ROLE, ns="")
    ds = one(objs, "DaemonSet", "erdma-agent")
    sa = ((ds or {}).get("spec", {}).get("template", {}).get("spec", {}).get("serviceAccountName"))
    if binding:
        ref = binding.get("roleRef") or {}
        if (ref.get("apiGroup"), ref.get("kind"), ref.get("name")) != ("rbac.authorization.k8s.io", "ClusterRole",
                                                                       DRA_ROLE):
            p.append("ClusterRoleBinding %s: roleRef %s is not ClusterRole %s" % (DRA_ROLE, ref, DRA_ROLE))
        subjects = [(x.get("kind"), x.get("namespace"), x.get("name")) for x in binding.get("subjects") or []]
        if subjects != [("ServiceAccount", NS, sa)]:
            p.append("ClusterRoleBinding %s: subjects %s, want only the agent's ServiceAccount %s/%s" %
                     (DRA_ROLE, subjects, NS, sa))
    # DeviceClasses: CEL on sample devices as DRA's CEL environment sees them (driver, attributes
    # and capacity by domain); the agent publishes smcrCapable on every card (agent/core/dra_slices).
    def device(driver, smcr):
        return {"device": {"driver": driver, "attributes": {driver: {"smcrCapable": smcr}}, "capacity": {driver: {}}}}
    samples = [(d, smcr) for d in (DRA_DRIVER, "gpu.nvidia.com", "dra.net", DRA_DRIVER + ".example.com", SMCR_CLASS)
               for smcr in (True, False)]
    for class_name, wants in ((DRA_DRIVER, lambda d, smcr: d == DRA_DRIVER),
                              (SMCR_CLASS, lambda d, smcr: d == DRA_DRIVER and smcr)):
        dc = one(objs, "DeviceClass", class_name, ns="")
        if not dc:
            continue
        if dc.get("apiVersion") != "resource.k8s.io/v1":
            p.append("DeviceClass %s: apiVersion %r, want resource.k8s.io/v1" % (class_name, dc.get("apiVersion")))
        spec = dc.get("spec") or {}
        exprs = [(sel.get("cel") or {}).get("expression") for sel in spec.get("selectors") or []]
        if not exprs or not all(isinstance(e, str) for e in exprs):
            p.append("DeviceClass %s has no CEL selectors: it would match every driver's devices" % class_name)
            continue
        for driver, smcr in samples:
            try:
                got = all(cel.evaluate(cel.parse(e), device(driver, smcr)) is True for e in exprs)
            except cel.CelEvalError as e:
                p.append("DeviceClass %s: selectors %s fail on a device of driver %s (smcrCapable %s): %s" %
                         (class_name, exprs, driver, smcr, e))
                continue
            if got != wants(driver, smcr):
                p.append("DeviceClass %s: selectors %s %s a device of driver %s with smcrCapable %s" %
                         (class_name, exprs, "accept" if got else "refuse", driver, smcr))
        configs = spec.get("config") or []
        if class_name == DRA_DRIVER:
            if configs:
                p.append("DeviceClass %s: config %s; the RDMA class needs none (mode rdma is the default)" %
                         (class_name, configs))
            resource = cfg.get("resourceName", RESOURCE)
            if spec.get("extendedResourceName") != resource:
                p.append("DeviceClass %s: extendedResourceName %r, want the agent's resourceName %s (what "
                         "dra.extendedResource serves)" % (class_name, spec.get("extendedResourceName"), resource))
        else:
            if "extendedResourceName" in spec:
                p.append("DeviceClass %s: extendedResourceName %s; the SMC-R class serves none" %
                         (class_name, spec["extendedResourceName"]))
            want = {"apiVersion": ERDMA_CONFIG_API_VERSION, "kind": ERDMA_CONFIG_KIND, "mode": "smcr"}
            opaque = [c.get("opaque") or {} for c in configs]
            if len(configs) != 1 or set(configs[0]) != {"opaque"} or opaque[0].get("driver") != DRA_DRIVER or \
                    opaque[0].get("parameters") != want:
                p.append("DeviceClass %s: config %s, want one opaque.driver %s with parameters %s (an ErdmaConfig "
                         "the agent accepts: agent/core/dra_claim.hpp)" % (class_name, configs, DRA_DRIVER, want))
    return p


def uncaught_breakages(objs, check, breakages, show=False):
    """Each (label, want, breaker) of `breakages` applied to a copy of `objs`: the labels whose
    breakage `check(copy)` does not report with a problem mentioning `want`."""
    missed = []
    for label, want, breaker in breakages:
        broken = copy.deepcopy(objs)
        breaker(broken)
        got = check(broken)
        hits = [x for x in got if want in x]
        if show:
            print("    broken: %-48s -> %s" % (label, (hits[0] if hits else "NOT CAUGHT")[:110]))
        if not hits:
            missed.append("%s: no problem mentioning %r (got %s)" % (label, want, got))
    return missed


def dra_differences(default, dra):
    """manifests/dra against manifests/default: the four DRA objects added; the agent config
    differs in dra.enabled alone; the DaemonSet in its config name, the token, NODE_NAME and the
    three directories alone; nothing else changes."""
    p = []
    d_cm, r_cm = agent_config_map(default), agent_config_map(dra)
    if not d_cm or not r_cm:
        return ["dra: no agent ConfigMap"]
    added = {("ClusterRole", "", DRA_ROLE), ("ClusterRoleBinding", "", DRA_ROLE), ("DeviceClass", "", DRA_DRIVER),
             ("DeviceClass", "", SMCR_CLASS), ("ValidatingAdmissionPolicy", "", SLICE_POLICY),
             ("ValidatingAdmissionPolicyBinding", "", SLICE_POLICY)}
    skip = added | {("ConfigMap", NS, d_cm["metadata"]["name"]), ("ConfigMap", NS, r_cm["metadata"]["name"]),
                    ("DaemonSet", NS, "erdma-agent")}
    diff = sorted(set(k for k in set(default) | set(dra) if k not in skip and default.get(k) != dra.get(k)))
    if diff:
        p.append("manifests/dra changes more than the agent's ConfigMap and DaemonSet and the DRA objects: %s" % diff)
    if d_cm["metadata"]["name"] == r_cm["metadata"]["name"]:
        p.append("manifests/dra: the merged agent config kept the base's name: the DaemonSet would not roll")
    d_cfg, r_cfg = copy.deepcopy(agent_config_of(default)), copy.deepcopy(agent_config_of(dra))
    d_on, r_on = (d_cfg.get("dra") or {}).pop("enabled", None), (r_cfg.get("dra") or {}).pop("enabled", None)
    if (d_on, r_on) != (False, True):
        p.append("dra.enabled is %r in manifests/dra and %r in the base; want true and false" % (r_on, d_on))
    if d_cfg != r_cfg:
        p.append("manifests/dra/agent-config.yaml differs from manifests/base/agent-config.yaml in more than "
                 "dra.enabled: keep the copy in step (%s)" %
                 sorted(k for k in set(r_cfg) | set(d_cfg) if r_cfg.get(k) != d_cfg.get(k)))
    ds = copy.deepcopy(dra.get(("DaemonSet", NS, "erdma-agent")))
    if not ds:
        return p + ["dra: no DaemonSet erdma-agent"]
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    dirs = {v["name"] for v in pod.get("volumes") or []
            if (v.get("hostPath") or {}).get("path") in set(dra_host_dirs(dra_config(agent_config_of(dra) or {})).values())}
    c["volumeMounts"] = [m for m in c.get("volumeMounts") or [] if m["name"] not in dirs]
    pod["volumes"] = [v for v in pod.get("volumes") or [] if v["name"] not in dirs]
    c["env"] = [e for e in c.get("env") or [] if e.get("name") != "NODE_NAME"]
    if not c["env"]:
        del c["env"]
    pod["automountServiceAccountToken"] = False
    if volume(pod, "config"):
        volume(pod, "config")["configMap"]["name"] = d_cm["metadata"]["name"]
    if ds != default.get(("DaemonSet", NS, "erdma-agent")):
        p.append("manifests/dra changes the DaemonSet beyond the token, NODE_NAME, the DRA directories and the "
                 "config name")
    return p


def all_problems(name, objs, version, certs_patch, certs_secret):
    secret_name = "erdma-webhook-tls"
    if name == "cert-manager":
        secret_name = one(objs, "Certificate", "erdma-webhook")["spec"]["secretName"]
    else:
        secret_name = certs_secret["metadata"]["name"]
    return (check_inventory(name, objs) + check_images(objs, version) + check_webhook_workload(objs, secret_name) +
            check_webhook_configuration(objs, "Ignore" if name == "fail-open" else "Fail") +
            check_match_conditions(objs) + check_agent(objs) + check_nfd(name, objs) + check_dra(name, objs) +
            check_network_policy(objs) +
            check_certificate_source(name, objs, certs_patch, certs_secret))


def dra_breakages():
    """Broken copies of manifests/dra: each must be reported by all_problems or dra_differences."""
    def agent(o):
        return o[("DaemonSet", NS, "erdma-agent")]["spec"]["template"]["spec"]

    def mount(o, path):
        return [m for m in agent(o)["containers"][0]["volumeMounts"] if m["mountPath"] == path][0]

    def drop_dir(o, path):
        name = mount(o, path)["name"]
        agent(o)["containers"][0]["volumeMounts"].remove(mount(o, path))
        agent(o)["volumes"] = [v for v in agent(o)["volumes"] if v["name"] != name]

    def role(o):
        return o[("ClusterRole", "", DRA_ROLE)]["rules"]

    def dc(o, name):
        return o[("DeviceClass", "", name)]["spec"]

    def set_expr(name, e):
        return lambda o: dc(o, name)["selectors"][0]["cel"].__setitem__("expression", e)

    def params(o):
        return dc(o, SMCR_CLASS)["config"][0]["opaque"]["parameters"]

    def dra_edit(o, changes):
        cm = agent_config_map(o)
        cfg = yaml.safe_load(cm["data"]["config.yaml"])
        cfg["dra"].update(changes)
        cm["data"]["config.yaml"] = yaml.safe_dump(cfg)

    def namespaced_role(o):
        r = o.pop(("ClusterRole", "", DRA_ROLE))
        r["metadata"]["namespace"] = NS
        o[("ClusterRole", NS, DRA_ROLE)] = r

    registry, plugins, cdi = DRA_DIRS["registryDir"], DRA_DIRS["pluginDir"] + "/" + DRA_DRIVER, DRA_DIRS["cdiDir"]
    return [
        ("dra.enabled off", "dra.enabled is False", lambda o: dra_edit(o, {"enabled": False})),
        ("config drifted beside dra.enabled", "more than dra.enabled", lambda o: dra_edit(o, {"slotsPerDevice": 8})),
        ("another driver name in the config", "dra.driverName", lambda o: dra_edit(o, {"driverName": "rdma.example.com"})),
        ("no token", "no API token", lambda o: agent(o).update(automountServiceAccountToken=False)),
        ("no NODE_NAME", "NODE_NAME", lambda o: agent(o)["containers"][0].pop("env")),
        ("NODE_NAME from the host IP", "NODE_NAME",
         lambda o: agent(o)["containers"][0]["env"][0]["valueFrom"]["fieldRef"].update(fieldPath="status.hostIP")),
        ("registry directory not mounted", "host paths", lambda o: drop_dir(o, registry)),
        ("plugins directory read-only", "readOnly=True", lambda o: mount(o, plugins).update(readOnly=True)),
        ("CDI directory mounted elsewhere", "mounted at /host/cdi", lambda o: mount(o, cdi).update(mountPath="/host/cdi")),
        ("pluginDir moved without the mount", "host paths",
         lambda o: dra_edit(o, {"pluginDir": "/var/lib/kubelet/dra-plugins"})),
        ("an extra env var", "changes the DaemonSet beyond",
         lambda o: agent(o)["containers"][0]["env"].append({"name": "DEBUG", "value": "1"})),
        ("RBAC: claims writable", "ClusterRole erdma-agent-dra: rules",
         lambda o: role(o)[1]["verbs"].append("update")),
        ("RBAC: any driver's claims", "ClusterRole erdma-agent-dra: rules", lambda o: role(o)[3].pop("resourceNames")),
        ("RBAC: secrets", "ClusterRole erdma-agent-dra: rules",
         lambda o: role(o).append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})),
        ("binding to the webhook's ServiceAccount", "want only the agent's ServiceAccount",
         lambda o: o[("ClusterRoleBinding", "", DRA_ROLE)]["subjects"][0].update(name="erdma-webhook")),
        ("binding to another role", "roleRef",
         lambda o: o[("ClusterRoleBinding", "", DRA_ROLE)]["roleRef"].update(name="cluster-admin")),
        ("RDMA class selects another driver", "refuse a device of driver " + DRA_DRIVER,
         set_expr(DRA_DRIVER, 'device.driver == "erdma.example.com"')),
        ("RDMA class selects every driver", "accept a device of driver gpu.nvidia.com",
         set_expr(DRA_DRIVER, 'device.driver != ""')),
        ("SMC-R class without smcrCapable", "accept a device of driver %s with smcrCapable False" % DRA_DRIVER,
         set_expr(SMCR_CLASS, 'device.driver == "%s"' % DRA_DRIVER)),
        ("SMC-R class testing smcrCapable of any driver", "accept a device of driver gpu.nvidia.com",
         set_expr(SMCR_CLASS, 'device.attributes[device.driver].smcrCapable == true')),
        ("no selectors", "no CEL selectors", lambda o: dc(o, DRA_DRIVER).pop("selectors")),
        ("v1beta1", "apiVersion", lambda o: o[("DeviceClass", "", SMCR_CLASS)].update(apiVersion="resource.k8s.io/v1beta1")),
        ("SMC-R class in mode rdma", "parameters", lambda o: params(o).update(mode="rdma")),
        ("SMC-R config of another kind", "parameters", lambda o: params(o).update(kind="Config")),
        ("SMC-R config with an unknown member", "parameters", lambda o: params(o).update(sysctls={})),
        ("SMC-R config for another driver", "opaque.driver",
         lambda o: dc(o, SMCR_CLASS)["config"][0]["opaque"].update(driver="erdma.example.com")),
        ("RDMA class serves another resource", "extendedResourceName",
         lambda o: dc(o, DRA_DRIVER).update(extendedResourceName="aliyun/rdma")),
        ("SMC-R class renamed", "missing DeviceClass",
         lambda o: o.__setitem__(("DeviceClass", "", "smcr"), o.pop(("DeviceClass", "", SMCR_CLASS)))),
        ("a ClusterRole with a namespace", "cluster-scoped", namespaced_role),
    ]


def dra_examples():
    """examples/dra/*.yaml: {file name: [documents]}."""
    d = os.path.join(SOURCE_DIR, "examples/dra")
    out = {}
    for fname in sorted(os.listdir(d)):
        if fname.endswith(".yaml"):
            with open(os.path.join(d, fname)) as f:
                out[fname] = [x for x in yaml.safe_load_all(f) if x]
    return out


def pod_spec_of(doc):
    if doc.get("kind") == "Pod":
        return doc.get("spec") or {}
    if doc.get("kind") in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        return doc["spec"]["template"].get("spec") or {}
    return None


# DeviceClasses of other DRA drivers an example may ask for beside ours, with who installs them.
OTHER_DRIVERS_CLASSES = {"gpu.nvidia.com": "NVIDIA's DRA driver for GPUs (kubernetes-sigs/dra-driver-nvidia-gpu)"}
# Standard attributes (k8s.io/dynamic-resource-allocation deviceattribute) a constraint may match.
# pciBusID is left out on purpose: it is each device's own address, so two devices never match.
MATCHABLE_STANDARD_ATTRIBUTES = {"resource.kubernetes.io/pcieRoot", "resource.kubernetes.io/numaNode"}


def check_dra_examples(examples, objs):
    """Every claim of examples/dra asks for a DeviceClass manifests/dra renders (beside, at most,
    classes of OTHER_DRIVERS_CLASSES), in resource.k8s.io/v1's shape; each constraint names requests
    of its claim and a fully qualified attribute two devices can share; every pod's claims name a
    template or claim of its file, and each container's resources.claims one of its pod's claims."""
    p = []
    classes = {k[2] for k in objs if k[0] == "DeviceClass"}
    if not examples:
        return ["examples/dra has no example"]
    for fname, docs in examples.items():
        templates = {d["metadata"]["name"] for d in docs if d.get("kind") == "ResourceClaimTemplate"}
        claims = {d["metadata"]["name"] for d in docs if d.get("kind") == "ResourceClaim"}
        for d in docs:
            kind, name = d.get("kind"), d["metadata"]["name"]
            if kind in ("ResourceClaimTemplate", "ResourceClaim"):
                if d.get("apiVersion") != "resource.k8s.io/v1":
                    p.append("examples/dra/%s: %s %s is %s, want resource.k8s.io/v1 (what manifests/dra's classes "
                             "are)" % (fname, kind, name, d.get("apiVersion")))
                spec = d["spec"]["spec"] if kind == "ResourceClaimTemplate" else d["spec"]
                requests = ((spec.get("devices") or {}).get("requests")) or []
                if not requests:
                    p.append("examples/dra/%s: %s %s requests no device" % (fname, kind, name))
                ours = False
                for r in requests:
                    # v1: a request is exactly one device request or a list of alternatives
                    alternatives = [r["exactly"]] if "exactly" in r else list(r.get("firstAvailable") or [])
                    if not alternatives:
                        p.append("examples/dra/%s: request %s has neither exactly nor firstAvailable (the v1 shape)" %
                                 (fname, r.get("name")))
                    for a in alternatives:
                        if a.get("deviceClassName") in classes:
                            ours = True
                        elif a.get("deviceClassName") not in OTHER_DRIVERS_CLASSES:
                            p.append("examples/dra/%s: request %s asks for DeviceClass %r; manifests/dra has %s "
                                     "(other drivers': %s)" % (fname, r.get("name"), a.get("deviceClassName"),
                                                               sorted(classes), sorted(OTHER_DRIVERS_CLASSES)))
                if requests and not ours:
                    p.append("examples/dra/%s: %s %s asks for no DeviceClass of manifests/dra" % (fname, kind, name))
                names = {r.get("name") for r in requests}
                for c in ((spec.get("devices") or {}).get("constraints")) or []:
                    for ref in c.get("requests") or []:
                        if ref.split("/")[0] not in names:
                            p.append("examples/dra/%s: a constraint names request %s; the claim has %s" %
                                     (fname, ref, sorted(names)))
                    attr = c.get("matchAttribute")
                    if attr is not None and "/" not in attr:
                        p.append("examples/dra/%s: matchAttribute %s has no domain (the API wants a fully "
                                 "qualified name, e.g. resource.kubernetes.io/pcieRoot)" % (fname, attr))
                    elif attr is not None and attr.startswith("resource.kubernetes.io/") and \
                            attr not in MATCHABLE_STANDARD_ATTRIBUTES:
                        p.append("examples/dra/%s: matchAttribute %s: two devices never share it; match one of %s" %
                                 (fname, attr, sorted(MATCHABLE_STANDARD_ATTRIBUTES)))
                continue
            pod = pod_spec_of(d)
            if pod is None:
                p.append("examples/dra/%s: unexpected %s %s" % (fname, kind, name))
                continue
            pod_claims = set()
            for c in pod.get("resourceClaims") or []:
                pod_claims.add(c["name"])
                if c.get("resourceClaimTemplateName") not in templates and c.get("resourceClaimName") not in claims:
                    p.append("examples/dra/%s: %s %s's claim %s names no ResourceClaimTemplate or ResourceClaim of "
                             "the file" % (fname, kind, name, c["name"]))
            if not pod_claims:
                p.append("examples/dra/%s: %s %s has no resourceClaims" % (fname, kind, name))
            used = set()
            for c in (pod.get("initContainers") or []) + (pod.get("containers") or []):
                for ref in ((c.get("resources") or {}).get("claims")) or []:
                    used.add(ref["name"])
                    if ref["name"] not in pod_claims:
                        p.append("examples/dra/%s: container %s uses claim %s, not one of its pod's %s" %
                                 (fname, c["name"], ref["name"], sorted(pod_claims)))
            for unused in sorted(pod_claims - used):
                p.append("examples/dra/%s: %s %s's claim %s is used by no container: none would get the card" %
                         (fname, kind, name, unused))
    return p


def dra_example_breakages():
    def first(examples, fname, kind):
        return [d for d in examples[fname] if d.get("kind") == kind][0]

    def template_spec(examples, fname):
        return first(examples, fname, "ResourceClaimTemplate")["spec"]["spec"]["devices"]["requests"][0]

    def gpu_constraint(examples):
        return first(examples, "gpu-and-card.yaml", "ResourceClaimTemplate")["spec"]["spec"]["devices"]["constraints"][0]
    return [
        ("class renamed", "asks for DeviceClass 'erdma'",
         lambda e: template_spec(e, "nccl-all-cards.yaml")["exactly"].update(deviceClassName="erdma")),
        ("SMC-R class name of the old draft", "asks for DeviceClass 'erdma-smcr.aliyun.com'",
         lambda e: template_spec(e, "smcr-one-card.yaml")["exactly"].update(deviceClassName="erdma-smcr.aliyun.com")),
        ("v1beta1 shape", "neither exactly nor firstAvailable",
         lambda e: template_spec(e, "nccl-all-cards.yaml").update(template_spec(e, "nccl-all-cards.yaml").pop("exactly"))),
        ("v1beta1 apiVersion", "want resource.k8s.io/v1",
         lambda e: first(e, "nccl-all-cards.yaml", "ResourceClaimTemplate").update(apiVersion="resource.k8s.io/v1beta1")),
        ("pod names a missing template", "names no ResourceClaimTemplate",
         lambda e: pod_spec_of(first(e, "smcr-one-card.yaml", "Deployment"))["resourceClaims"][0].update(
             resourceClaimTemplateName="erdma-smcr-x")),
        ("container uses no claim", "is used by no container",
         lambda e: pod_spec_of(first(e, "nccl-all-cards.yaml", "Pod"))["containers"][0]["resources"].pop("claims")),
        ("GPU class misspelled", "asks for DeviceClass 'gpu.nvidia'",
         lambda e: template_spec(e, "gpu-and-card.yaml")["exactly"].update(deviceClassName="gpu.nvidia")),
        ("only the GPU asked for", "asks for no DeviceClass of manifests/dra",
         lambda e: first(e, "gpu-and-card.yaml", "ResourceClaimTemplate")["spec"]["spec"]["devices"]["requests"].pop()),
        ("alignment on pciBusID", "two devices never share it",
         lambda e: gpu_constraint(e).update(matchAttribute="resource.kubernetes.io/pciBusID")),
        ("alignment without the domain", "has no domain",
         lambda e: gpu_constraint(e).update(matchAttribute="pcieRoot")),
        ("constraint names a missing request", "a constraint names request card",
         lambda e: gpu_constraint(e).update(requests=["gpu", "card"])),
    ]


# --- deliberately broken copies: each must be caught ------------------------------------------

def breakages():
    def dep(o):
        return o[("Deployment", NS, "erdma-webhook")]

    def hook(o):
        return o[("MutatingWebhookConfiguration", "", "erdma-webhook")]["webhooks"][0]

    def agent(o):
        return o[("DaemonSet", NS, "erdma-agent")]["spec"]["template"]["spec"]

    def set_(fn):
        return fn

    # The project version with its pre-release label dropped, or one added on a release: a tag
    # that looks right and is not.
    version = project_version()
    near_version = version.split("-")[0] if "-" in version else version + "-rc.1"

    def retag(container, tag):
        container.update(image=container["image"].rsplit(":", 1)[0] + ":" + tag)

    return [
        ("Service targetPort to the metrics port", "targetPort",
         set_(lambda o: o[("Service", NS, "erdma-webhook")]["spec"]["ports"][0].update(targetPort="metrics"))),
        ("webhook path /mutate", "clientConfig.service.path",
         set_(lambda o: hook(o)["clientConfig"]["service"].update(path="/mutate"))),
        ("webhook service in another namespace", "clientConfig.service",
         set_(lambda o: hook(o)["clientConfig"]["service"].update(namespace="default"))),
        ("pod label renamed", "selector",
         set_(lambda o: dep(o)["spec"]["template"]["metadata"]["labels"].update({"app.kubernetes.io/name": "x"}))),
        ("image at :latest", ":latest",
         set_(lambda o: dep(o)["spec"]["template"]["spec"]["containers"][0].update(
             image="registry.example.com/erdma-controller/erdma-webhook:latest"))),
        ("image without a tag", "has no tag",
         set_(lambda o: agent(o)["containers"][0].update(image="registry.example.com/erdma-controller/erdma-agent"))),
        ("agent image at the version without its pre-release label, or with one", "not at the project version",
         set_(lambda o: retag(agent(o)["containers"][0], near_version))),
        ("webhook image likewise", "not at the project version",
         set_(lambda o: retag(dep(o)["spec"]["template"]["spec"]["containers"][0], near_version))),
        ("Deployment's own version label likewise", "Deployment erdma-webhook: version label",
         set_(lambda o: dep(o)["metadata"]["labels"].update({"app.kubernetes.io/version": near_version}))),
        ("agent pod template's version label likewise", "DaemonSet erdma-agent pod template: version label",
         set_(lambda o: o[("DaemonSet", NS, "erdma-agent")]["spec"]["template"]["metadata"]["labels"].update(
             {"app.kubernetes.io/version": near_version}))),
        ("--listen on another port", "--listen",
         set_(lambda o: dep(o)["spec"]["template"]["spec"]["containers"][0]["args"].__setitem__(
             1, "--listen=0.0.0.0:9443"))),
        ("Secret volume renamed", "Secret volume",
         set_(lambda o: dep(o)["spec"]["template"]["spec"]["volumes"][0]["secret"].update(secretName="other"))),
        ("namespaceSelector without the kube-system exclusion", "kube-system",
         set_(lambda o: hook(o)["namespaceSelector"].update(
             matchExpressions=hook(o)["namespaceSelector"]["matchExpressions"][:1]))),
        ("no matchConditions", "no matchConditions", set_(lambda o: hook(o).pop("matchConditions"))),
        ("matchCondition on the wrong annotation", "SMC-R annotation true",
         set_(lambda o: hook(o)["matchConditions"][1].update(
             expression=hook(o)["matchConditions"][1]["expression"].replace("erdma-smcr", "erdma-smc")))),
        ("NCCL pods sent although the config gives them nothing", "for nothing",
         set_(lambda o: hook(o)["matchConditions"].__setitem__(1, yaml.safe_load(open(os.path.join(
             SOURCE_DIR, "manifests/erdma-env/match-erdma-pods.yaml")))[0]["value"]))),
        ("timeout 10 s", "timeoutSeconds", set_(lambda o: hook(o).update(timeoutSeconds=10))),
        ("readiness probe on /healthz", "readinessProbe path",
         set_(lambda o: dep(o)["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"].update(
             path="/healthz"))),
        ("agent mounts the API token", "needs no API token",
         set_(lambda o: agent(o).update(automountServiceAccountToken=True))),
        ("agent gets the CDI directory", "host paths",
         set_(lambda o: agent(o)["volumes"].append({"name": "cdi", "hostPath": {"path": "/var/run/cdi"}}))),
        ("DRA driver on outside manifests/dra", "dra.enabled is True",
         set_(lambda o: agent_config_edit(o, {"dra": {"enabled": True}}))),
        ("agent gets /etc", "host paths",
         set_(lambda o: agent(o)["volumes"].append({"name": "etc", "hostPath": {"path": "/etc"}}))),
        ("agent privileged", "privileged",
         set_(lambda o: agent(o)["containers"][0]["securityContext"].update(privileged=True))),
        ("agent probe on the node's IP", "readinessProbe host",
         set_(lambda o: agent(o)["containers"][0]["readinessProbe"]["httpGet"].pop("host"))),
        ("agent metrics on every address", "is not loopback",
         set_(lambda o: agent_config_edit(o, {"metricsListen": "0.0.0.0:9467"}))),
        ("webhook runs as root", "runAsUser",
         set_(lambda o: dep(o)["spec"]["template"]["spec"]["securityContext"].update(runAsUser=0))),
        ("config by subPath", "subPath",
         set_(lambda o: dep(o)["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][1].update(
             subPath="config.yaml"))),
        ("PDB selects nothing", "PodDisruptionBudget",
         set_(lambda o: o[("PodDisruptionBudget", NS, "erdma-webhook")]["spec"].update(
             selector={"matchLabels": {"app": "nothing"}}))),
        ("caBundle written into the manifests", "caBundle",
         set_(lambda o: hook(o)["clientConfig"].update(caBundle="AAAA"))),
        # SMC-R keys of the agent config, for agent builds that have them
        ("SMC-R on without procRoot", "procRoot",
         set_(lambda o: agent_config_edit(o, {}, remove=["procRoot"]))),
        ("procRoot left at the container's /proc", "procRoot",
         set_(lambda o: agent_config_edit(o, {"procRoot": "/proc"}))),
        ("criSocket elsewhere", "criSocket",
         set_(lambda o: agent_config_edit(o, {"criSocket": "/run/crio/crio.sock"}))),
        ("podResourcesSocket elsewhere", "podResourcesSocket",
         set_(lambda o: agent_config_edit(o, {"podResourcesSocket": "/tmp/kubelet.sock"}))),
        ("preload dir differs from the webhook's", "smcr.preloadHostDir",
         set_(lambda o: agent_config_edit(o, {"procRoot": "/host/proc", "smcr": {"preloadHostDir": "/opt/smc"}}))),
        ("agent ConfigMap with a fixed name", "content-hash",
         set_(lambda o: rename_agent_config(o, AGENT_CONFIG))),
        ("DaemonSet mounts an agent ConfigMap that is not rendered", "--config",
         set_(lambda o: agent(o)["volumes"][0]["configMap"].update(name=AGENT_CONFIG + "-bbbbbbbbbb"))),
        ("agent ConfigMap without its labels", "labels",
         set_(lambda o: agent_config_map(o)["metadata"].pop("labels"))),
        ("nfdFeatureFile on without the features.d mount", "not in a host directory",
         set_(lambda o: agent_config_edit(o, {"nfdFeatureFile": NFD_FEATURES_DIR + "/erdma"}))),
        ("webhook preloads another library name", "smcr.library",
         set_(lambda o: webhook_config_edit(o, {"smcr": {"library": "libsmc-preload-v2.so"}}))),
        ("preload source the image does not ship", "smcr.preloadSource",
         set_(lambda o: agent_config_edit(o, {"procRoot": "/host/proc", "smcr": {"preloadSource": "/lib/x.so"}}))),
    ]


def network_policy_breakages():
    """Broken copies of manifests/network-policy."""
    def pol(o):
        return o[("NetworkPolicy", NS, "erdma-webhook")]["spec"]

    return [
        ("policy selects other pods", "does not select the webhook pods",
         lambda o: pol(o)["podSelector"]["matchLabels"].update({"app.kubernetes.io/name": "x"})),
        ("tenant pods admitted to the admission port", "only the apiservers' ipBlocks",
         lambda o: pol(o)["ingress"][0]["from"].append({"namespaceSelector": {}})),
        ("admission port open to the world", "i.e. everyone",
         lambda o: pol(o)["ingress"][0]["from"][0]["ipBlock"].update(cidr="0.0.0.0/0")),
        ("admission rule on a port the pod does not have", "not a port of the webhook container",
         lambda o: pol(o)["ingress"][0]["ports"][0].update(port="webhook")),
        ("admission rule on the metrics port", "the Service's targetPort",
         lambda o: pol(o)["ingress"][0]["ports"][0].update(port="metrics")),
        ("a rule without from", "without from or ports", lambda o: pol(o)["ingress"][1].pop("from")),
        ("egress restricted too", "policyTypes", lambda o: pol(o).update(policyTypes=["Ingress", "Egress"])),
    ]


def erdma_env_breakages():
    """Broken copies of manifests/erdma-env, and of the default's conditions under its config."""
    def hook(o):
        return o[("MutatingWebhookConfiguration", "", "erdma-webhook")]["webhooks"][0]

    def default_condition(o):
        hook(o)["matchConditions"][1] = {
            "name": "asks-for-smcr",
            "expression": "has(object.metadata.annotations) && '%s' in object.metadata.annotations && "
                          "object.metadata.annotations['%s'] != 'false'" % (SMCR_ANNOTATION, SMCR_ANNOTATION)}
    return [
        ("erdmaEnv set, eRDMA pods not sent", "do not send pods asking", default_condition),
        ("erdmaEnv emptied, eRDMA pods still sent", "for nothing",
         lambda o: webhook_config_edit(o, {"erdmaEnv": []})),
        ("condition tests another resource name", "do not send pods asking",
         lambda o: hook(o)["matchConditions"][1].update(
             expression=hook(o)["matchConditions"][1]["expression"].replace("'aliyun/erdma'", "'aliyun/rdma'"))),
    ]


POOL_LABEL = "erdma-controller/pool"
# manifests/mixed-pools: DaemonSet -> (pool label value, driver.prefer, smcr.enabled)
POOLS = {"erdma-agent": ("smcr", "default", True), "erdma-agent-gpu": ("gpu", "ofed", False)}


def node_selected(pod_spec, node_labels):
    """Whether a pod spec's nodeSelector and required nodeAffinity admit a node with these labels."""
    for k, v in (pod_spec.get("nodeSelector") or {}).items():
        if node_labels.get(k) != v:
            return False
    req = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
           .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = req.get("nodeSelectorTerms") or []
    if terms and not any(selector_matches({"matchExpressions": t.get("matchExpressions") or []}, node_labels)
                         for t in terms):
        return False
    return True


def one_pool(objs, name):
    """The objects with only DaemonSet `name` left, under the name erdma-agent, so that every check
    of a single agent (check_agent) applies to it."""
    view = {k: v for k, v in objs.items() if k[0] != "DaemonSet"}
    ds = copy.deepcopy(objs[("DaemonSet", NS, name)])
    ds["metadata"]["name"] = "erdma-agent"
    view[("DaemonSet", NS, "erdma-agent")] = ds
    return view


def check_mixed_pools(objs, default):
    """manifests/mixed-pools: two agent DaemonSets with distinct names and selectors, each on the
    nodes of its pool label only, each with its pool's driver mode; everything else as in
    manifests/default."""
    p = []
    dss = {n: o for (k, _, n), o in objs.items() if k == "DaemonSet"}
    if set(dss) != set(POOLS):
        return ["mixed-pools: DaemonSets %s, want %s" % (sorted(dss), sorted(POOLS))]
    # each agent passes every single-agent check
    for name in POOLS:
        p += ["%s: %s" % (name, x) for x in check_agent(one_pool(objs, name))]
    # selectors: each selects its own pods and not the other's
    for a in POOLS:
        for b in POOLS:
            sel = dss[a]["spec"]["selector"]
            labels = dss[b]["spec"]["template"]["metadata"].get("labels") or {}
            if selector_matches(sel, labels) != (a == b):
                p.append("DaemonSet %s's selector %s %s the pods of %s" % (a, sel, "does not select" if a == b
                                                                         else "also selects", b))
        labels = dss[a]["spec"]["template"]["metadata"].get("labels") or {}
        if labels.get("app.kubernetes.io/name") != "erdma-agent":
            p.append("DaemonSet %s: its pods lost app.kubernetes.io/name=erdma-agent (docs find agents by it)" % a)
    # nodes: a node of each pool runs exactly its pool's agent; a node without a pool label none
    base = {"kubernetes.io/os": "linux", "aliyun.accelerator/erdma": "true"}
    for pool in [v[0] for v in POOLS.values()] + [None, "other"]:
        node = dict(base, **({POOL_LABEL: pool} if pool else {}))
        running = sorted(n for n in POOLS if node_selected(dss[n]["spec"]["template"]["spec"], node))
        want = sorted(n for n, v in POOLS.items() if v[0] == pool)
        if running != want:
            p.append("a node labelled %s runs %s, want %s" % (node, running, want))
    # each pool's config: its driver mode, SMC-R on only where the driver mode carries it
    base_cfg = agent_config_of(default) or {}
    for name, (_, prefer, smcr) in POOLS.items():
        cfg = agent_config_of(one_pool(objs, name)) or {}
        got = ((cfg.get("driver") or {}).get("prefer"), (cfg.get("smcr") or {}).get("enabled", True))
        if got != (prefer, smcr):
            p.append("DaemonSet %s: config driver.prefer %s, smcr.enabled %s; want %s, %s" % ((name,) + got +
                                                                                            (prefer, smcr)))
        rest = copy.deepcopy(cfg)
        rest.get("driver", {}).pop("prefer", None)
        rest.get("smcr", {}).pop("enabled", None)
        want_rest = copy.deepcopy(base_cfg)
        want_rest.get("driver", {}).pop("prefer", None)
        want_rest.get("smcr", {}).pop("enabled", None)
        if rest != want_rest:
            p.append("DaemonSet %s: its config differs from manifests/base/agent-config.yaml in more than "
                     "driver.prefer and smcr.enabled: keep the copy in step (%s)" %
                     (name, sorted(k for k in set(rest) | set(want_rest) if rest.get(k) != want_rest.get(k))))
    # everything else: manifests/default's objects, the SMC-R pool's DaemonSet but for its pool label
    extra = {k for k in objs if k not in default}
    want_extra = {("DaemonSet", NS, "erdma-agent-gpu"), ("ConfigMap", NS, agent_config_map(
        one_pool(objs, "erdma-agent-gpu"))["metadata"]["name"])}
    if extra != want_extra or set(default) - set(objs):
        p.append("mixed-pools adds %s and drops %s; want to add only %s" % (sorted(extra), sorted(set(default) -
                                                                                                  set(objs)),
                                                                            sorted(want_extra)))
    for k in default:
        if k in objs and k[0] != "DaemonSet" and objs[k] != default[k]:
            p.append("mixed-pools changes %s %s/%s" % k)
    smcr_ds = copy.deepcopy(dss["erdma-agent"])
    for part in (smcr_ds["metadata"]["labels"], smcr_ds["spec"]["selector"]["matchLabels"],
                 smcr_ds["spec"]["template"]["metadata"]["labels"], smcr_ds["spec"]["template"]["spec"]["nodeSelector"]):
        part.pop(POOL_LABEL, None)
    if smcr_ds != default.get(("DaemonSet", NS, "erdma-agent")):
        p.append("mixed-pools changes the SMC-R pool's DaemonSet beyond its pool label")
    return p


PAUSE_IMAGE = re.compile(r"(.*/)?pause:[0-9.]+")


def check_cleanup(objs, default):
    """manifests/cleanup: a DaemonSet that runs `erdma-agent cleanup` from the agent image (the
    one program that image has: it has no shell) with the installed agent's config, on the host
    network, on the agent's nodes, with what cleanup needs and no more; its pods are not the
    agent's; nothing else but the agent ConfigMap (and its ServiceAccount)."""
    p = []
    agent = default[("DaemonSet", NS, "erdma-agent")]
    agent_c = agent["spec"]["template"]["spec"]["containers"][0]
    want = {("DaemonSet", NS, "erdma-cleanup"), ("ServiceAccount", NS, "erdma-agent"),
            ("ConfigMap", NS, agent_config_map(default)["metadata"]["name"])}
    if set(objs) != want:
        return ["manifests/cleanup renders %s, want %s" % (sorted(objs), sorted(want))]
    ds = objs[("DaemonSet", NS, "erdma-cleanup")]
    pod = ds["spec"]["template"]["spec"]
    labels = ds["spec"]["template"]["metadata"].get("labels") or {}
    if not selector_matches(ds["spec"]["selector"], labels):
        p.append("erdma-cleanup: selector does not match its pods")
    if selector_matches(agent["spec"]["selector"], labels) or \
            labels.get("app.kubernetes.io/name") == "erdma-agent":
        p.append("erdma-cleanup: its pods carry the agent's labels; `delete daemonset -l "
                 "app.kubernetes.io/name=erdma-agent` and the agent's selector would take them")
    if pod.get("nodeSelector") != agent["spec"]["template"]["spec"].get("nodeSelector") or \
            pod.get("tolerations") != agent["spec"]["template"]["spec"].get("tolerations"):
        p.append("erdma-cleanup: nodeSelector/tolerations %s %s are not the agent's" %
                 (pod.get("nodeSelector"), pod.get("tolerations")))
    if pod.get("hostNetwork") is not True:
        p.append("erdma-cleanup: hostNetwork must be true (the node's pnet and UEID tables)")
    inits, ctrs = pod.get("initContainers") or [], pod.get("containers") or []
    if len(inits) != 1 or len(ctrs) != 1:
        return p + ["erdma-cleanup: want one init container (the cleanup) and one container (pause)"]
    c = inits[0]
    if c["image"] != agent_c["image"]:
        p.append("erdma-cleanup: image %s is not the agent's %s" % (c["image"], agent_c["image"]))
    cmd = (c.get("command") or [None])[0]
    if cmd not in agent_image_files() or cmd != agent_c["command"][0]:
        p.append("erdma-cleanup: command %s is not a program the agent image has (%s): it has no shell" %
                 (c.get("command"), sorted(agent_image_files())))
    args = c.get("args") or []
    if not args or args[0] != "cleanup" or "--dry-run" in args:
        p.append("erdma-cleanup: args %s do not run `erdma-agent cleanup`" % args)
    caps = (c.get("securityContext") or {}).get("capabilities") or {}
    if caps.get("drop") != ["ALL"] or set(caps.get("add") or []) != {"NET_ADMIN"}:
        p.append("erdma-cleanup: capabilities %s, want drop ALL and add NET_ADMIN only (SMC netlink writes)" % caps)
    # its config is the installed agent's, mounted where --config says
    path = flag(args, "--config")
    m = mount_for(c, path or "")
    v = volume(pod, m["name"]) if m else None
    cm_name = (v or {}).get("configMap", {}).get("name")
    if cm_name != agent_config_map(default)["metadata"]["name"] or \
            os.path.relpath(path, m["mountPath"]) != "config.yaml":
        p.append("erdma-cleanup: --config %r is not the installed agent's ConfigMap (%s)" % (path, cm_name))
    cfg = agent_config_of(default) or {}
    host_root = flag(args, "--host-root") or ""
    preload = (cfg.get("smcr") or {}).get("preloadHostDir", CONTRACT["kPreloadHostDir"]).rstrip("/")
    parent = os.path.dirname(preload)
    pm = mount_for(c, host_root + preload)
    pv = volume(pod, pm["name"]) if pm else None
    if not pm or pm.get("readOnly") or not pv or (pv.get("hostPath") or {}).get("path") != parent or \
            pm["mountPath"] != host_root + parent:
        p.append("erdma-cleanup: the preload directory's parent %s is not mounted read-write at %s%s (the "
                 "directory itself is removed when empty, so it cannot be the mount point)" % (parent, host_root, parent))
    host = sorted((x.get("hostPath") or {}).get("path") for x in pod.get("volumes") or [] if "hostPath" in x)
    if host != [parent]:
        p.append("erdma-cleanup: host paths %s, want only %s" % (host, [parent]))
    done = ctrs[0]
    if not PAUSE_IMAGE.fullmatch(done["image"]) or done.get("command") or done.get("args"):
        p.append("erdma-cleanup: the long-running container must be a pause image with its own entrypoint, "
                 "got %s %s %s" % (done["image"], done.get("command"), done.get("args")))
    return p


def cleanup_breakages():
    def pod(o):
        return o[("DaemonSet", NS, "erdma-cleanup")]["spec"]["template"]["spec"]
    return [
        ("a shell command", "is not a program the agent image has",
         lambda o: pod(o)["initContainers"][0].update(command=["/bin/sh", "-c"],
                                                       args=["erdma-agent cleanup && sleep infinity"])),
        ("the agent's labels", "carry the agent's labels",
         lambda o: o[("DaemonSet", NS, "erdma-cleanup")]["spec"]["template"]["metadata"]["labels"].update(
             {"app.kubernetes.io/name": "erdma-agent"})),
        ("the preload directory as mount point", "cannot be the mount point",
         lambda o: pod(o)["initContainers"][0]["volumeMounts"][1].update(
             mountPath="/host/var/lib/erdma-controller/lib")),
        ("no host network", "hostNetwork", lambda o: pod(o).pop("hostNetwork")),
        ("a dry run", "do not run", lambda o: pod(o)["initContainers"][0]["args"].append("--dry-run")),
    ]


def mixed_pools_breakages():
    def ds(o, name):
        return o[("DaemonSet", NS, name)]

    def gpu_cfg(o, changes):
        cm = agent_config_map(one_pool(o, "erdma-agent-gpu"))
        cfg = yaml.safe_load(cm["data"]["config.yaml"])
        for k, v in changes.items():
            cfg.setdefault(k, {}).update(v)
        cm["data"]["config.yaml"] = yaml.safe_dump(cfg)
    return [
        ("GPU pool's selector is the SMC-R pool's", "also selects",
         lambda o: ds(o, "erdma-agent-gpu")["spec"]["selector"]["matchLabels"].update({POOL_LABEL: "smcr"})),
        ("GPU pool without its pool in the nodeSelector", "runs ['erdma-agent', 'erdma-agent-gpu']",
         lambda o: ds(o, "erdma-agent-gpu")["spec"]["template"]["spec"]["nodeSelector"].pop(POOL_LABEL)),
        ("GPU pool in default driver mode", "driver.prefer default",
         lambda o: gpu_cfg(o, {"driver": {"prefer": "default"}})),
        ("GPU pool config drifted", "keep the copy in step", lambda o: gpu_cfg(o, {"devices": {"rescanSeconds": 9}})),
        ("one agent only", "want ['erdma-agent', 'erdma-agent-gpu']",
         lambda o: o.pop(("DaemonSet", NS, "erdma-agent-gpu"))),
    ]


def nfd_breakages():
    """Broken copies of manifests/nfd."""
    def agent(o):
        return o[("DaemonSet", NS, "erdma-agent")]["spec"]["template"]["spec"]

    def nfd_mount(o):
        return [m for m in agent(o)["containers"][0]["volumeMounts"] if m["mountPath"] == NFD_FEATURES_DIR][0]

    def drop_mount(o):
        agent(o)["containers"][0]["volumeMounts"].remove(nfd_mount(o))
        agent(o)["volumes"] = [v for v in agent(o)["volumes"] if (v.get("hostPath") or {}).get("path") != NFD_FEATURES_DIR]

    return [
        ("features.d not mounted", "not in a host directory", drop_mount),
        ("features.d mounted read-only", "not in a host directory", lambda o: nfd_mount(o).update(readOnly=True)),
        ("features.d mounted elsewhere", "not in a host directory", lambda o: nfd_mount(o).update(mountPath="/host/nfd")),
        ("nfdFeatureFile outside the mounted directory", "nfdFeatureFile",
         lambda o: agent_config_edit(o, {"nfdFeatureFile": "/var/lib/erdma-controller/erdma"})),
        ("nfdFeatureFile left off", "nfd: nfdFeatureFile", lambda o: agent_config_edit(o, {"nfdFeatureFile": ""})),
    ]


def rename_agent_config(objs, name):
    cm = agent_config_map(objs)
    del objs[("ConfigMap", NS, cm["metadata"]["name"])]
    cm["metadata"]["name"] = name
    objs[("ConfigMap", NS, name)] = cm
    volume(objs[("DaemonSet", NS, "erdma-agent")]["spec"]["template"]["spec"], "config")["configMap"]["name"] = name


def agent_config_edit(objs, changes, remove=()):
    cm = agent_config_map(objs)
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    cfg.update(changes)
    for key in remove:
        cfg.pop(key, None)
    cm["data"]["config.yaml"] = yaml.safe_dump(cfg)


def webhook_config_edit(objs, changes):
    cm = objs[("ConfigMap", NS, "erdma-webhook-config")]
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    for key, value in changes.items():
        if isinstance(value, dict):
            cfg.setdefault(key, {}).update(value)
        else:
            cfg[key] = value
    cm["data"]["config.yaml"] = yaml.safe_dump(cfg)


# --- real binaries -------------------------------------------------------------------------------

def binary_accepts(binary, cmd, config_text, workdir, label):
    path = os.path.join(workdir, label + ".yaml")
    with open(path, "w") as f:
        f.write(config_text)
    r = subprocess.run([binary, cmd, "--config", path], capture_output=True, text=True, timeout=60)
    expect(r.returncode == 0, "%s %s --config (%s) exited %d: %s" % (os.path.basename(binary), cmd, label,
                                                                    r.returncode, r.stderr))


def start_deployment_command_line(objs, workdir, certs_dir, certs_secret):
    """Runs the webhook container's command line on loopback, with each volume it mounts laid out
    from the rendered objects (the Secret from erdma-certs), and probes it as kubelet would."""
    pod = one(objs, "Deployment", "erdma-webhook")["spec"]["template"]["spec"]
    c = pod["containers"][0]
    expect(os.path.basename(c["command"][0]) == os.path.basename(WEBHOOK), c["command"])
    root = os.path.join(workdir, "pod-root")
    shutil.rmtree(root, ignore_errors=True)
    mapping = {}
    for m in c["volumeMounts"]:
        v = volume(pod, m["name"])
        target = os.path.join(root, m["name"])
        os.makedirs(target)
        if "secret" in v:
            files = {k: base64.b64decode(x) for k, x in certs_secret["data"].items()}
        else:
            files = {k: x.encode() for k, x in one(objs, "ConfigMap", v["configMap"]["name"])["data"].items()}
        for k, data in files.items():
            with open(os.path.join(target, k), "wb") as f:
                f.write(data)
        mapping[m["mountPath"].rstrip("/")] = target
    args = []
    for a in c["args"]:
        name, eq, value = a.partition("=")
        if name in ("--listen", "--metrics-listen"):
            value = "127.0.0.1:0"  # loopback only, any free port; the port numbers are checked elsewhere
        for mp, target in mapping.items():
            if value.startswith(mp + "/"):
                value = target + value[len(mp):]
        args.append(name + eq + value if eq else a)
    port_file = os.path.join(workdir, "ports.json")
    if os.path.exists(port_file):
        os.unlink(port_file)
    log_path = os.path.join(workdir, "deployment-command-line.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([WEBHOOK, *args, "--port-file", port_file], stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 15
        while not os.path.exists(port_file):
            if proc.poll() is not None:
                with open(log_path) as f:
                    raise AssertionError("the Deployment's command line exited %d: %s" % (proc.returncode, f.read()))
            expect(time.monotonic() < deadline, "no port file within 15 s")
            time.sleep(0.02)
        time.sleep(0.05)
        with open(port_file) as f:
            ports = json.load(f)
        ctx = ssl.create_default_context()  # kubelet does not verify probe certificates
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ready = c["readinessProbe"]["httpGet"]
        with urllib.request.urlopen("https://127.0.0.1:%d%s" % (ports["https"], ready["path"]), timeout=10,
                                    context=ctx) as r:
            expect(r.status == 200, "readiness probe %s" % r.status)
        live = c["livenessProbe"]["httpGet"]
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (ports["metrics"], live["path"]), timeout=10) as r:
            expect(r.status == 200, "liveness probe %s" % r.status)
        # the Secret's own CA bundle verifies the served certificate under the service name
        vctx = ssl.create_default_context(cadata=base64.b64decode(certs_secret["data"]["ca.crt"]).decode())
        import socket
        with socket.create_connection(("127.0.0.1", ports["https"]), timeout=10) as raw:
            with vctx.wrap_socket(raw, server_hostname="erdma-webhook.%s.svc" % NS):
                pass
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    expect(code == 0, "exit status %d after SIGTERM" % code)


def webhook_verdicts_agree(objs, workdir):
    """For the table of sample pods and every example workload, the real webhook (erdma-webhook
    mutate with the rendered config) and the rendered matchConditions agree: what it changes is
    sent, what it leaves alone is not (admission_match.check_agreement says the exceptions)."""
    text = one(objs, "ConfigMap", "erdma-webhook-config")["data"]["config.yaml"]
    conds = one(objs, "MutatingWebhookConfiguration", "erdma-webhook", ns="")["webhooks"][0]["matchConditions"]
    resource = (yaml.safe_load(text) or {}).get("resourceName", RESOURCE)
    problems, verdicts = admission_match.check_agreement(WEBHOOK, text, conds, SOURCE_DIR, workdir, resource)
    for name, did, sent in verdicts:
        print("    %-62s webhook %-8s %s" % (name[:62], did, "sent" if sent else "not sent"))
    expect(not problems, problems)
    return verdicts


def main():
    suite = Suite("manifests")
    w = suite.workdir
    found = kubectls()
    if not found:
        suite.skip("render every overlay", "no kubectl 1.%d or newer on PATH, and test/cluster/build-k8s.sh has not "
                   "built the pinned one" % MIN_KUBECTL_MINOR)
        suite.finish()
    version = project_version()
    renders = {}  # overlay -> objects, from the first kubectl
    for k in found:
        print("kubectl: %s (%s)" % (k, kubectl_version(k)))

    def render_all():
        for overlay in OVERLAYS:
            per = [render(k, overlay) for k in found]
            renders[overlay] = per[0]
            for k, other in zip(found[1:], per[1:]):
                expect(other == per[0], "manifests/%s renders differently with %s and %s: %s" % (
                    overlay, found[0], k, sorted(set(other) ^ set(per[0])) or "same names, other content"))
    suite.check("every overlay renders%s" % (" the same with each kubectl" if len(found) > 1 else ""), render_all)
    if len(renders) != len(OVERLAYS):
        suite.finish()

    certs_dir, certs_patch, certs_secret = certs_defaults(w)
    for overlay in OVERLAYS:
        if overlay in ("base", "admission-policy", "agent-only", "nccl-only"):  # no webhook: own checks below
            continue
        suite.check("manifests/%s: names, selectors, ports, probes, volumes, images, webhook, agent" % overlay,
                    lambda o=overlay: expect(not all_problems(o, renders[o], version, certs_patch, certs_secret),
                                             all_problems(o, renders[o], version, certs_patch, certs_secret)))

    def base_is_default_minus_nothing():
        expect(renders["base"] == renders["default"], "manifests/default adds nothing to the base")
        diff = [k for k in renders["default"] if renders["default"][k] != renders["fail-open"].get(k)]
        expect(diff == [("MutatingWebhookConfiguration", "", "erdma-webhook")], diff)
    suite.check("default = base; fail-open differs only in the webhook configuration", base_is_default_minus_nothing)

    def only_agent_config_differs(a, b, overlay):
        """Expects renders a and b to differ in the agent's ConfigMap and DaemonSet at most; returns
        their agent ConfigMaps."""
        a_cm, b_cm = agent_config_map(a), agent_config_map(b)
        skip = {("ConfigMap", NS, a_cm["metadata"]["name"]), ("ConfigMap", NS, b_cm["metadata"]["name"]),
                ("DaemonSet", NS, "erdma-agent")}
        diff = sorted(set(k for k in set(a) | set(b) if k not in skip and a.get(k) != b.get(k)))
        expect(not diff, "manifests/%s changes more than the agent's ConfigMap and DaemonSet: %s" % (overlay, diff))
        return a_cm, b_cm

    def agent_only_is_default_without_webhook():
        d, a = renders["default"], renders["agent-only"]
        webhook_objects = {k for k in d if k[2] in ("erdma-webhook", "erdma-webhook-config")}
        expect(len(webhook_objects) == 6, "the webhook's objects in manifests/default: %s" % sorted(webhook_objects))
        expect(set(a) == set(d) - webhook_objects, "manifests/agent-only renders %s" % sorted(set(a) ^ set(d)))
        diff = [k for k in a if a[k] != d[k]]
        expect(not diff, "manifests/agent-only changes %s" % diff)
    suite.check("agent-only = default without the webhook's six objects, the rest unchanged",
                agent_only_is_default_without_webhook)

    def nccl_only_is_agent_only_with_gpu_config():
        a, n = renders["agent-only"], renders["nccl-only"]
        a_cm, _ = only_agent_config_differs(a, n, "nccl-only")
        ds = copy.deepcopy(n[("DaemonSet", NS, "erdma-agent")])
        volume(ds["spec"]["template"]["spec"], "config")["configMap"]["name"] = a_cm["metadata"]["name"]
        expect(ds == a[("DaemonSet", NS, "erdma-agent")], "manifests/nccl-only changes the DaemonSet beyond its config")
        cfg, base_cfg = agent_config_of(n), agent_config_of(a)
        expect((cfg["driver"]["prefer"], cfg["smcr"]["enabled"]) == ("ofed", False),
               "nccl-only: driver.prefer %s, smcr.enabled %s; want ofed, False" % (cfg["driver"]["prefer"],
                                                                                 cfg["smcr"]["enabled"]))
        rest, want_rest = copy.deepcopy(cfg), copy.deepcopy(base_cfg)
        for c in (rest, want_rest):
            c["driver"].pop("prefer")
            c["smcr"].pop("enabled")
        expect(rest == want_rest, "manifests/nccl-only/agent-config.yaml differs from the base's in more than "
               "driver.prefer and smcr.enabled: keep it in step (%s)" %
               sorted(k for k in set(rest) | set(want_rest) if rest.get(k) != want_rest.get(k)))
        with open(os.path.join(SOURCE_DIR, "manifests/mixed-pools/gpu-pool/agent-config.yaml")) as f:
            expect(yaml.safe_load(f) == cfg, "manifests/nccl-only and the GPU pool of mixed-pools have other configs")
    suite.check("nccl-only = agent-only with the GPU pool's config (driver.prefer ofed, SMC-R off)",
                nccl_only_is_agent_only_with_gpu_config)

    def admission_policy_is_default_without_webhook():
        d, a = renders["agent-only"], renders["admission-policy"]
        expect(set(a) == set(d) | {("MutatingAdmissionPolicy", "", "erdma-smcr"),
                                   ("MutatingAdmissionPolicyBinding", "", "erdma-smcr")},
               "manifests/admission-policy renders %s" % sorted(set(a) ^ set(d)))
        diff = [k for k in set(a) & set(d) if a[k] != d[k]]
        expect(not diff, "manifests/admission-policy changes %s" % diff)
        selector = renders["default"][("MutatingWebhookConfiguration", "", "erdma-webhook")]["webhooks"][0][
            "namespaceSelector"]
        binding = a[("MutatingAdmissionPolicyBinding", "", "erdma-smcr")]["spec"]
        expect(binding["policyName"] == "erdma-smcr" and binding["matchResources"]["namespaceSelector"] == selector,
               "the binding acts in other namespaces than the webhook: %s" % binding)
        policy = a[("MutatingAdmissionPolicy", "", "erdma-smcr")]["spec"]
        expect(policy["failurePolicy"] == "Fail" and policy["reinvocationPolicy"] == "IfNeeded",
               "the policy's failurePolicy/reinvocationPolicy: %s/%s" % (policy["failurePolicy"],
                                                                     policy["reinvocationPolicy"]))
        expect(policy["matchConstraints"]["resourceRules"] == [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
            "the policy matches %s, not Pod CREATE alone" % policy["matchConstraints"]["resourceRules"])
    suite.check("admission-policy = agent-only plus the SMC-R policy and its binding for the webhook's namespaces",
                admission_policy_is_default_without_webhook)

    def nfd_is_default_plus_features_dir():
        d, n = renders["default"], renders["nfd"]
        d_cm, n_cm = only_agent_config_differs(d, n, "nfd")
        d_cfg, n_cfg = agent_config_of(d), agent_config_of(n)
        n_file, d_file = n_cfg.pop("nfdFeatureFile", ""), d_cfg.pop("nfdFeatureFile", "")
        expect(n_file and d_file == "", "nfdFeatureFile %r in nfd, %r in default" % (n_file, d_file))
        expect(n_cfg == d_cfg, "manifests/nfd/agent-config.yaml differs from manifests/base/agent-config.yaml in "
               "more than nfdFeatureFile: keep the copy in step (%s)" %
               sorted(k for k in set(n_cfg) | set(d_cfg) if n_cfg.get(k) != d_cfg.get(k)))
        expect(d_cm["metadata"]["name"] != n_cm["metadata"]["name"], "the merged config kept the base's name")
        ds = copy.deepcopy(n[("DaemonSet", NS, "erdma-agent")])
        pod = ds["spec"]["template"]["spec"]
        c = pod["containers"][0]
        c["volumeMounts"] = [m for m in c["volumeMounts"] if m["mountPath"] != NFD_FEATURES_DIR]
        pod["volumes"] = [v for v in pod["volumes"] if (v.get("hostPath") or {}).get("path") != NFD_FEATURES_DIR]
        volume(pod, "config")["configMap"]["name"] = d_cm["metadata"]["name"]
        expect(ds == d[("DaemonSet", NS, "erdma-agent")],
               "manifests/nfd changes the DaemonSet beyond the features.d volume and the config name")
    suite.check("nfd = default + features.d mount + nfdFeatureFile", nfd_is_default_plus_features_dir)

    def erdma_env_is_default_plus_env_and_condition():
        d, e = renders["default"], renders["erdma-env"]
        mwc = ("MutatingWebhookConfiguration", "", "erdma-webhook")
        wcm = ("ConfigMap", NS, "erdma-webhook-config")
        diff = sorted(k for k in set(d) | set(e) if d.get(k) != e.get(k))
        expect(diff == sorted([mwc, wcm]), "manifests/erdma-env changes %s, want only the webhook's config and "
               "its webhook configuration" % diff)
        d_cfg, e_cfg = webhook_config_of(d), webhook_config_of(e)
        expect(admission_match.injects_into_erdma_pods(e_cfg), "manifests/erdma-env sets no erdmaEnv or deviceMounts")
        expect(not admission_match.injects_into_erdma_pods(d_cfg), "manifests/default's webhook config injects into "
               "eRDMA pods: its matchConditions do not send them")
        for key in ("erdmaEnv", "deviceMounts"):
            d_cfg.pop(key, None)
            e_cfg.pop(key, None)
        expect(d_cfg == e_cfg, "manifests/erdma-env/webhook-config.yaml differs from manifests/base/webhook-config.yaml "
               "in more than erdmaEnv and deviceMounts: keep the copy in step (%s)" %
               sorted(k for k in set(d_cfg) | set(e_cfg) if d_cfg.get(k) != e_cfg.get(k)))
        dh, eh = copy.deepcopy(d[mwc]), copy.deepcopy(e[mwc])
        expect([c["name"] for c in dh["webhooks"][0]["matchConditions"]] == ["not-opted-out", "asks-for-smcr"] and
               [c["name"] for c in eh["webhooks"][0]["matchConditions"]] == ["not-opted-out", "asks-for-smcr-or-erdma"],
               "matchConditions names: default %s, erdma-env %s" % (dh["webhooks"][0]["matchConditions"],
                                                                    eh["webhooks"][0]["matchConditions"]))
        dh["webhooks"][0]["matchConditions"].pop(1)
        eh["webhooks"][0]["matchConditions"].pop(1)
        expect(dh == eh, "manifests/erdma-env changes the webhook configuration beyond its second matchCondition")
    suite.check("erdma-env = default + erdmaEnv + the matchCondition that sends eRDMA pods",
                erdma_env_is_default_plus_env_and_condition)

    def network_policy_is_default_plus_policy():
        d, n = renders["default"], renders["network-policy"]
        extra = sorted(set(n) - set(d))
        expect(extra == [("NetworkPolicy", NS, "erdma-webhook")], "manifests/network-policy adds %s" % extra)
        expect(all(n[k] == d[k] for k in d) and set(d) <= set(n), "manifests/network-policy changes default's objects")
        expect(not of_kind(d, "NetworkPolicy"), "manifests/default has a NetworkPolicy")
        cidrs = [peer["ipBlock"]["cidr"] for peer in n[extra[0]]["spec"]["ingress"][0]["from"]]
        expect(cidrs == [APISERVER_PLACEHOLDER], "the apiserver placeholder is %s, not the documented %s" %
               (cidrs, APISERVER_PLACEHOLDER))
        with open(os.path.join(SOURCE_DIR, "docs/hardening.md")) as f:
            doc = f.read()
        expect(APISERVER_PLACEHOLDER in doc and "manifests/network-policy" in doc,
               "docs/hardening.md does not tell to replace %s in manifests/network-policy" % APISERVER_PLACEHOLDER)
    suite.check("network-policy = default + a NetworkPolicy with the documented placeholder",
                network_policy_is_default_plus_policy)

    def reload_by_rollout(kubectl):
        """An edit of the agent config, rendered: a new ConfigMap name, mounted by the DaemonSet, whose
        pod template changes in that name alone; so `kubectl apply -k` rolls the DaemonSet."""
        root = os.path.join(w, "reload")
        shutil.rmtree(root, ignore_errors=True)
        try:
            shutil.copytree(os.path.join(SOURCE_DIR, "manifests"), os.path.join(root, "manifests"))
            before = render(kubectl, "default", root)
            expect(before == renders["default"], "the copy of manifests/ renders differently from the original")
            path = os.path.join(root, "manifests", "base", "agent-config.yaml")
            with open(path) as f:
                text = f.read()
            edited = re.sub(r"(?m)^slotsPerDevice: 64$", "slotsPerDevice: 32", text)
            expect(edited != text, "manifests/base/agent-config.yaml has no line 'slotsPerDevice: 64' to edit")
            with open(path, "w") as f:
                f.write(edited)
            after = render(kubectl, "default", root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        old_cm, new_cm = agent_config_map(before), agent_config_map(after)
        old_name, new_name = old_cm["metadata"]["name"], new_cm["metadata"]["name"]
        expect(yaml.safe_load(new_cm["data"]["config.yaml"]).get("slotsPerDevice") == 32,
               "the DaemonSet does not mount the edited config")
        expect(new_name != old_name, "the agent ConfigMap kept its name %s after an edit" % old_name)
        expect(AGENT_CONFIG_NAME.fullmatch(new_name), new_name)
        expect([c["metadata"]["name"] for c in agent_config_maps(after)] == [new_name], agent_config_maps(after))
        old_ds, new_ds = before[("DaemonSet", NS, "erdma-agent")], after[("DaemonSet", NS, "erdma-agent")]
        expect(volume(new_ds["spec"]["template"]["spec"], "config")["configMap"]["name"] == new_name,
               "the DaemonSet's config volume does not name %s" % new_name)
        expect(old_ds["spec"]["template"] != new_ds["spec"]["template"], "the pod template did not change")
        back = copy.deepcopy(new_ds)
        volume(back["spec"]["template"]["spec"], "config")["configMap"]["name"] = old_name
        expect(back == old_ds, "the DaemonSet changed in more than its config volume's ConfigMap name")
        expect((new_ds["spec"].get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate",
               "updateStrategy %s: a changed template does not roll the pods" % new_ds["spec"].get("updateStrategy"))
        changed = {("ConfigMap", NS, old_name), ("ConfigMap", NS, new_name), ("DaemonSet", NS, "erdma-agent")}
        others = sorted(k for k in set(before) | set(after) if k not in changed and before.get(k) != after.get(k))
        expect(not others, "an agent config edit changed other objects: %s" % others)
    for k in found:
        suite.check("an agent config edit renames its ConfigMap and rolls the DaemonSet (%s)" % k,
                    lambda k=k: reload_by_rollout(k))

    def broken_copies_are_caught():
        missed = []
        for overlay, label, want, breaker in ([("default",) + b for b in breakages()] +
                                              [("nfd",) + b for b in nfd_breakages()] +
                                              [("network-policy",) + b for b in network_policy_breakages()] +
                                              [("erdma-env",) + b for b in erdma_env_breakages()]):
            objs = copy.deepcopy(renders[overlay])
            breaker(objs)
            problems = all_problems(overlay, objs, version, certs_patch, certs_secret)
            if not any(want in p for p in problems):
                missed.append("%s (%s): no problem mentioning %r (got %s)" % (label, overlay, want, problems))
        expect(not missed, missed)
    suite.check("each deliberately broken copy is reported", broken_copies_are_caught)

    def mixed_pools():
        per = [render(k, "mixed-pools") for k in found]
        for k, other in zip(found[1:], per[1:]):
            expect(other == per[0], "manifests/mixed-pools renders differently with %s and %s" % (found[0], k))
        problems = check_mixed_pools(per[0], renders["default"])
        expect(not problems, problems)
        missed = uncaught_breakages(per[0], lambda o: check_mixed_pools(o, renders["default"]),
                                    mixed_pools_breakages())
        expect(not missed, missed)
        if os.access(AGENT, os.X_OK):
            binary_accepts(AGENT, "config", agent_config_map(one_pool(per[0], "erdma-agent-gpu"))["data"]["config.yaml"],
                           w, "agent-gpu-pool")
    suite.check("manifests/mixed-pools: a GPU (ofed) and an SMC-R (default) agent on disjoint nodes, distinct "
                "selectors (and broken copies caught)", mixed_pools)

    def cleanup():
        objs = render(found[0], "cleanup")
        problems = check_cleanup(objs, renders["default"])
        expect(not problems, problems)
        missed = uncaught_breakages(objs, lambda o: check_cleanup(o, renders["default"]), cleanup_breakages())
        expect(not missed, missed)
    suite.check("manifests/cleanup: `erdma-agent cleanup` from the agent image on the agent's nodes, with "
                "the installed config (and broken copies caught)", cleanup)

    def dra_is_default_plus_driver():
        d, r = renders["default"], renders["dra"]
        problems = dra_differences(d, r)
        expect(not problems, problems)
        missed = uncaught_breakages(
            r, lambda o: all_problems("dra", o, version, certs_patch, certs_secret) + dra_differences(d, o),
            dra_breakages(), show=True)
        expect(not missed, missed)
    suite.check("dra = default + dra.enabled, RBAC, token, NODE_NAME, the DRA directories, two DeviceClasses "
                "(and broken copies caught)", dra_is_default_plus_driver)

    def dra_examples_name_the_classes():
        examples = dra_examples()
        problems = check_dra_examples(examples, renders["dra"])
        expect(not problems, problems)
        missed = uncaught_breakages(examples, lambda o: check_dra_examples(o, renders["dra"]),
                                    dra_example_breakages())
        expect(not missed, missed)
    suite.check("examples/dra: each claim asks for a DeviceClass of manifests/dra, its constraints name its requests "
                "and a shareable attribute, each container uses its pod's claim (and broken copies caught)",
                dra_examples_name_the_classes)

    def cel_rejects_outside_subset():
        for bad in ("object.metadata.annotations.size() > 0", "has(object)", "a ||", "'x' in", "x == 'y"):
            try:
                cel.parse(bad)
            except cel.CelSyntaxError:
                continue
            raise AssertionError("the CEL checker accepted %r" % bad)
    suite.check("the CEL checker refuses what it does not understand", cel_rejects_outside_subset)

    have_webhook = os.access(WEBHOOK, os.X_OK)
    have_agent = os.access(AGENT, os.X_OK)
    if have_webhook:
        suite.check("webhook ConfigMap accepted by erdma-webhook config", lambda: binary_accepts(
            WEBHOOK, "config", one(renders["default"], "ConfigMap", "erdma-webhook-config")["data"]["config.yaml"], w,
            "webhook"))
        def verdicts(overlay, nccl_sent):
            got = {name: (did, sent) for name, did, sent in webhook_verdicts_agree(renders[overlay], w)}
            nccl = [v for n, v in got.items() if n.startswith("examples/nccl-statefulset.yaml")]
            smcr = [v for n, v in got.items() if n.startswith("examples/smcr-deployment.yaml")]
            expect(nccl and all(sent == nccl_sent for _, sent in nccl),
                   "manifests/%s: the NCCL example is %s, want %s" % (overlay, nccl, nccl_sent))
            expect(smcr and all(did == "injects" and sent for did, sent in smcr),
                   "manifests/%s: the SMC-R example is %s" % (overlay, smcr))
        suite.check("manifests/default: the webhook is sent exactly the pods it changes (not the NCCL example)",
                    lambda: verdicts("default", False))
        suite.check("manifests/erdma-env: the webhook is sent exactly the pods it changes (the NCCL example too)",
                    lambda: verdicts("erdma-env", True))
        suite.check("the Deployment's command line starts, answers its probes and drains",
                    lambda: start_deployment_command_line(renders["default"], w, certs_dir, certs_secret))
    else:
        suite.skip("webhook ConfigMap and command line", "%s is not built" % WEBHOOK)
    if have_agent:
        for overlay in ("default", "nfd", "dra"):
            suite.check("manifests/%s: agent ConfigMap accepted by erdma-agent config" % overlay,
                        lambda o=overlay: binary_accepts(
                            AGENT, "config", agent_config_map(renders[o])["data"]["config.yaml"], w, "agent-" + o))
    else:
        suite.skip("agent ConfigMap", "%s is not built" % AGENT)
    suite.finish()


if __name__ == "__main__":
    main()
