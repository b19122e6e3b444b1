"""Which pods kube-apiserver sends the webhook (the MutatingWebhookConfiguration's matchConditions)
against what the webhook does to them (the real `erdma-webhook mutate` with the shipped config).

Used by test/manifests (each kustomize overlay) and test/helm (the chart with several webhook
configs). For every pod of a table (hand-written edge cases plus the pod templates of examples/),
the webhook's answer is sorted into one of:
  injects   a patch beyond the warnings annotation;
  refuses   allowed: false;
  warns     a patch that only writes the warnings annotation;
  nothing   no patch, no warning.
and the CEL conditions are evaluated on the same pod by test/manifests/cel.py (a small evaluator
of the subset the conditions use; an expression outside it fails the test). The rules:
  - a pod the webhook injects into is sent (else it would start without what it asked for);
  - a pod the webhook does nothing to is not sent (else a webhook outage under failurePolicy Fail
    would refuse it for nothing), except the pods the table marks as known over-matches;
  - a pod the webhook only warns about or refuses may be left unsent only where the table says
    why (the apiserver refuses it anyway, or nothing could be injected).
What this proves: for the pods in the table, with the config the manifests ship, the conditions
and the webhook agree. It does not prove it for every pod: the table is the evidence.
"""

import base64
import json
import os
import subprocess

import yaml

import cel

SMCR = "network.alibabacloud.com/erdma-smcr"
OPT_OUT = "network.alibabacloud.com/erdma-inject"
WARNINGS = "network.alibabacloud.com/erdma-warnings"
WARNINGS_PATH = "/metadata/annotations/" + WARNINGS.replace("~", "~0").replace("/", "~1")


