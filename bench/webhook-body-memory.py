#!/usr/bin/python3
"""Peak RSS of erdma-webhook under the load of security review 2026-12b M4: 40 connections from
one peer each POST an 8 MiB body at once, while another peer sends ordinary AdmissionReviews one
after another. Runs the real server (built at build/webhook/erdma-webhook, or $ERDMA_WEBHOOK) once
per budget and body kind, and prints per run: VmHWM, the big bodies served and refused with 429,
and the ordinary reviews answered and their slowest answer.

  bench/webhook-body-memory.py [--runs 3] [--budgets 32Mi,1Gi] [--kinds padded,dense]

`1Gi` holds all 40 bodies at once: the server as it was before the budget. Body kinds:
  padded  an ordinary review padded with whitespace to 8 MiB (parsing it touches little memory)
  dense   an ordinary review whose pod carries an 8 MiB array of small numbers in a field the
          webhook does not read: the most simdjson memory a body of that size can take
Runs with Debian's /usr/bin/python3; the server's helpers are the integration tests' harness.
Everything goes to a temporary directory that is removed at the end."""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "webhook", "server", "integration"))
from harness import Server, pod, post_review, review  # noqa: E402

MIB = 1 << 20
BIG = 8 * MIB
BIG_CLIENTS = 40
HOG, APISERVER = "127.0.0.1", "127.0.0.2"


def big_body(kind, i):
    obj = pod(name="big-%d" % i)
    if kind == "padded":
        core = review(obj, uid="big-%d" % i)
        return core[:-1] + b" " * (BIG - len(core)) + b"}"
    obj["spec"]["x-filler"] = []
    core = review(obj, uid="big-%d" % i)
    at = core.index(b'"x-filler": [') + len(b'"x-filler": [')
    n = (BIG - len(core) + 1) // 2  # "0," per element, the last without its comma
    filler = b"0," * (n - 1) + b"0"
    body = core[:at] + filler + core[at:]
    return body + b" " * (BIG - len(body))


def one_run(workdir, budget, kind):
    server = Server(workdir, extra_args=["--threads", "2", "--body-budget", budget])
    try:
        ordinary = review(pod(name="web-0"), uid="ordinary")
        bodies = [big_body(kind, i) for i in range(BIG_CLIENTS)]
        results = []
        lock = threading.Lock()
        start = threading.Barrier(BIG_CLIENTS + 1, timeout=60)
        done = threading.Event()

        def big(i):
            conn = server.connect(timeout=60, source=HOG)
            conn.connect()
            start.wait()
            try:
                status, headers, _ = post_review(conn, bodies[i])
            except Exception as e:  # a refused body may be cut off mid-send: counted as such
                status, headers = repr(e), {}
            with lock:
                results.append((status, headers.get("retry-after")))
            conn.close()

        ordinary_ms = []

        def apiserver():
            conn = server.connect(timeout=60, source=APISERVER)
            start.wait()
            while not done.is_set():
                t0 = time.perf_counter()
                status, _, _ = post_review(conn, ordinary)
                ordinary_ms.append((time.perf_counter() - t0) * 1000 if status == 200 else float("inf"))
            conn.close()

        threads = [threading.Thread(target=big, args=(i,)) for i in range(BIG_CLIENTS)]
        for t in threads:
            t.start()
        side = threading.Thread(target=apiserver)
        side.start()
        for t in threads:
            t.join(timeout=300)
        done.set()
        side.join(timeout=60)
        hwm = server.hwm_kib()
        served = sum(1 for s, _ in results if s == 200)
        refused = sum(1 for s, r in results if s == 429 and r)
        return {"hwm_mib": hwm / 1024, "served": served, "refused": refused,
                "other": len(results) - served - refused, "ordinary": len(ordinary_ms),
                "ordinary_failed": sum(1 for x in ordinary_ms if x == float("inf")),
                "ordinary_max_ms": max(ordinary_ms) if ordinary_ms else 0.0}
    finally:
        server.terminate()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--budgets", default="32Mi,1Gi")
    ap.add_argument("--kinds", default="padded,dense")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="erdma-body-memory-")
    try:
        print("| budget | bodies | peak RSS (VmHWM), median (min-max) | 8 MiB bodies served / 429 / other | "
              "ordinary reviews answered (failed), slowest |")
        print("|---|---|---|---|---|")
        for kind in args.kinds.split(","):
            for budget in args.budgets.split(","):
                runs = []
                for r in range(args.runs):
                    d = os.path.join(root, "%s-%s-%d" % (kind, budget, r))
                    os.makedirs(d)
                    if runs:
                        shutil.copytree(os.path.join(root, "certs"), os.path.join(d, "certs"))
                    runs.append(one_run(d, budget, kind))
                    if not os.path.exists(os.path.join(root, "certs")):
                        shutil.copytree(os.path.join(d, "certs"), os.path.join(root, "certs"))
                hwm = [x["hwm_mib"] for x in runs]
                print("| %s | %s | %.1f MiB (%.1f-%.1f) | %s | %s |" % (
                    budget, kind, statistics.median(hwm), min(hwm), max(hwm),
                    ", ".join("%d / %d / %d" % (x["served"], x["refused"], x["other"]) for x in runs),
                    ", ".join("%d (%d), %.0f ms" % (x["ordinary"], x["ordinary_failed"], x["ordinary_max_ms"])
                              for x in runs)))
                sys.stdout.flush()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
