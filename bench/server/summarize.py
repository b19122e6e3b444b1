#!/usr/bin/python3
"""Summarises bench/server/run.sh samples (one JSON object per line on stdin, or parses one wrk
output with --wrk FILE). Prints a Markdown table of medians per (body, server)."""
import json
import re
import statistics
import sys


def to_ms(value, unit):
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def parse_wrk(text):
    out = {}
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", text)
    out["requests"] = int(m.group(1))
    out["rps"] = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    for pct in ("50", "90", "99"):
        m = re.search(r"^\s+%s(?:\.000)?%%\s+([\d.]+)(us|ms|s)\s*$" % pct, text, re.M)
        out["p" + pct + "_ms"] = to_ms(m.group(1), m.group(2))
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    out["non2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    out["socket_errors"] = sum(int(x) for x in m.groups()) if m else 0
    return out


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--wrk":
        with open(sys.argv[2]) as f:
            print(json.dumps(parse_wrk(f.read())))
        return
    rows = {}
    for line in sys.stdin:
        if line.strip():
            s = json.loads(line)
            rows.setdefault((s["body"], s["server"]), []).append(s)
    print("| body | server | runs | requests/s | p50 | p90 | p99 | CPU µs/request | server CPU use | peak RSS | of it anonymous | errors | load before |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    med = lambda xs: statistics.median(xs)
    table = {}
    for (body, server), samples in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1] != "erdma-webhook")):
        r = {
            "rps": med([s["rps"] for s in samples]),
            "p50": med([s["p50_ms"] for s in samples]),
            "p90": med([s["p90_ms"] for s in samples]),
            "p99": med([s["p99_ms"] for s in samples]),
            "cpu_us": med([s["cpu_us_per_req"] for s in samples]),
            "util": med([s["cpu_util"] for s in samples]),
            "rss": max(s["peak_rss_kib"] for s in samples),
            "anon": max(s.get("anon_rss_kib", 0) for s in samples),
            "load": med([s.get("load_before", 0.0) for s in samples]),
            "errors": sum(s["non2xx"] + s["socket_errors"] for s in samples),
        }
        table[(body, server)] = r
        print("| %s | %s | %d | %.0f | %.3f ms | %.3f ms | %.3f ms | %.1f | %.0f %% | %.1f MiB | %.1f MiB | %d | %.2f |" % (
            body, server, len(samples), r["rps"], r["p50"], r["p90"], r["p99"], r["cpu_us"], 100 * r["util"],
            r["rss"] / 1024, r["anon"] / 1024, r["errors"], r["load"]))
    print()
    for body in sorted({b for b, _ in table}):
        a, t = table.get((body, "erdma-webhook")), table.get((body, "trivial-tls"))
        if a and t:
            print("- %s: erdma-webhook serves %.0f%% of the trivial server's requests/s; CPU per request %.2fx "
                  "the trivial server's (%.1f µs more per request)." % (
                      body, 100 * a["rps"] / t["rps"], a["cpu_us"] / t["cpu_us"], a["cpu_us"] - t["cpu_us"]))


if __name__ == "__main__":
    main()
