#!/usr/bin/env bash
# Configures (Ninja, ccache) and builds one tree.
# Usage: scripts/build.sh [BUILD_DIR] [extra cmake -D args...]
#   BUILD_DIR defaults to ./build. BUILD_TYPE (env) defaults to RelWithDebInfo.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
# Bounded: a full build from nothing takes a few minutes on 2 cores.
timeout 1800 cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
# Ninja defaults to cores+2 jobs; on the 2-core machines this project targets that thrashes.
timeout 2400 cmake --build "$dir" --parallel "${BUILD_JOBS:-$(nproc)}"
