#!/usr/bin/python3
"""Host-side preparation for test/vm/two-nodes.sh (Debian's /usr/bin/python3 with python3-yaml).

  prepare.py --src CHECKOUT --build BUILD --out DIR

Writes into DIR what the nodes read through the 9p root:
  rendered.yaml      `kubectl kustomize manifests/default`, what a cluster would get
  agent-config.yaml  the agent's config.yaml from the rendered ConfigMap the DaemonSet mounts
                     (erdma-agent-config-<hash>), for the test nodes:
                     verbs discovery of driver rxe; pnetId/UEID as shipped (the same on both nodes);
                     net.smc.wmem/rmem 262144 for SMC-R pods, so their setup can be read back
  nccl.yaml          the pod of examples/nccl-statefulset.yaml after `erdma-webhook mutate -o pod`
                     (the pod the apiserver would store), image replaced by the workload image and
                     the command by a long sleep; the GPU limit and the envFrom ConfigMap are
                     dropped, a node has neither
  nccl.expected.json the NCCL settings the merged spec gives the container (name -> value)
  smcr-*.yaml        pods from examples/smcr-deployment.yaml's template: one container running
                     tcp-bulk from the workload image, with or without the SMC-R annotation,
                     hostNetwork or the pod network, each after `erdma-webhook mutate -o pod`
Prints one line per file.
"""
import argparse
import copy
import json
import os
import subprocess
import sys

import yaml

WORKLOAD = "localhost/erdma-controller/workload:1"
SMCR_ANNOTATION = "network.alibabacloud.com/erdma-smcr"
RESOURCE = "aliyun/erdma"
SMCR_RESOURCE = "aliyun/erdma-smcr"  # what the webhook gives SMC-R containers: the library, no device


def die(msg):
    print("prepare: " + msg, file=sys.stderr)
    sys.exit(1)


def sh(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)
    if r.returncode != 0:
        die("%s failed (exit %d): %s" % (" ".join(argv), r.returncode, r.stderr.strip()[-2000:]))
    return r


def mutate(webhook, pod, out):
    """Runs erdma-webhook mutate -o pod over POD, writes the result to OUT, returns it."""
    r = sh([webhook, "mutate", "-f", "-", "-o", "pod"], input=yaml.safe_dump(pod))
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    if len(docs) != 1 or docs[0].get("kind") != "Pod":
        die("erdma-webhook mutate -o pod gave %d documents, want one Pod" % len(docs))
    with open(out, "w") as f:
        yaml.safe_dump(docs[0], f, sort_keys=False)
    for line in r.stderr.strip().splitlines():
        print("    webhook: " + line)
    return docs[0]


def check_library_delivery(name, pod):
    """The library comes in the agent's Allocate answer: no hostPath in the spec (Pod Security
    baseline forbids it), and LD_PRELOAD exactly where the container holds aliyun/erdma or
    aliyun/erdma-smcr."""
    spec = pod["spec"]
    for v in spec.get("volumes") or []:
        if "hostPath" in v:
            die("%s: the mutated pod has hostPath volume %s" % (name, v.get("name")))
    for c in (spec.get("initContainers") or []) + spec["containers"]:
        preload = any(e.get("name") == "LD_PRELOAD" for e in c.get("env") or [])
        limits = (c.get("resources") or {}).get("limits", {})
        holds = any(str(limits.get(r, "0")) not in ("0", "") for r in (RESOURCE, SMCR_RESOURCE))
        if preload and not holds:
            die("%s: container %s gets LD_PRELOAD without %s or %s (no library mount)"
                % (name, c["name"], RESOURCE, SMCR_RESOURCE))
        if any(m.get("mountPath") == "/usr/lib/smc" for m in c.get("volumeMounts") or []):
            die("%s: container %s mounts a volume at /usr/lib/smc" % (name, c["name"]))


