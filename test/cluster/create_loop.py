#!/usr/bin/env python3
"""Creates pods the webhook must mutate at a steady rate while a fault is under way, and counts
what the API server answered. Each create is a server-side dry run (`?dryRun=All`): the API server
runs admission exactly as for a real create, the webhook included, and stores nothing, so the loop
loads admission and not the node. A create counts as good only when it was admitted (201) and the
pod came back mutated (the `network.alibabacloud.com/erdma-injected` annotation).

    create_loop.py --server https://127.0.0.1:6443 --ca CA --cert CERT --key KEY \
        --namespace team-a --interval 0.1 --max-seconds 300 --stop-file FILE

Runs until FILE exists (or SIGTERM, or --max-seconds, or --max-count), then prints one JSON line:
{"created": N, "failed": M, "unmutated": K, "errors": [first 10 failures], "seconds": S}. Exit
status 0 always when it ran; the caller judges the counts. Standard library only: any python3.
"""
import argparse
import http.client
import json
import os
import signal
import ssl
import sys
import time
import urllib.parse

INJECTED = "network.alibabacloud.com/erdma-injected"


def pod(i):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "fault-load-",
                         "annotations": {"network.alibabacloud.com/erdma-smcr": "true"},
                         "labels": {"erdma-test": "fault-load", "seq": str(i)}},
            "spec": {"containers": [{"name": "c", "image": "localhost/erdma-controller/workload:1",
                                     "command": ["sleep", "100000"]}]}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--max-seconds", type=float, default=300)
    ap.add_argument("--max-count", type=int, default=5000)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--started-file", help="written after the first admitted create")
    a = ap.parse_args()

    url = urllib.parse.urlparse(a.server)
    ctx = ssl.create_default_context(cafile=a.ca)
    ctx.load_cert_chain(a.cert, a.key)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))

    conn = None
    created = failed = unmutated = 0
    errors = []
    t0 = time.monotonic()
    i = 0
    while not stop["now"] and not os.path.exists(a.stop_file) and i < a.max_count \
            and time.monotonic() - t0 < a.max_seconds:
        i += 1
        body = json.dumps(pod(i)).encode()
        status, text = None, ""
        try:
            if conn is None:
                conn = http.client.HTTPSConnection(url.hostname, url.port, context=ctx, timeout=30)
            conn.request("POST", "/api/v1/namespaces/%s/pods?dryRun=All" % a.namespace, body,
                         {"Content-Type": "application/json", "Accept": "application/json"})
            resp = conn.getresponse()
            status, text = resp.status, resp.read().decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as e:
            # The connection to the API server itself failed: not an admission answer. Count it
            # (it is a failed create to whoever sent it) and reconnect.
            text = "connection: %s" % e
            conn = None
        if status == 201:
            annotations = json.loads(text).get("metadata", {}).get("annotations", {})
            if INJECTED in annotations:
                created += 1
                if created == 1 and a.started_file:
                    open(a.started_file, "w").close()
            else:
                unmutated += 1
                if len(errors) < 10:
                    errors.append("#%d admitted without the webhook's mutation" % i)
        else:
            failed += 1
            if len(errors) < 10:
                message = text
                try:
                    message = json.loads(text).get("message", text)
                except ValueError:
                    pass
                errors.append("#%d %s: %s" % (i, status, message[:300]))
        time.sleep(a.interval)
    print(json.dumps({"created": created, "failed": failed, "unmutated": unmutated, "errors": errors,
                      "seconds": round(time.monotonic() - t0, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
