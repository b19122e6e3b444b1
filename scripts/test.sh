#!/usr/bin/env bash
# Runs every test erdma-controller has, from a fresh clone on Debian 12 (as root):
#   1. installs the Debian packages (scripts/install-deps.sh), then runs shellcheck on every shell
#      script (test/lint/shellcheck.sh) and checks every C++ file's layout (scripts/format.sh --check);
#   2. builds with -Werror and runs every ctest suite (unit, integration, interop, manifests,
#      images, the alert rules: promtool unit tests and each alert firing in a real Prometheus
#      scraping both programs);
#   3. the real-kernel VM test (SMC-R over Soft-RoCE in one VM);
#   4. builds again with clang, AddressSanitizer and UndefinedBehaviorSanitizer and runs the suites
#      that exercise C++ (unit, fuzz-input replay, the servers under hostile clients) there;
#   5. runs every libFuzzer target for a short, fixed time (test/fuzz/run.sh).
# Between 2 and 3: real Kubernetes (kube-apiserver, scheduler, controller-manager, kubelet) built
# from pinned Go modules once per machine, a one-node cluster, and the user's journey on it; an
# upgrade from the release before, in docs/upgrading.md's order; then containerd 2.x (also from
# its pinned Go module) on the same cluster, handing a pod CDI devices, and the agent's DRA driver there (test/cluster/dra.sh); then the same cluster with two VM worker
# nodes on a kernel with SMC (test/cluster/vm-nodes.sh): the seed Deployment shows SMCR, through
# faults and a drain, beside hostNetwork and veth pods held against the agent's prediction, SMC-D
# between pods of one node, and the DRA driver on the nodes' real cards.
# Steps 4 and 5 run in a background lane at the lowest CPU priority (nice 19) beside steps 2 and 3:
# the emulated VM rarely keeps both cores busy, and the lane takes only what the foreground leaves.
# The lane's output is printed when it ends.
# The whole run is bounded: TEST_BUDGET seconds (default 3600, 60 minutes) in total, and every
# stage is killed at its own cap or when the budget runs out, whichever comes first; each stage
# prints its time, and the last line gives the total.
# FUZZ_SECONDS (default 20) sets the time per fuzz target.
set -euo pipefail
cd "$(dirname "$0")/.."
# Golden files are compared, never rewritten, when this script runs.
unset UPDATE_GOLDEN

budget=${TEST_BUDGET:-3600}
start=$SECONDS

stage() {  # NAME CAP_SECONDS CMD...
  local name=$1 cap=$2
  shift 2
  local left=$((budget - (SECONDS - start)))
  if [ "$left" -le 10 ]; then
    echo "<== $name: not started, the ${budget} s budget is used up" >&2
    exit 1
  fi
  [ "$cap" -gt "$left" ] && cap=$left
  echo "==> $name (at most $cap s)"
  local t0=$SECONDS rc=0
  timeout -k 10 "$cap" "$@" || rc=$?
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -eq 124 ] && echo "<== $name: killed after $cap s" >&2
    echo "<== $name: FAILED (exit $rc, $((SECONDS - t0)) s)" >&2
    exit 1
  fi
  echo "<== $name: ok ($((SECONDS - t0)) s)"
}

stage "install packages" 900 scripts/install-deps.sh
# A few seconds, right after the install that brings shellcheck: a finding fails the run before
# the long stages start.
stage "shellcheck (every shell script)" 120 test/lint/shellcheck.sh
# The same for the C++ layout (clang-format 14, .clang-format): a second or two on a laid-out tree;
# a file that differs fails the run, named, with the command that rewrites it.
stage "clang-format (every C++ file)" 120 scripts/format.sh --check
stage "build" 1200 scripts/build.sh build -DWERROR=ON
# helm from its pinned Go module (test/helm), cached outside the repository like Kubernetes below:
# the chart's tests and the cluster journey use it.
stage "helm from its pinned Go module (cached)" 900 test/helm/build-helm.sh
# The sanitizer tree doubles as the fuzz tree. -O0 with line tables only keeps its build short;
# fuzz runs here are brief checks, longer campaigns use test/fuzz/run.sh's optimized default.
# shellcheck disable=SC2054  # the comma belongs to -DSANITIZE=address,undefined
sanitize=(-DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DSANITIZE=address,undefined
  -DERDMA_FUZZ=ON -DERDMA_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_C_FLAGS_DEBUG=-g1)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
