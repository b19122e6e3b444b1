#!/usr/bin/env python3
"""Writes the largest AdmissionReviews a tenant can send (docs/hardening.md, "Bounded work") into
a directory, as seeds for the `review` fuzz target's large-input run (test/fuzz/run.sh). Each is
one shape that made the webhook's work grow with the square of its size; libFuzzer then mutates
them, and its per-input timeout catches any path that is not linear. Standard library only: any
python3 runs it.

    large_seeds.py OUT_DIR
"""
import json
import os
import sys

LIMIT = 3 << 20  # the apiserver's request body limit


def review(annotations, containers):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-large", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "operation": "CREATE", "namespace": "team-a",
                        "object": {"metadata": {"name": "large", "annotations": annotations},
                                   "spec": {"containers": containers}}}}


def names(total):
    out, i, size = [], 0, 0
    while size < total:
        out.append("a%d" % i)
        size += len(out[-1]) + 1
        i += 1
    return ",".join(out)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    smcr = {"network.alibabacloud.com/erdma-smcr": "true"}
    seeds = {
        # ~3 MiB of distinct names in the resource-added annotation (refused at 256 KiB).
        "resource-added-3mib": review(dict(smcr, **{"network.alibabacloud.com/erdma-resource-added": names(LIMIT - 4096)}),
                                      [{"name": "c0", "image": "busybox"}]),
        # Just under the annotation limit, read in full.
        "resource-added-250kib": review(dict(smcr, **{"network.alibabacloud.com/erdma-resource-added": names(250 << 10)}),
                                        [{"name": "c0", "image": "busybox", "resources": {"limits": {"aliyun/erdma": "1"}}}]),
        # As many containers as the webhook mutates, each of them warning (envFrom).
        "containers-warnings": review(smcr, [{"name": "c%d" % i, "image": "b",
                                              "envFrom": [{"configMapRef": {"name": "x"}}]} for i in range(4096)]),
        # Far more containers than that (refused while reading).
        "containers-many": review(smcr, [{"name": "c%d" % i} for i in range(120000)]),
        # A warnings annotation of many distinct lines, merged with new warnings.
        "warnings-lines": review(dict(smcr, **{"network.alibabacloud.com/erdma-warnings":
                                               "\n".join("w%d" % i for i in range(30000))}),
                                 [{"name": "c%d" % i, "image": "b", "envFrom": [{"secretRef": {"name": "s"}}]}
                                  for i in range(64)]),
    }
    for name, doc in seeds.items():
        text = json.dumps(doc, separators=(",", ":"))
        if len(text) > LIMIT:
            sys.exit("large_seeds.py: %s is %d bytes, over %d" % (name, len(text), LIMIT))
        with open(os.path.join(out, name + ".json"), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
