#!/usr/bin/env python3
"""Pod start-up as a user feels it, on the real cluster of scripts/cluster.sh: from the create call
to the pod's Ready condition, for a batch of pods created one after another, in three ways:

  plain     pods that ask for nothing (the floor);
  product   the same pods annotated network.alibabacloud.com/erdma-smcr: "true" in an opted-in
            namespace: the webhook adds aliyun/erdma and the preload, kubelet calls Allocate and
            the agent's PreStartContainer sets up the pod's network namespace;
  initc     the anchor's way (Alibaba's controller): each pod gets a privileged init container
            that sets the SMC sysctls itself before the application starts (here the project's
            busybox workload image writing /proc/sys/net/smc/*; the anchor's also adds the pnet
            entry, one netlink call of microseconds that busybox cannot make; on a kernel without
            SMC the writes fail and the container still exits 0, as a tolerant init script does).
            What it costs is the extra privileged container's whole life before the app starts.

Times are taken here: the create call's return (monotonic clock) and the moment a watch on the
API server reports the pod Ready. Prints p50/p90/p99 per way and the ratios; the numbers are
printed, not judged. Run by bench/cluster-startup.sh, which starts the cluster and installs the
product first; standard library only, any python3.

    cluster_startup.py --server URL --ca CA --cert CERT --key KEY --pods 50 --rounds 1
"""
import argparse
import http.client
import json
import ssl
import statistics
import sys
import threading
import time
import urllib.parse

WORKLOAD = "localhost/erdma-controller/workload:1"
LABEL = "erdma-bench"


class Api:
    def __init__(self, server, ca, cert, key):
        u = urllib.parse.urlparse(server)
        self.host, self.port = u.hostname, u.port
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.load_cert_chain(cert, key)

    def conn(self, timeout=60):
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def call(self, method, path, body=None, conn=None):
        c = conn or self.conn()
        c.request(method, path, json.dumps(body).encode() if body is not None else None,
                  {"Content-Type": "application/json", "Accept": "application/json"})
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        if conn is None:
            c.close()
        if r.status >= 300:
            raise RuntimeError("%s %s: %d %s" % (method, path, r.status, text[:400]))
        return json.loads(text) if text else {}


def pod(way, name):
    meta = {"name": name, "labels": {LABEL: way}}
    spec = {"terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": WORKLOAD, "imagePullPolicy": "Never",
                            "command": ["sleep", "100000"]}]}
    if way == "product":
        meta["annotations"] = {"network.alibabacloud.com/erdma-smcr": "true"}
    elif way == "initc":
        script = "for k in wmem rmem; do echo 262144 > /proc/sys/net/smc/$k; done 2>/dev/null; exit 0"
        spec["initContainers"] = [{"name": "smc-setup", "image": WORKLOAD, "imagePullPolicy": "Never",
                                   "command": ["sh", "-c", script],
                                   "securityContext": {"privileged": True}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def watch_ready(api, ns, way, ready, stop):
    """Records the first time each pod of `way` is reported Ready."""
    c = api.conn(timeout=600)
    sel = urllib.parse.quote("%s=%s" % (LABEL, way))
    c.request("GET", "/api/v1/namespaces/%s/pods?watch=1&labelSelector=%s" % (ns, sel))
    r = c.getresponse()
    buf = b""
    while not stop.is_set():
        chunk = r.readline()  # the response object undoes the chunked encoding
        if not chunk:
            break
        buf += chunk
        if not buf.endswith(b"\n"):
            continue
        line, buf = buf.strip(), b""
        if not line:
            continue
        ev = json.loads(line)
        obj = ev.get("object", {})
        name = obj.get("metadata", {}).get("name")
        for cond in obj.get("status", {}).get("conditions", []) or []:
            if cond.get("type") == "Ready" and cond.get("status") == "True" and name not in ready:
                ready[name] = time.monotonic()
    c.close()


def run_way(api, ns, way, n, deadline_s):
    ready, created, stop = {}, {}, threading.Event()
    t = threading.Thread(target=watch_ready, args=(api, ns, way, ready, stop), daemon=True)
    t.start()
    time.sleep(0.5)  # the watch is established before the first create
    conn = api.conn()
    for i in range(n):
        name = "%s-%02d" % (way, i)
        api.call("POST", "/api/v1/namespaces/%s/pods" % ns, pod(way, name), conn=conn)
        created[name] = time.monotonic()
    end = time.monotonic() + deadline_s
    while len(ready) < n and time.monotonic() < end and t.is_alive():
        time.sleep(0.2)
    if not t.is_alive() and len(ready) < n:
        raise RuntimeError("the watch on the API server ended early")
    stop.set()
    missing = sorted(set(created) - set(ready))
    lat = sorted((ready[k] - created[k]) * 1000 for k in created if k in ready)
    api.call("DELETE", "/api/v1/namespaces/%s/pods?labelSelector=%s" % (ns, urllib.parse.quote("%s=%s" % (LABEL, way))))
    # Wait until they are gone, so the next way starts on an idle node.
    end = time.monotonic() + 300
    while time.monotonic() < end:
        left = api.call("GET", "/api/v1/namespaces/%s/pods?labelSelector=%s" % (ns, urllib.parse.quote("%s=%s" % (LABEL, way))))
        if not left.get("items"):
            break
        time.sleep(0.5)
    return lat, missing


def pct(xs, p):
    if not xs:
        return float("nan")
    k = max(0, min(len(xs) - 1, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return xs[k]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--pods", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--namespace", default="bench")
    ap.add_argument("--deadline", type=float, default=300, help="seconds a batch may take to be Ready")
    a = ap.parse_args()
    api = Api(a.server, a.ca, a.cert, a.key)
    results = {"plain": [], "product": [], "initc": []}
    failed = False
    for r in range(a.rounds):
        for way in ("plain", "product", "initc"):
            t0 = time.monotonic()
            lat, missing = run_way(api, a.namespace, way, a.pods, a.deadline)
            print("round %d %-8s %d/%d Ready in %.1f s: p50 %.0f ms, p90 %.0f ms, p99 %.0f ms%s" % (
                r + 1, way, len(lat), a.pods, time.monotonic() - t0, pct(lat, 50), pct(lat, 90), pct(lat, 99),
                "; not Ready: " + ", ".join(missing[:5]) if missing else ""), flush=True)
            failed = failed or bool(missing)
            results[way].append(lat)
    med = {w: statistics.median([pct(l, 50) for l in v]) for w, v in results.items()}
    p99 = {w: statistics.median([pct(l, 99) for l in v]) for w, v in results.items()}
    print("summary (median over rounds): " + "; ".join(
        "%s p50 %.0f ms p99 %.0f ms" % (w, med[w], p99[w]) for w in results))
    print("product vs plain: p50 +%.1f %%; product vs initc: p50 %.2fx" % (
        (med["product"] / med["plain"] - 1) * 100, med["product"] / med["initc"]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
