#!/usr/bin/env python3
"""The SMC-R MutatingAdmissionPolicy (manifests/admission-policy) against erdma-webhook, on a real
kube-apiserver: every golden pod of the webhook's default configuration (test/webhook/testdata)
goes through both as a server-side dry-run create, and the two pods that come back are compared
field by field. Each case must differ in exactly the fields DIFFERENCES lists for it (docs/
admission.md, "Admission without a webhook"), no more and no fewer, so a change on either side
that makes them drift apart, or brings them together, fails here until the list and the docs say so.

    admission_policy.py --src SRC --webhook BUILD/webhook/erdma-webhook --work DIR

Needs a cluster from scripts/cluster.sh (KUBECONFIG set, its kubectl first on PATH). Starts
erdma-webhook in the cluster's node sandbox, on its 127.0.0.1 (kube-apiserver's), with a
certificate from certs/erdma-certs and registers it for one
namespace, through the MutatingWebhookConfiguration of manifests/base with only its clientConfig
and namespaceSelector changed; applies the overlay's policy and binding as shipped, for another
namespace. Removes what it created and stops the webhook. Standard library only: any python3.
"""
import argparse
import base64
import collections
import contextlib
import copy
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

POLICY_NS = "erdma-compare-policy"
WEBHOOK_NS = "erdma-compare-webhook"
WEBHOOK_LABEL = "erdma-compare-webhook"
WEBHOOK_CONFIG_NAME = "erdma-compare-webhook"
WARNINGS = "metadata.annotations.network.alibabacloud.com/erdma-warnings"
INJECTED = "network.alibabacloud.com/erdma-injected"

# Cases not sent, with why: their outcome depends on the namespace, which the test chooses.
NOT_SENT = {
    "excluded-namespace": "a pod in kube-system: both selectors leave kube-system out "
                          "(kubernetes.io/metadata.name NotIn), checked by test/manifests",
}

# Case -> the fields where the two results must differ. The webhook writes its warnings into the
# pod (network.alibabacloud.com/erdma-warnings); a policy can give none. Nothing else may differ.
WARNINGS_ONLY = {WARNINGS}
DIFFERENCES = {
    "annotation-value-True": WARNINGS_ONLY,
    "smcr-basic": WARNINGS_ONLY,
    "smcr-erdma-container-keeps-erdma": WARNINGS_ONLY,
    "smcr-existing-ld-preload": WARNINGS_ONLY,
    "smcr-existing-volumes-and-mounts": WARNINGS_ONLY,
    "smcr-host-network": WARNINGS_ONLY,
    "smcr-init-container-first": WARNINGS_ONLY,
    "smcr-ld-preload-already-ours": WARNINGS_ONLY,
    "smcr-ld-preload-duplicates": WARNINGS_ONLY,
    "smcr-ld-preload-empty": WARNINGS_ONLY,
    "smcr-ld-preload-other-copy": WARNINGS_ONLY,
    "smcr-ld-preload-value-from": WARNINGS_ONLY,
    "smcr-ld-preload-value-from-partial": WARNINGS_ONLY,
    "smcr-mount-path-conflict": WARNINGS_ONLY,
    "smcr-no-metadata-annotations": WARNINGS_ONLY,
    "smcr-several-containers": WARNINGS_ONLY,
    "smcr-sidecar-init-container": WARNINGS_ONLY,
    "smcr-volume-conflict": WARNINGS_ONLY,
    "smcr-zero-resource": WARNINGS_ONLY,
    "smcr-zero-smcr-resource": WARNINGS_ONLY,
    "warnings-annotation-long-value": WARNINGS_ONLY,
    "windows-node-selector-skipped": WARNINGS_ONLY,
    "windows-pod-skipped": WARNINGS_ONLY,
}

# Fields the apiserver sets per object; not part of what admission wrote.
VOLATILE = ("metadata.uid", "metadata.creationTimestamp", "metadata.namespace", "metadata.managedFields",
            "metadata.resourceVersion", "metadata.generation")

passed = failed = 0


def log(msg):
    print(msg, flush=True)


