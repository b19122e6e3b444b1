#!/usr/bin/env bash
# Pod start-up on a real cluster, as a user feels it (bench/cluster_startup.py says what each way
# is): starts scripts/cluster.sh's one-node Kubernetes, installs the product as README.md says
# (test/cluster/lib.sh), creates the batches, prints p50/p90/p99 per way and the ratios, then the
# agent's own time per PreStartContainer (PodResources, CRI, the pod's netns) from its log and its
# memory after the pods, and stops the cluster. Root; no cluster may be up. The numbers are
# printed, not judged. This host's kernel has no SMC: each setup stops where it would add the pnet
# entry (result "failed"), so the pnet entry and the sysctls are not in these times.
#   bench/cluster-startup.sh [--build-dir build] [--pods 50] [--rounds 3]
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$SRC/build pods=50 rounds=3
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) BUILD=$(cd "$2" && pwd); shift 2 ;;
    --pods) pods=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
CLUSTER=$SRC/scripts/cluster.sh
STATE=${ERDMA_CLUSTER_DIR:-/run/erdma-cluster}
# shellcheck source=test/cluster/lib.sh
. "$SRC/test/cluster/lib.sh"
# shellcheck source=test/cluster/checks.sh
. "$SRC/test/cluster/checks.sh"
cluster_session bench-cluster
t0=$SECONDS
cluster_up
product_images
product_install
kubectl create namespace bench >/dev/null
kubectl label namespace bench erdma-injection=enabled >/dev/null
echo "cluster up and product installed in $((SECONDS - t0)) s; $pods pods a batch, $rounds rounds"
/usr/bin/python3 "$SRC/bench/cluster_startup.py" --server "https://127.0.0.1:${ERDMA_CLUSTER_PORT:-6443}" \
  --ca "$STATE/pki/ca.crt" --cert "$STATE/pki/admin.crt" --key "$STATE/pki/admin.key" \
  --namespace bench --pods "$pods" --rounds "$rounds"
# The agent's own split of each product pod's PreStartContainer (the kubelet's call, answered once
# the pod's netns is set up), from its "SMC-R pod setup" log lines, and its memory after them.
kubectl -n erdma-system logs ds/erdma-agent --tail=-1 >"$work/agent.log"
/usr/bin/python3 - "$work/agent.log" <<'PY'
import json, statistics, sys
rows = []
for line in open(sys.argv[1], errors="replace"):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if r.get("msg") == "SMC-R pod setup" and r.get("trigger") == "PreStartContainer" and str(r.get("pod", "")).startswith("bench/"):
        rows.append(r)
results = {}
for r in rows:
    results[r.get("result")] = results.get(r.get("result"), 0) + 1
print("agent: %d PreStartContainer setups of bench pods, by result: %s" % (len(rows), results or "none"))
for key, what in (("us", "hook"), ("podresources_us", "PodResources"), ("runtime_us", "CRI"), ("netns_us", "pod netns")):
    xs = sorted(int(r[key]) / 1000.0 for r in rows if isinstance(r.get(key), int))
    if xs:
        p = lambda q: xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]
        print("  %-13s n=%-4d p50 %7.2f ms  p90 %7.2f ms  p99 %7.2f ms" % (what, len(xs), p(0.5), p(0.9), p(0.99)))
PY
# shellcheck disable=SC2016  # $p is expanded by the shell in the cluster's sandbox
"$CLUSTER" exec sh -c 'for p in $(pidof erdma-agent); do grep -E "^VmRSS" /proc/$p/status; done' | sed 's/^/agent after the pods: /'
