#!/usr/bin/env bash
# The demo: installs the Debian packages, builds, then shows what erdma-webhook does to the
# example workloads in examples/ (the JSON Patch and the warnings kubectl would print).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build
bin=build/webhook/erdma-webhook
for f in examples/*.yaml; do
  echo
  echo "######## $f"
  # Exit status 1 means the webhook would refuse a pod; the demo shows that too.
  "$bin" mutate -f "$f" || [ $? -eq 1 ]
done