def check(name, fn):
    global passed, failed
    t0 = time.monotonic()
    try:
        fn()
    except AssertionError as e:
        failed += 1
        log("FAIL %s (%.1f s)\n  %s" % (name, time.monotonic() - t0, str(e).replace("\n", "\n  ")))
        return
    passed += 1
    log("ok   %s (%.1f s)" % (name, time.monotonic() - t0))


def kubectl(*args, stdin=None, ok=True):
    r = subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True, timeout=120)
    if ok and r.returncode != 0:
        raise AssertionError("kubectl %s exited %d: %s" % (" ".join(args), r.returncode, r.stderr.strip()))
    return r


def objects_of(yaml_text):
    """The objects of a YAML stream, as JSON, converted by kubectl (no YAML parser here)."""
    out = kubectl("create", "--dry-run=client", "-o", "json", "-f", "-", stdin=yaml_text).stdout
    objects, decoder, at = [], json.JSONDecoder(), 0
    while True:
        while at < len(out) and out[at].isspace():
            at += 1
        if at == len(out):
            return objects
        doc, at = decoder.raw_decode(out, at)
        objects += doc["items"] if doc.get("kind") == "List" else [doc]


def rendered(src, overlay):
    return objects_of(kubectl("kustomize", os.path.join(src, "manifests", overlay)).stdout)


def dry_run(pod, ns):
    """('ok', pod) or ('refused', message) for a server-side dry-run create of `pod` in `ns`."""
    pod = copy.deepcopy(pod)
    pod.setdefault("metadata", {})["namespace"] = ns
    r = kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(pod), ok=False)
    if r.returncode != 0:
        return "refused", r.stderr.strip()
    return "ok", json.loads(r.stdout)