def _pod(name, annotations=None, containers=None, init=None, spec=None):
    meta = {"name": name, "namespace": "team-a"}
    if annotations is not None:
        meta["annotations"] = annotations
    s = {"containers": containers or [{"name": "app", "image": "registry.example/app:1"}]}
    if init is not None:
        s["initContainers"] = init
    s.update(spec or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": s}


def _ctr(name="app", limits=None, requests=None, env=None):
    c = {"name": name, "image": "registry.example/app:1"}
    res = {}
    if limits is not None:
        res["limits"] = limits
    if requests is not None:
        res["requests"] = requests
    if res:
        c["resources"] = res
    if env is not None:
        c["env"] = env
    return c


# Why a pod may be warned about and still not be sent.
APISERVER_REFUSES = "the apiserver refuses this pod itself"
NOTHING_TO_INJECT = "only a warning: the webhook injects nothing into this pod either way"
# Why a pod may be sent although the webhook does nothing to it.
ZERO_QUANTITY = "CEL sees the resource name, not its quantity: a container listing 0 is sent"


def sample_pods(resource):
    """(name, pod, {"may_skip_warning": why, "over_match": why}) for resource = the config's
    resourceName."""
    erdma = {resource: "1"}
    gpu = {"nvidia.com/gpu": "1"}
    return [
        ("plain pod", _pod("plain"), {}),
        ("other annotations only", _pod("other", {"team": "a"}), {}),
        ("SMC-R annotation true", _pod("smcr", {SMCR: "true"}), {}),
        ("SMC-R annotation True (the webhook warns)", _pod("smcr-typo", {SMCR: "True"}), {}),
        ("SMC-R annotation false", _pod("smcr-off", {SMCR: "false"}), {}),
        ("SMC-R, two containers, one asks for eRDMA",
         _pod("smcr-mixed", {SMCR: "true"}, [_ctr("a", limits=erdma), _ctr("b")]), {}),
        ("SMC-R with an init container", _pod("smcr-init", {SMCR: "true"}, init=[_ctr("init")]), {}),
        ("SMC-R on Windows", _pod("smcr-win", {SMCR: "true"}, spec={"os": {"name": "windows"}}), {}),
        ("eRDMA in limits (NCCL)", _pod("nccl", containers=[_ctr(limits=erdma)]), {}),
        ("eRDMA in limits and requests", _pod("nccl-both", containers=[_ctr(limits=erdma, requests=erdma)]), {}),
        ("eRDMA with its own NCCL env",
         _pod("nccl-env", containers=[_ctr(limits=erdma, env=[{"name": "NCCL_DEBUG", "value": "WARN"}])]), {}),
        ("eRDMA in requests only", _pod("nccl-req", containers=[_ctr(requests=erdma)]),
         {"may_skip_warning": APISERVER_REFUSES}),
        ("eRDMA in an init container", _pod("nccl-init", init=[_ctr("init", limits=erdma)], containers=[_ctr(limits=gpu)]),
         {}),
        ("eRDMA in the second container", _pod("nccl-second", containers=[_ctr(limits=gpu), _ctr("b", limits=erdma)]), {}),
        ("eRDMA quantity 0", _pod("nccl-zero", containers=[_ctr(limits={resource: "0"})]), {"over_match": ZERO_QUANTITY}),
        ("eRDMA on Windows", _pod("nccl-win", containers=[_ctr(limits=erdma)], spec={"os": {"name": "windows"}}),
         {"may_skip_warning": NOTHING_TO_INJECT}),
        ("eRDMA, inject annotation misspelt", _pod("nccl-inject", {OPT_OUT: "False"}, [_ctr(limits=erdma)]),
         {"may_skip_warning": NOTHING_TO_INJECT}),
        ("eRDMA, container name not a DNS label", _pod("nccl-name", containers=[_ctr("App", limits=erdma)]),
         {"may_skip_warning": APISERVER_REFUSES}),
        ("other resources only", _pod("gpu", containers=[_ctr(limits=gpu)], init=[]), {}),
        ("empty resources", _pod("empty", containers=[{"name": "a", "image": "x:1", "resources": {}}]), {}),
        ("opted out, with SMC-R", _pod("out-smcr", {SMCR: "true", OPT_OUT: "false"}), {}),
        ("opted out, with eRDMA", _pod("out-nccl", {OPT_OUT: "false"}, [_ctr(limits=erdma)]), {}),
        ("opt-out misspelt False, with SMC-R", _pod("out-typo", {SMCR: "true", OPT_OUT: "False"}), {}),
    ]


def example_pods(source_dir):
    """(name, pod) for every workload in examples/*.yaml and examples/dra/*.yaml (DRA pods ask
    for nothing the webhook serves: it must not be sent them): a Pod as it is, a Deployment's or
    StatefulSet's pod template as its controller would create it."""
    out = []
    d = os.path.join(source_dir, "examples")
    names = sorted(f for f in os.listdir(d) if f.endswith(".yaml"))
    if os.path.isdir(os.path.join(d, "dra")):
        names += sorted("dra/" + f for f in os.listdir(os.path.join(d, "dra")) if f.endswith(".yaml"))
    for fname in names:
        with open(os.path.join(d, fname)) as f:
            for doc in yaml.safe_load_all(f):
                if not doc:
                    continue
                if doc.get("kind") == "Pod":
                    pod = doc
                elif doc.get("kind") in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
                    t = doc["spec"]["template"]
                    meta = dict(t.get("metadata") or {})
                    meta.setdefault("generateName", doc["metadata"]["name"] + "-")
                    meta.setdefault("namespace", doc["metadata"].get("namespace", "default"))
                    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": t["spec"]}
                else:
                    continue
                out.append(("examples/%s %s %s" % (fname, doc["kind"], doc["metadata"]["name"]), pod))
    return out


def evaluate(conds, pod):
    """True when every condition is true: the apiserver then calls the webhook."""
    env = {"object": pod, "oldObject": None, "request": {"operation": "CREATE"}}
    return all(cel.evaluate(cel.parse(c["expression"]), env) is True for c in conds)


def classify(webhook, config_path, pod, workdir):
    """What the real webhook does to `pod` with the config file: injects, refuses, warns or nothing."""
    path = os.path.join(workdir, "admission-pod.json")
    with open(path, "w") as f:
        json.dump(pod, f)
    ns = pod["metadata"].get("namespace", "team-a")
    r = subprocess.run([webhook, "mutate", "-f", path, "-o", "review", "-n", ns, "--config", config_path],
                       capture_output=True, text=True, timeout=60)
    os.unlink(path)
    if r.returncode not in (0, 1):
        raise AssertionError("erdma-webhook mutate exited %d: %s" % (r.returncode, r.stderr))
    resp = json.loads(r.stdout)["response"]
    if not resp.get("allowed", True):
        return "refuses"
    patch = json.loads(base64.b64decode(resp["patch"])) if resp.get("patch") else []
    for op in patch:
        if op["path"] == WARNINGS_PATH:
            continue
        if op["path"] == "/metadata/annotations" and set(op.get("value") or {}) <= {WARNINGS}:
            continue
        return "injects"
    return "warns" if patch or resp.get("warnings") else "nothing"


def check_agreement(webhook, config_text, conds, source_dir, workdir, resource):
    """Problems between the conditions and the webhook with config_text, over the table and the
    examples; also returns the per-pod verdicts, for the report."""
    cfg_path = os.path.join(workdir, "admission-config.yaml")
    with open(cfg_path, "w") as f:
        f.write(config_text)
    problems, verdicts = [], []
    cases = sample_pods(resource) + [(n, p, {}) for n, p in example_pods(source_dir)]
    for name, pod, flags in cases:
        try:
            sent = evaluate(conds, pod)
        except cel.CelEvalError as e:
            problems.append("%s: matchConditions evaluation error %s" % (name, e))
            continue
        did = classify(webhook, cfg_path, pod, workdir)
        verdicts.append((name, did, sent))
        if did == "injects" and not sent:
            problems.append("%s: the webhook would change it, but the matchConditions keep it from the webhook" % name)
        elif did == "nothing" and sent and not flags.get("over_match"):
            problems.append("%s: the matchConditions send it, but the webhook changes nothing: with failurePolicy "
                            "Fail a webhook outage would refuse it for nothing" % name)
        elif did in ("warns", "refuses") and not sent and not flags.get("may_skip_warning"):
            problems.append("%s: the webhook %s it, but the matchConditions keep it from the webhook" %
                            (name, "would warn about" if did == "warns" else "would refuse"))
    os.unlink(cfg_path)
    return problems, verdicts


def injects_into_erdma_pods(config):
    """Whether the webhook config gives pods that ask for the resource anything: erdmaEnv or
    deviceMounts non-empty."""
    return bool((config or {}).get("erdmaEnv")) or bool((config or {}).get("deviceMounts"))


def check_structure(conds, config):
    """The conditions' shape for the config, without a webhook binary: they test the opt-out and the
    SMC-R annotation always, and the config's resourceName exactly when the config injects into eRDMA
    pods."""
    p = []
    refs = set()
    for c in conds:
        try:
            refs |= cel.references(cel.parse(c["expression"]))
        except cel.CelSyntaxError as e:
            p.append("matchCondition %s: %s" % (c.get("name"), e))
    if p:
        return p
    resource = (config or {}).get("resourceName", "aliyun/erdma")
    for want in ("object.metadata.annotations", "'%s'" % SMCR, "'%s'" % OPT_OUT):
        if want not in refs:
            p.append("matchConditions never mention %s" % want)
    tests_resource = "'%s'" % resource in refs
    if injects_into_erdma_pods(config) and not tests_resource:
        p.append("the webhook config sets erdmaEnv or deviceMounts, but the matchConditions do not send pods asking "
                 "for %s: they would start without it (manifests/erdma-env)" % resource)
    if not injects_into_erdma_pods(config) and tests_resource:
        p.append("the matchConditions send pods asking for %s, but the webhook config has no erdmaEnv or "
                 "deviceMounts to give them: a webhook outage would refuse NCCL pods for nothing" % resource)
    names = [c.get("name") for c in conds]
    want_name = "asks-for-smcr-or-erdma" if injects_into_erdma_pods(config) else "asks-for-smcr"
    if want_name not in names:
        p.append("matchConditions %s lack %s (the name docs/admission.md uses for this config)" % (names, want_name))
    return p


def intended(pod, config):
    """The rule docs/admission.md states, written independently of the CEL: not opted out, and the
    SMC-R annotation with any value but "false", or (erdmaEnv/deviceMounts set) a container or init
    container listing the resource."""
    ann = pod["metadata"].get("annotations") or {}
    if ann.get(OPT_OUT) == "false":
        return False
    if SMCR in ann and ann[SMCR] != "false":
        return True
    if not injects_into_erdma_pods(config):
        return False
    resource = (config or {}).get("resourceName", "aliyun/erdma")
    for c in (pod["spec"].get("containers") or []) + (pod["spec"].get("initContainers") or []):
        res = c.get("resources") or {}
        if resource in (res.get("limits") or {}) or resource in (res.get("requests") or {}):
            return True
    return False


def check_intended(conds, config):
    """The conditions evaluated on the table give the documented rule (no binary needed)."""
    p = []
    for name, pod, _ in sample_pods((config or {}).get("resourceName", "aliyun/erdma")):
        try:
            got = evaluate(conds, pod)
        except cel.CelSyntaxError:
            return p  # check_structure reports it
        except cel.CelEvalError as e:
            p.append("matchConditions on %s: evaluation error %s" % (name, e))
            continue
        want = intended(pod, config)
        if got != want:
            p.append("matchConditions on %s: %s, want %s" % (name, "sent" if got else "not sent",
                                                              "sent" if want else "not sent"))
    return p
