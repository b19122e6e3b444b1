#!/usr/bin/env python3
"""What each SMC-R admission path adds to a Pod CREATE on the real kube-apiserver: no mutation (a
namespace neither path acts in), erdma-webhook, and the MutatingAdmissionPolicy of
manifests/admission-policy, set up as test/cluster/admission_policy.py sets them up. Each round
sends one server-side dry-run create of the same SMC-R pod (the golden case smcr-basic) through
each path in turn, each path over its own kept-alive HTTPS connection, so the three are measured
side by side under the same load. Prints p50/p90/p99 per path and what each adds to the plain path;
the numbers are printed, not judged. Standard library only: any python3.

    admission_latency.py --src SRC --webhook BUILD/webhook/erdma-webhook --work DIR \
        --server https://127.0.0.1:6443 --ca CA --cert CERT --key KEY [--rounds 300]
"""
import argparse
import http.client
import json
import os
import ssl
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "cluster"))
import admission_policy as ap  # noqa: E402  (the paths' set-up, shared with the comparison test)

PLAIN_NS = "erdma-compare-plain"


def percentile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag in ("--src", "--webhook", "--work", "--server", "--ca", "--cert", "--key"):
        p.add_argument(flag, required=True)
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    args = p.parse_args()
    pod = ap.golden_cases(args.src)["smcr-basic"]
    ctx = ssl.create_default_context(cafile=args.ca)
    ctx.load_cert_chain(args.cert, args.key)
    host = args.server.split("://", 1)[1]
    ap.kubectl("create", "namespace", PLAIN_NS)
    try:
        with ap.both_paths(args, pod):
            paths = [("no admission", PLAIN_NS, False), ("erdma-webhook", ap.WEBHOOK_NS, True),
                     ("policy", ap.POLICY_NS, True)]
            conns = {name: http.client.HTTPSConnection(host, context=ctx, timeout=30) for name, _, _ in paths}
            times = {name: [] for name, _, _ in paths}
            errors = {name: 0 for name, _, _ in paths}
            for r in range(args.warmup + args.rounds):
                for name, ns, mutated in paths:
                    body = dict(pod, metadata=dict(pod["metadata"], name="bench-%d" % r, namespace=ns))
                    t0 = time.perf_counter()
                    conns[name].request("POST", "/api/v1/namespaces/%s/pods?dryRun=All" % ns, json.dumps(body),
                                        {"Content-Type": "application/json"})
                    resp = conns[name].getresponse()
                    data = resp.read()
                    dt = time.perf_counter() - t0
                    ok = resp.status == 201 and (
                        ap.INJECTED in (json.loads(data)["metadata"].get("annotations") or {})) == mutated
                    if not ok:
                        errors[name] += 1
                    elif r >= args.warmup:
                        times[name].append(dt * 1000)
            for c in conns.values():
                c.close()
    finally:
        ap.kubectl("delete", "namespace", PLAIN_NS, "--wait=true", "--timeout=120s", ok=False)
    base = statistics.median(times["no admission"]) if times["no admission"] else float("nan")
    print("%d rounds after %d warm-up; server-side dry-run creates of one SMC-R pod, ms:" % (args.rounds, args.warmup))
    print("%-14s %8s %8s %8s %14s %7s" % ("path", "p50", "p90", "p99", "p50 added", "errors"))
    for name, _, _ in paths:
        t = times[name]
        if not t:
            print("%-14s %s" % (name, "no successful request"))
            continue
        print("%-14s %8.2f %8.2f %8.2f %14.2f %7d" % (name, statistics.median(t), percentile(t, 0.9),
                                                     percentile(t, 0.99), statistics.median(t) - base, errors[name]))
    print(json.dumps({name: {"p50_ms": round(statistics.median(t), 3), "p99_ms": round(percentile(t, 0.99), 3),
                             "errors": errors[name]} for name, t in times.items() if t}))
    return 1 if any(errors.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
