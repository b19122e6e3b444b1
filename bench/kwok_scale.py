#!/usr/bin/env python3
"""A cluster's worth of pods through the real kube-apiserver: what SMC-R admission costs at rate.

Runs against scripts/cluster.sh's control plane with kwok simulating the nodes (bench/kwok-scale.sh
starts both). Creates NODES simulated eRDMA nodes (aliyun/erdma and aliyun/erdma-smcr capacity, the
kubelet's 110 pods, a taint that keeps real pods off), then, for each admission path in turn (none,
erdma-webhook, the MutatingAdmissionPolicy; set up as test/cluster/admission_policy.py sets them
up, each for its own namespace) and each rate in RATES, creates PODS pods at that rate: a third
SMC-R annotated, a third NCCL (aliyun/erdma: 1), a third plain, each with a nodeSelector for the
simulated pool. The pods stay: with the defaults, 9 runs of 1,112 pods are 10,008 pods in all; the
runs go rate by rate, the three paths in a turning order.

Per run it prints what the creator saw (achieved rate; CREATE latency p50/p99 and errors by
status), what the apiserver measured (its own admission histograms, read from /metrics before and
after the run: the webhook's calls and the MutatingAdmissionPolicy plugin; the buckets holding
p50 and p99, since those histograms have only a few coarse buckets), how long until every pod of the run was Running (the
scheduler binds them, kwok marks them Running), and the CPU and RSS of erdma-webhook and
kube-apiserver over the run. The numbers are printed, not judged. Standard library only: any
python3.

    kwok_scale.py --src SRC --webhook BUILD/webhook/erdma-webhook --work DIR --server URL \
        --ca CA --cert CERT --key KEY [--nodes 1000] [--pods 1112] [--rates 50,100,200]
"""
import argparse
import http.client
import json
import os
import queue
import ssl
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "cluster"))
import admission_policy as ap  # noqa: E402  (the paths' set-up, shared with the comparison test)
from admission_latency import percentile  # noqa: E402  (this directory: the same nearest-rank percentile)

PLAIN_NS = "erdma-scale-plain"
POOL_LABEL = "erdma-bench/pool"
TAINT_KEY = "kwok.x-k8s.io/node"
WORKERS = 8
# The apiserver's own admission histograms, read for every run: the webhook's calls (only SMC-R pods
# of the webhook's namespace reach it: its matchConditions filter the rest inside the apiserver),
# and the MutatingAdmissionPolicy plugin, which runs for every create.
APISERVER_METRICS = {
    "webhook": ("apiserver_admission_webhook_admission_duration_seconds",
                {"name": "pods.erdma-webhook.erdma-system.svc", "operation": "CREATE", "type": "admit"}),
    "policy plugin": ("apiserver_admission_controller_admission_duration_seconds",
                      {"name": "MutatingAdmissionPolicy", "operation": "CREATE", "type": "admit"}),
}