def template_pod(doc, name, namespace):
    t = doc["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": dict(t.get("metadata", {}).get("labels", {})),
                         "annotations": dict(t.get("metadata", {}).get("annotations", {}))},
            "spec": copy.deepcopy(t["spec"])}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--src", required=True)
    p.add_argument("--build", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    webhook = os.path.join(a.build, "webhook", "erdma-webhook")

    rendered = sh(["kubectl", "kustomize", os.path.join(a.src, "manifests", "default")]).stdout
    with open(os.path.join(a.out, "rendered.yaml"), "w") as f:
        f.write(rendered)
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    kinds = sorted("%s/%s" % (d["kind"], d["metadata"]["name"]) for d in docs)
    print("rendered.yaml: %d objects (%s)" % (len(docs), ", ".join(kinds)))
    # The agent's ConfigMap is generated (erdma-agent-config-<content hash>): the one the
    # DaemonSet's config volume names.
    ds = [d for d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"] == "erdma-agent"]
    vols = ds[0]["spec"]["template"]["spec"].get("volumes", []) if ds else []
    cm_name = next((v["configMap"]["name"] for v in vols if v.get("name") == "config" and "configMap" in v), None)
    cms = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == cm_name and
           cm_name.startswith("erdma-agent-config-")]
    if not cms:
        die("manifests/default renders no ConfigMap erdma-agent-config-<hash> mounted by DaemonSet erdma-agent "
            "(config volume names %r)" % cm_name)
    cfg = yaml.safe_load(cms[0]["data"]["config.yaml"])
    cfg.setdefault("devices", {})["drivers"] = ["rxe"]
    cfg["devices"]["source"] = "verbs"
    # Values that differ from the kernel's defaults, so a pod's netns shows they were written.
    cfg.setdefault("smcr", {})["sysctls"] = {"net.smc.wmem": 262144, "net.smc.rmem": 262144}
    with open(os.path.join(a.out, "agent-config.yaml"), "w") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    print("agent-config.yaml: drivers %s, pnetId %s, ueid %s" % (
        cfg["devices"]["drivers"], cfg.get("smcr", {}).get("pnetId"), cfg.get("smcr", {}).get("ueid")))

    # The NCCL journey: the StatefulSet's pod, mutated; then what a test node can run.
    with open(os.path.join(a.src, "examples", "nccl-statefulset.yaml")) as f:
        sts = yaml.safe_load(f)
    pod = template_pod(sts, "nccl-allreduce-0", sts["metadata"]["namespace"])
    c = pod["spec"]["containers"][0]
    c.pop("envFrom", None)                       # the ConfigMap lives in a cluster, not here
    c["resources"]["limits"].pop("nvidia.com/gpu", None)
    c["resources"].pop("requests", None)         # 8 CPUs / 32 GiB do not fit a test VM
    pod["spec"]["volumes"] = [v for v in pod["spec"].get("volumes", []) if v["name"] != "dshm"]
    c["volumeMounts"] = [m for m in c.get("volumeMounts", []) if m["name"] != "dshm"]
    if not c["volumeMounts"]:
        c.pop("volumeMounts")
    c["image"] = WORKLOAD
    c["command"] = ["sleep", "100000"]
    m = mutate(webhook, pod, os.path.join(a.out, "nccl.yaml"))
    env = {e["name"]: e.get("value") for e in m["spec"]["containers"][0].get("env", [])}
    nccl = {k: v for k, v in env.items() if k.startswith("NCCL_")}
    with open(os.path.join(a.out, "nccl.expected.json"), "w") as f:
        json.dump(nccl, f)
    print("nccl.yaml: container env after mutate %s" % json.dumps(env, sort_keys=True))

    # The SMC-R journey: one tcp-bulk container from the Deployment's template.
    with open(os.path.join(a.src, "examples", "smcr-deployment.yaml")) as f:
        dep = yaml.safe_load(f)
    for name, smcr, host_net in (("smcr-host", True, True), ("tcp-host", False, True),
                                 ("smcr-pod", True, False)):
        pod = template_pod(dep, name, dep["metadata"]["namespace"])
        if not smcr:
            pod["metadata"]["annotations"].pop(SMCR_ANNOTATION, None)
        elif pod["metadata"]["annotations"].get(SMCR_ANNOTATION) != "true":
            die("examples/smcr-deployment.yaml no longer carries %s: \"true\"" % SMCR_ANNOTATION)
        spec = pod["spec"]
        inits = spec.pop("initContainers", None) or []
        if name == "smcr-pod" and inits:
            # The pod-netns pods keep the example's init container: the webhook must give the
            # eRDMA slot to the first regular container (kubelet's PodResources, where the agent
            # finds the pod, does not list init containers), or the netns stays unconfigured.
            init = inits[0]
            init["image"] = WORKLOAD
            spec["initContainers"] = [init]
        c = spec["containers"][0]
        c.pop("args", None)
        c.pop("ports", None)
        c["resources"] = {}
        c["name"] = "bulk"
        c["image"] = WORKLOAD
        c["command"] = ["sleep", "100000"]    # node.sh gives the real tcp-bulk command
        spec["containers"] = [c]
        if host_net:
            spec["hostNetwork"] = True
        out = os.path.join(a.out, name + ".yaml")
        m = mutate(webhook, pod, out)
        check_library_delivery(name, m)
        print("%s.yaml: hostNetwork %s, annotations %s, limits %s, env %s" % (
            name, bool(m["spec"].get("hostNetwork")), json.dumps(m["metadata"].get("annotations", {})),
            json.dumps(m["spec"]["containers"][0].get("resources", {}).get("limits", {})),
            json.dumps(m["spec"]["containers"][0].get("env", []))))


if __name__ == "__main__":
    main()