lane_log=$(mktemp "${TMPDIR:-/tmp}/erdma-test-lane.XXXXXX")
lane_pid=
stop_lane() {  # the lane's shell first (so it starts nothing more), then its running stage
  [ -n "$lane_pid" ] || return 0
  local kids
  kids=$(pgrep -P "$lane_pid" || true)
  kill -KILL "$lane_pid" 2>/dev/null || true
  # timeout(1) passes TERM on to the stage's whole process group.
  # shellcheck disable=SC2086  # one argument per PID
  [ -z "$kids" ] || kill -TERM $kids 2>/dev/null || true
  wait "$lane_pid" 2>/dev/null || true
  lane_pid=
}
trap 'stop_lane; rm -f "$lane_log"' EXIT
echo "==> sanitizer lane (build, tests, fuzz) started in the background at nice 19; its output follows"
(
  renice -n 19 -p "$BASHPID" >/dev/null
  stage "sanitizer build (clang, ASan+UBSan)" 1500 env BUILD_TYPE=Debug scripts/build.sh build-sanitize "${sanitize[@]}"
  # monitoring: the rules and Prometheus are what those suites test, not the C++ (a minute saved).
  stage "tests under ASan+UBSan" 1200 ctest --test-dir build-sanitize --output-on-failure --no-tests=error -j2 --timeout 600 \
    -LE 'deploy|interop|monitoring|needs-|node'
  stage "fuzz (${FUZZ_SECONDS:-20} s per target)" 600 env FUZZ_BUILD_DIR=build-sanitize FUZZ_BUILD_TYPE=Debug \
    test/fuzz/run.sh "${FUZZ_SECONDS:-20}"
) </dev/null >"$lane_log" 2>&1 &
lane_pid=$!
lane_t0=$SECONDS

# Real Kubernetes (test/cluster/README.md): the pinned release and etcd built from Go modules once
# per machine into a cache outside the repository (about 12 minutes cold, then nothing). Built
# before ctest: the manifest and chart tests render with its kubectl when PATH has only Debian's
# 1.20, whose kustomize cannot render the overlays.
stage "Kubernetes and etcd from pinned Go modules (cached)" 2400 test/cluster/build-k8s.sh
stage "unit and integration tests" 1200 ctest --test-dir build --output-on-failure --no-tests=error -j2 --timeout 600
# A one-node cluster on this machine (scripts/cluster.sh), a pod on it and nothing left after
# `down`, then the user's journey with the product installed as README.md says.
stage "real cluster: smoke test, then the user's journey" 900 \
  bash -c 'test/cluster/smoke.sh && test/cluster/journey.sh build'
# docs/upgrading.md followed on the cluster: 0.1.0 built from its commit (once per machine, about
# 3 minutes cold, then cached), installed with its own manifests, upgraded to this tree in the
# page's order while pods are being created (about 70 s).
stage "real cluster: upgrade from 0.1.0, in docs/upgrading.md's order, under a create loop" 900 \
  test/cluster/upgrade.sh build
# Admission without a webhook (docs/admission.md): the MutatingAdmissionPolicy of
# manifests/admission-policy and erdma-webhook, the webhook's golden pods through both on the real
# kube-apiserver, compared field by field (about 45 s).
stage "real cluster: the SMC-R admission policy against the webhook" 300 test/cluster/admission-policy.sh build
# The runtime DRA needs (docs/dra-runtime.md): containerd 2.x with CDI, built once per machine
# (about 3 minutes cold, then nothing), and the cluster again with it: a pod gets a CDI spec's env,
# device nodes and mount (about 30 s).
stage "containerd with CDI from its pinned Go module (cached)" 900 test/cluster/build-containerd.sh
stage "real cluster with containerd 2.x: CDI devices in a pod" 300 test/cluster/cdi.sh
# The DRA driver on that cluster, installed through manifests/dra (docs/dra.md): slices, claims
# prepared through CDI, aliyun/erdma served by DRA, agent restart, repair, unprepare.
stage "real cluster with containerd 2.x: the DRA driver" 900 test/cluster/dra.sh build
# SMC-R between ordinary pods (test/cluster/README.md, "VM worker nodes"): the VM nodes' kernel,
# Debian's linux-source-7.3 with SMC, DIBS and per-netns Soft-RoCE built in, once per machine
# (about 15 minutes cold on 2 cores, then nothing); then the cluster with two VM worker nodes
# running the real kubelet, the product installed, the seed Deployment on the pod network showing
# SMCR in smcss inside its pod, and SMCD between two pods of one node.
stage "VM worker nodes' kernel from Debian's linux-source-7.3 (cached)" 1800 test/vm/build-kernel.sh
stage "real cluster with VM worker nodes: SMC-R between ordinary pods" 1500 test/cluster/vm-nodes.sh build
# Real kernel (Debian's bookworm-backports kernel under qemu): SMC pnet/UEID netlink and SMC-R over
# Soft-RoCE through the preload library. Bounded inside too (600 s, kernel download included).
stage "VM test (SMC-R over Soft-RoCE, real kernel)" 660 test/vm/run.sh build

echo "==> waiting for the sanitizer lane ($((SECONDS - lane_t0)) s since it started)"
wait_t0=$SECONDS lane_rc=0
wait "$lane_pid" || lane_rc=$?
lane_pid=
sed 's/^/  [lane] /' "$lane_log"
if [ "$lane_rc" -ne 0 ]; then
  echo "<== sanitizer lane: FAILED after $((SECONDS - lane_t0)) s (see its output above)" >&2
  exit 1
fi
echo "<== sanitizer lane: ok ($((SECONDS - lane_t0)) s in all, of which $((SECONDS - wait_t0)) s after the VM test)"

echo "all tests passed in $((SECONDS - start)) s"