def flatten(value, prefix, out):
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(v, prefix + "." + k if prefix else k, out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            flatten(v, "%s[%d]" % (prefix, i), out)
    else:
        out[prefix] = value
    return out


def comparable(pod):
    """pod's fields without those the apiserver sets per object; the service account token's
    projected volume (added by the ServiceAccount admission plugin) loses its random suffix."""
    f = flatten(pod, "", {})
    for k in [k for k in f if k.startswith(VOLATILE)]:
        del f[k]
    for k, v in f.items():
        if isinstance(v, str) and re.fullmatch(r"kube-api-access-[a-z0-9]{5}", v):
            f[k] = "kube-api-access"
    return f


def differing_fields(a, b):
    fa, fb = comparable(a), comparable(b)
    return {k for k in set(fa) | set(fb) if fa.get(k) != fb.get(k)}


def wait_for(what, fn, seconds=120):
    """Polls fn() until it returns a true value; fails naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("waited %d s for %s" % (seconds, what))
        time.sleep(0.2)


def golden_cases(src):
    out = {}
    for d in sorted(glob.glob(os.path.join(src, "test/webhook/testdata/*/"))):
        name = os.path.basename(d.rstrip("/"))
        files = os.listdir(d)
        if "pod.json" not in files or any(f.startswith("config.") for f in files):
            continue  # whole AdmissionReviews (other operations) and other configurations
        with open(os.path.join(d, "pod.json"), encoding="utf-8") as f:
            out[name] = json.load(f)
    return out


def sandbox(args, script, timeout=60):
    """Runs the shell `script` in the node sandbox, where kube-apiserver runs and 127.0.0.1 is its."""
    # stderr goes to a file: a process started in the background would keep a pipe open.
    with tempfile.TemporaryFile("w+", encoding="utf-8") as err:
        r = subprocess.run([os.path.join(args.src, "scripts/cluster.sh"), "exec", "sh", "-c", script],
                           stdout=subprocess.PIPE, stderr=err, text=True, timeout=timeout)
        if r.returncode != 0:
            err.seek(0)
            raise AssertionError("in the node sandbox, %r exited %d: %s" % (script, r.returncode, err.read().strip()))
    return r.stdout


def start_webhook(args, pki):
    """erdma-webhook in the node sandbox, on 127.0.0.1, with the base's config: (pid, log, port, base)."""
    subprocess.run([os.path.join(args.src, "certs/erdma-certs"), "generate", "--dir", pki, "--san", "127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    base = rendered(args.src, "base")
    cm = next(o for o in base if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "erdma-webhook-config")
    config = os.path.join(args.work, "webhook-config.yaml")
    with open(config, "w", encoding="utf-8") as f:
        f.write(cm["data"]["config.yaml"])
    log_path = os.path.join(args.work, "webhook.log")
    pid = int(sandbox(args, "%s serve --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --tls-cert %s "
                            "--tls-key %s --config %s > %s 2>&1 & echo $!" % (
                                args.webhook, os.path.join(pki, "tls.crt"), os.path.join(pki, "tls.key"), config,
                                log_path)).strip())

    def port():
        text = open(log_path, encoding="utf-8").read() if os.path.exists(log_path) else ""
        if '"level":"error"' in text:
            raise AssertionError("erdma-webhook failed to start: %s" % text)
        m = re.search(r'"msg":"serving".*?"port":(\d+)', text)
        return m and int(m.group(1))
    return pid, log_path, wait_for("erdma-webhook to log that it serves", port, 30), base


def stop_webhook(args, pid):
    """SIGTERM, then waits (at most 30 s) until the process is gone; it drains and exits 0."""
    sandbox(args, "kill %d; n=0; while kill -0 %d 2>/dev/null; do n=$((n + 1)); [ $n -lt 300 ] || exit 1; "
                  "sleep 0.1; done" % (pid, pid), timeout=60)


@contextlib.contextmanager
def both_paths(args, probe):
    """The two admission paths, each for its namespace: erdma-webhook (in the node sandbox, through
    the MutatingWebhookConfiguration of manifests/base) for WEBHOOK_NS, the overlay's policy and
    binding as shipped for POLICY_NS; ready once each mutates `probe`. Removes all of it after."""
    pid, log_path, port, base = start_webhook(args, os.path.join(args.work, "pki"))
    created = []
    try:
        for ns, labels in ((POLICY_NS, {"erdma-injection": "enabled"}), (WEBHOOK_NS, {WEBHOOK_LABEL: "enabled"})):
            kubectl("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": ns, "labels": labels}}))
            created.append(("namespace", ns))
        mwc = copy.deepcopy(next(o for o in base if o["kind"] == "MutatingWebhookConfiguration"))
        mwc["metadata"]["name"] = WEBHOOK_CONFIG_NAME
        with open(os.path.join(args.work, "pki", "ca-bundle.crt"), "rb") as f:
            ca = base64.b64encode(f.read()).decode()
        for w in mwc["webhooks"]:
            w["clientConfig"] = {"url": "https://127.0.0.1:%d/mutate-pods" % port, "caBundle": ca}
            w["namespaceSelector"] = {"matchLabels": {WEBHOOK_LABEL: "enabled"}}
        kubectl("create", "-f", "-", stdin=json.dumps(mwc))
        created.append(("mutatingwebhookconfiguration", WEBHOOK_CONFIG_NAME))
        shipped = [o for o in rendered(args.src, "admission-policy")
                   if o["kind"] in ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")]
        if sorted(o["kind"] for o in shipped) != ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"]:
            raise SystemExit("manifests/admission-policy renders %s" % sorted(o["kind"] for o in shipped))
        for o in shipped:
            kubectl("create", "-f", "-", stdin=json.dumps(o))
            created.append((o["kind"].lower(), o["metadata"]["name"]))
        # Both take effect asynchronously: wait until each mutates the probe.
        for ns in (POLICY_NS, WEBHOOK_NS):
            wait_for("a pod in %s to come back mutated" % ns,
                     lambda ns=ns: (lambda r: r[0] == "ok" and INJECTED in r[1]["metadata"].get("annotations", {}))(
                         dry_run(probe, ns)))
        yield
    finally:
        for kind, name in reversed(created):
            kubectl("delete", kind, name, "--wait=true", "--timeout=120s", ok=False)
        stop_webhook(args, pid)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", required=True)
    p.add_argument("--webhook", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    cases = golden_cases(args.src)
    if len(cases) < 40:
        raise SystemExit("only %d golden cases of the default configuration under %s/test/webhook/testdata" %
                         (len(cases), args.src))
    unknown = sorted((set(DIFFERENCES) | set(NOT_SENT)) - set(cases))
    if unknown:
        raise SystemExit("DIFFERENCES or NOT_SENT name cases that do not exist: %s" % unknown)

    with both_paths(args, cases["smcr-basic"]):
        outcomes, refused = collections.Counter(), []
        for name in sorted(cases):
            if name in NOT_SENT:
                log("--   %s: not sent (%s)" % (name, NOT_SENT[name]))
                continue

            def compare(name=name):
                hook, policy = dry_run(cases[name], WEBHOOK_NS), dry_run(cases[name], POLICY_NS)
                if hook[0] != policy[0]:
                    raise AssertionError("webhook: %s; policy: %s\nwebhook said: %s\npolicy said: %s" % (
                        hook[0], policy[0], hook[1] if hook[0] == "refused" else "(a pod)",
                        policy[1] if policy[0] == "refused" else "(a pod)"))
                if hook[0] == "refused":
                    outcomes["refused by both"] += 1
                    refused.append(name)
                    return
                got, want = differing_fields(hook[1], policy[1]), DIFFERENCES.get(name, set())
                outcomes["identical" if not got else "differ in " + ", ".join(sorted(got))] += 1
                if got != want:
                    fh, fp = comparable(hook[1]), comparable(policy[1])
                    raise AssertionError("differ in %s, expected %s:\n%s" % (
                        sorted(got)[:10], sorted(want),
                        "\n".join("%s: webhook %r, policy %r" % (k, fh.get(k), fp.get(k))
                                  for k in sorted(got ^ want)[:10])))
            check("%s: policy and webhook agree%s" % (name, "" if name not in DIFFERENCES else " but for warnings"),
                  compare)

        log("cases: %s\nrefused by both: %s" % ("; ".join("%d %s" % (n, what) for what, n in sorted(outcomes.items())),
                                                  ", ".join(refused)))

        def second_pass():
            # A pod the policy mutated, created again (as from its YAML), comes back unchanged.
            for name in ("smcr-several-containers", "smcr-existing-ld-preload", "smcr-zero-resource"):
                first = dry_run(cases[name], POLICY_NS)
                assert first[0] == "ok", "%s: %s" % (name, first[1])
                again = dry_run(first[1], POLICY_NS)
                assert again[0] == "ok", "%s, second pass: %s" % (name, again[1])
                diff = differing_fields(first[1], again[1])
                assert not diff, "%s: the second pass changed %s" % (name, sorted(diff))
        check("a pod the policy mutated passes through it again unchanged", second_pass)

        def large_pod():
            # 256 containers of 32 env entries each, every one with its own LD_PRELOAD: within the
            # CEL cost limits (docs/admission.md gives where they bite), and the same as the webhook.
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "large", "annotations": {"network.alibabacloud.com/erdma-smcr": "true"}},
                   "spec": {"containers": [
                       {"name": "c%d" % i, "image": "registry.example.com/app:1",
                        "env": [{"name": "E%d" % j, "value": "v"} for j in range(31)] +
                               [{"name": "LD_PRELOAD", "value": "/usr/lib/libjemalloc.so.2"}]}
                       for i in range(256)]}}
            hook, policy = dry_run(pod, WEBHOOK_NS), dry_run(pod, POLICY_NS)
            assert hook[0] == "ok" and policy[0] == "ok", "webhook: %s; policy: %s" % (
                hook[1] if hook[0] != "ok" else "ok", policy[1][-400:] if policy[0] != "ok" else "ok")
            diff = differing_fields(hook[1], policy[1])
            assert diff == WARNINGS_ONLY, "differ in %s" % sorted(diff)[:10]
            done = sum(1 for c in policy[1]["spec"]["containers"]
                       if c["env"][-1]["value"] == "/usr/lib/libjemalloc.so.2:/usr/lib/smc/libsmc-preload.so")
            assert done == 256, "%d of 256 containers preload the library" % done
        check("a pod of 256 containers with 32 env entries each: within the CEL cost limits, same as the webhook",
              large_pod)
    log("admission-policy: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