class Api:
    """One kept-alive HTTPS connection to the apiserver per thread that uses it."""

    def __init__(self, args):
        self.ctx = ssl.create_default_context(cafile=args.ca)
        self.ctx.load_cert_chain(args.cert, args.key)
        self.host = args.server.split("://", 1)[1]
        self.local = threading.local()

    def request(self, method, path, body=None):
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPSConnection(self.host, context=self.ctx, timeout=60)
        try:
            conn.request(method, path, None if body is None else json.dumps(body),
                         {"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, resp.read()
        except (OSError, http.client.HTTPException):
            conn.close()
            self.local.conn = None
            raise


def node(name):
    capacity = {"cpu": "64", "memory": "256Gi", "pods": "110", "aliyun/erdma": "8", "aliyun/erdma-smcr": "1000"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {TAINT_KEY: "fake"},
                         "labels": {POOL_LABEL: "kwok", "kubernetes.io/hostname": name, "type": "kwok"}},
            "spec": {"taints": [{"key": TAINT_KEY, "value": "fake", "effect": "NoSchedule"}]},
            "status": {"capacity": capacity, "allocatable": capacity}}


def pod(kind, name, ns):
    container = {"name": "app", "image": "localhost/erdma-controller/workload:1",
                 "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}
    meta = {"name": name, "namespace": ns, "labels": {"erdma-bench": kind}}
    if kind == "smcr":
        meta["annotations"] = {"network.alibabacloud.com/erdma-smcr": "true"}
    elif kind == "nccl":
        container["resources"]["limits"] = {"aliyun/erdma": "1"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [container], "nodeSelector": {POOL_LABEL: "kwok"},
                     "tolerations": [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]}}


def histograms(api, metric, labels):
    """{le: cumulative count} of the metric's series whose labels include `labels`, summed."""
    status, text = api.request("GET", "/metrics")
    if status != 200:
        raise SystemExit("GET /metrics answered %d" % status)
    out = {}
    for line in text.decode().splitlines():
        if not line.startswith(metric + "_bucket{"):
            continue
        inner, _, value = line[len(metric) + 8:].rpartition("} ")
        got = dict(kv.split("=", 1) for kv in inner.split(",") if "=" in kv)
        got = {k: v.strip('"') for k, v in got.items()}
        if all(got.get(k) == v for k, v in labels.items()):
            le = float(got["le"])
            out[le] = out.get(le, 0) + float(value)
    return out


def bucket_of(before, after, q):
    """The histogram bucket, "LOW-HIGH ms", holding the q-quantile of the observations between two
    reads of a cumulative histogram, and their count; ("-", 0) without any. The apiserver's buckets
    are coarse (5, 25, 100, 500 ms, ...): the bucket is what it knows, so no value is interpolated."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0) for b in bounds]
    if not counts or counts[-1] <= 0:
        return "-", 0
    low = 0.0
    for b, c in zip(bounds, counts):
        if c >= q * counts[-1]:
            return ("%g-%g ms" % (low * 1000, b * 1000) if b != float("inf") else "> %g ms" % (low * 1000)), int(counts[-1])
        low = b
    return "-", int(counts[-1])


def proc_sample(name):
    """(CPU seconds, RSS KiB, peak RSS KiB) of the newest process named `name`, or None."""
    try:
        pids = subprocess.run(["pgrep", "-n", "-x", name], capture_output=True, text=True).stdout.split()
        if not pids:
            return None
        with open("/proc/%s/stat" % pids[0]) as f:
            fields = f.read().rpartition(")")[2].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        status = dict(line.split(":", 1) for line in open("/proc/%s/status" % pids[0]) if ":" in line)
        return cpu, int(status["VmRSS"].split()[0]), int(status["VmHWM"].split()[0])
    except (OSError, ValueError, KeyError, IndexError):
        return None


def host_cpu():
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4], sum(v)


def create_at_rate(api, ns, prefix, count, rate):
    """Creates `count` pods, the i-th sent at start + i/rate by WORKERS threads (later when they
    lag). Returns (seconds from the first send to the last answer, latencies ms, {status: n})."""
    jobs = queue.Queue()
    lat, errors, lock = [], {}, threading.Lock()
    kinds = ("smcr", "nccl", "plain")

    def worker():
        while True:
            job = jobs.get()
            if job is None:
                return
            i, due = job
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            body = pod(kinds[i % 3], "%s-%05d" % (prefix, i), ns)
            t0 = time.perf_counter()
            try:
                status, _ = api.request("POST", "/api/v1/namespaces/%s/pods" % ns, body)
            except (OSError, http.client.HTTPException) as e:
                status = type(e).__name__
            dt = (time.perf_counter() - t0) * 1000
            with lock:
                if status == 201:
                    lat.append(dt)
                else:
                    errors[status] = errors.get(status, 0) + 1

    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    start = time.perf_counter() + 0.2
    for i in range(count):
        jobs.put((i, start + i / rate))
    for _ in threads:
        jobs.put(None)
    for t in threads:
        t.join()
    return time.perf_counter() - start, lat, errors


def running_count(api, ns, prefix):
    status, body = api.request("GET", "/api/v1/namespaces/%s/pods?fieldSelector=status.phase%%3DRunning" % ns)
    if status != 200:
        return 0
    return sum(1 for p in json.loads(body)["items"] if p["metadata"]["name"].startswith(prefix + "-"))


def kwok_alive():
    """Fails at once, with kwok's last lines, when the kwok controller the shell started is gone."""
    pid = os.environ.get("KWOK_PID")
    if pid and not os.path.exists("/proc/%s" % pid):
        with open(os.environ.get("KWOK_LOG", "/dev/null"), encoding="utf-8", errors="replace") as f:
            raise SystemExit("kwok exited: %s" % "".join(f.readlines()[-5:]))
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag in ("--src", "--webhook", "--work", "--server", "--ca", "--cert", "--key"):
        p.add_argument(flag, required=True)
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--pods", type=int, default=1112, help="pods per run (3 paths x 3 rates runs)")
    p.add_argument("--rates", default="50,100,200")
    p.add_argument("--running-timeout", type=int, default=900)
    args = p.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    api = Api(args)

    t0 = time.perf_counter()
    for i in range(args.nodes):
        status, body = api.request("POST", "/api/v1/nodes", node("kwok-node-%04d" % i))
        if status not in (201, 409):
            raise SystemExit("creating node %d: %d %s" % (i, status, body[:300]))
    ready = ap.wait_for("%d simulated nodes Ready" % args.nodes, lambda: kwok_alive() and (lambda n: n >= args.nodes and n)(sum(
        1 for n in json.loads(api.request("GET", "/api/v1/nodes?labelSelector=%s%%3Dkwok" % POOL_LABEL)[1])["items"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", [])))), 600)
    print("%d simulated nodes Ready in %.0f s" % (ready, time.perf_counter() - t0), flush=True)

    ap.kubectl("create", "namespace", PLAIN_NS)
    probe = ap.golden_cases(args.src)["smcr-basic"]
    rows = []
    hook_name = os.path.basename(args.webhook)
    with ap.both_paths(args, probe):
        # Rate by rate, each path in turn, the order turned by one each rate: the pods stay, so a
        # later run meets a fuller cluster, and no path should always be the last.
        paths = [("no admission", PLAIN_NS), ("erdma-webhook", ap.WEBHOOK_NS), ("policy", ap.POLICY_NS)]
        runs = [(path, ns, rate) for i, rate in enumerate(rates) for path, ns in paths[i % 3:] + paths[:i % 3]]
        for path, ns, rate in runs:
            prefix = "%s-%d" % (path.split("-")[-1].replace(" ", ""), rate)
            before = {k: histograms(api, *m) for k, m in APISERVER_METRICS.items()}
            hook0, api0, host0 = proc_sample(hook_name), proc_sample("kube-apiserver"), host_cpu()
            elapsed, lat, errors = create_at_rate(api, ns, prefix, args.pods, rate)
            hook1, api1, host1 = proc_sample(hook_name), proc_sample("kube-apiserver"), host_cpu()
            after = {k: histograms(api, *m) for k, m in APISERVER_METRICS.items()}
            t_run = time.perf_counter()
            while (kwok_alive() and running_count(api, ns, prefix) < len(lat)
                   and time.perf_counter() - t_run < args.running_timeout):
                time.sleep(1)
            running = running_count(api, ns, prefix)
            r = {"path": path, "rate": rate, "achieved": len(lat) / elapsed if elapsed else 0,
                 "p50": statistics.median(lat) if lat else float("nan"),
                 "p99": percentile(lat, 0.99) if lat else float("nan"),
                 "errors": ",".join("%s:%d" % kv for kv in sorted(errors.items(), key=str)) or "0",
                 "running": running, "all_running_s": elapsed + time.perf_counter() - t_run,
                 "hook_cpu": (hook1[0] - hook0[0]) / elapsed if hook0 and hook1 else None,
                 "hook_rss": hook1[1] // 1024 if hook1 else None,
                 "api_cpu": (api1[0] - api0[0]) / elapsed if api0 and api1 else None,
                 "api_rss": api1[1] // 1024 if api1 else None,
                 "host_busy": 100.0 * (host1[0] - host0[0]) / max(1, host1[1] - host0[1])}
            for k in APISERVER_METRICS:
                (b50, n), (b99, _) = (bucket_of(before[k], after[k], q) for q in (0.5, 0.99))
                r[k] = "%s / %s (%d)" % (b50, b99, n) if n else "-"
            rows.append(r)
            print("%-13s %3d/s: %.0f/s achieved, CREATE p50 %.1f ms p99 %.1f ms, errors %s; webhook p50/p99 %s; "
                  "policy plugin p50/p99 %s; %d of %d Running after %.0f s" % (
                      path, rate, r["achieved"], r["p50"], r["p99"], r["errors"], r["webhook"], r["policy plugin"],
                      running, args.pods, r["all_running_s"]), flush=True)

    def num(v, fmt):
        return "-" if v is None else fmt % v
    print()
    print("| path | rate/s | achieved/s | CREATE p50 ms | CREATE p99 ms | errors | webhook call p50 / p99 (calls) | "
          "policy plugin p50 / p99 (calls) | all Running after s | webhook CPU cores | webhook RSS MiB | "
          "apiserver CPU cores | apiserver RSS MiB | machine busy % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: ([p for p, _ in paths].index(r["path"]), r["rate"])):
        print("| %s | %d | %.0f | %.1f | %.1f | %s | %s | %s | %.0f%s | %s | %s | %s | %s | %.0f |" % (
            r["path"], r["rate"], r["achieved"], r["p50"], r["p99"], r["errors"], r["webhook"], r["policy plugin"],
            r["all_running_s"], "" if r["running"] >= args.pods else " (%d Running)" % r["running"],
            num(r["hook_cpu"], "%.2f"), num(r["hook_rss"], "%d"), num(r["api_cpu"], "%.2f"), num(r["api_rss"], "%d"),
            r["host_busy"]))


if __name__ == "__main__":
    main()
