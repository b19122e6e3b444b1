#!/usr/bin/env bash
# Builds the project's container images as OCI image-layout archives, with no container engine
# and no registry: the shipped binaries from a CMake build tree plus the Debian packages they run
# with (the runtime lists of scripts/install-deps.sh), taken from this machine's installed packages.
#   images/build-images.sh --build-dir BUILD --out DIR [--registry PREFIX] [IMAGE...]
# IMAGE is erdma-agent, erdma-webhook, pause or workload (default: all four); each becomes
# DIR/IMAGE.tar. Import with `ctr -n k8s.io images import DIR/IMAGE.tar`; see images/README.md.
# Needs bash, gcc (static libc for pause), strip, dpkg and /usr/bin/python3 (images/oci_image.py).
# Same inputs give the same digests; set SOURCE_DATE_EPOCH to date the files (default 0).
# ERDMA_IMAGE_LAYER=tar writes uncompressed layers (for importers on slow, emulated CPUs).
set -euo pipefail
shopt -s inherit_errexit

SOURCE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ALL_IMAGES=(erdma-agent erdma-webhook pause workload)

usage() {
  sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

die() {
  echo "build-images: $*" >&2
  exit 1
}

build_dir="" out_dir="" registry="registry.example.com/erdma-controller" images=()
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) [ $# -ge 2 ] || die "--build-dir needs a directory"; build_dir=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a directory"; out_dir=$2; shift 2 ;;
    --registry) [ $# -ge 2 ] || die "--registry needs a prefix"; registry=${2%/}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "build-images: unknown flag $1" >&2; usage >&2; exit 2 ;;
    *)
      case " ${ALL_IMAGES[*]} " in
        *" $1 "*) images+=("$1") ;;
        *) echo "build-images: unknown image \"$1\" (${ALL_IMAGES[*]})" >&2; exit 2 ;;
      esac
      shift
      ;;
  esac
done
[ -n "$out_dir" ] || { echo "build-images: --out DIR is required" >&2; usage >&2; exit 2; }
[ ${#images[@]} -gt 0 ] || images=("${ALL_IMAGES[@]}")

PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || die "$PYTHON not found; run scripts/install-deps.sh (package python3)"

needs_build=0
for image in "${images[@]}"; do
  t_image=$(date +%s.%N)
  case $image in erdma-agent|erdma-webhook) needs_build=1 ;; esac
done
if [ "$needs_build" -eq 1 ]; then
  [ -n "$build_dir" ] || die "--build-dir BUILD is required for erdma-agent and erdma-webhook (a CMake build tree, e.g. scripts/build.sh build)"
  [ -d "$build_dir" ] || die "build directory $build_dir does not exist; configure and build it: scripts/build.sh $build_dir"
  build_dir=$(cd "$build_dir" && pwd)
fi

# The version the manifests name: the build tree's generated header, else CMakeLists.txt.
version=""
if [ -n "$build_dir" ] && [ -f "$build_dir/generated/erdma/version.hpp" ]; then
  version=$(sed -n 's/.*kVersion = "\([^"]*\)".*/\1/p' "$build_dir/generated/erdma/version.hpp")
fi
if [ -z "$version" ]; then
  # ERDMA_VERSION: the project's numbers, then "-" and the pre-release label unless it is "".
  numbers=$(sed -n 's/^project(erdma-controller VERSION \([0-9][0-9.]*\).*/\1/p' "$SOURCE_DIR/CMakeLists.txt")
  label=$(sed -n 's/^set(ERDMA_VERSION_PRERELEASE "\([^"]*\)")$/\1/p' "$SOURCE_DIR/CMakeLists.txt")
  if [ -n "$numbers" ] && grep -q '^set(ERDMA_VERSION_PRERELEASE "' "$SOURCE_DIR/CMakeLists.txt"; then
    version=$numbers${label:+-$label}
  fi
fi
[ -n "$version" ] || die "no project version in $SOURCE_DIR/CMakeLists.txt (project(... VERSION x.y.z) and set(ERDMA_VERSION_PRERELEASE ...))"

mkdir -p "$out_dir" 2>/dev/null || die "cannot create the output directory $out_dir (--out)"
out_dir=$(cd "$out_dir" && pwd)
work=$(mktemp -d "$out_dir/.build-images.XXXXXX")
trap 'rm -rf "$work"' EXIT

# A build output, or an error naming the CMake target that makes it.
build_output() {
  local rel=$1 target=$2
  [ -f "$build_dir/$rel" ] || die "$build_dir/$rel is missing; build it: cmake --build $build_dir --target $target"
  echo "$build_dir/$rel"
}

# Shipped binaries lose their debug sections, as in the Dockerfiles' build stage.
stripped() {
  local src=$1 name
  name=$(basename "$src")
  command -v strip >/dev/null || die "strip not found; run scripts/install-deps.sh (package binutils)"
  strip --strip-debug -o "$work/$name" "$src"
  echo "$work/$name"
}

compile() {
  local out=$1
  shift
  command -v gcc >/dev/null || die "gcc not found; run scripts/install-deps.sh (package g++)"
  gcc "$@" -o "$out" || die "gcc $* failed"
}

runtime_packages() {
  local flags=() p
  for p in $("$SOURCE_DIR/scripts/install-deps.sh" --print "$1"); do
    flags+=(--package "$p")
  done
  printf '%s\n' "${flags[@]}"
}

# /etc files every image with a userland gets: root, and for the webhook its numeric user.
cat > "$work/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
nonroot:x:65532:65532:nonroot:/nonexistent:/usr/sbin/nologin
EOF
cat > "$work/group" <<'EOF'
root:x:0:
nogroup:x:65534:
nonroot:x:65532:
EOF
cat > "$work/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF
base_files=(--file "$work/passwd=/etc/passwd" --file "$work/group=/etc/group"
            --file "$work/nsswitch.conf=/etc/nsswitch.conf" --dir /tmp:1777 --dir /root:700)
oci() { "$PYTHON" "$SOURCE_DIR/images/oci_image.py" --since "$t_image" "$@"; }
labels() {
  echo "--label=org.opencontainers.image.title=$1"
  echo "--label=org.opencontainers.image.description=$2"
  echo "--label=org.opencontainers.image.version=$3"
}

t_all=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
for image in "${images[@]}"; do
  t_image=$(date +%s.%N)
  case $image in
    erdma-agent)
      agent=$(build_output agent/erdma-agent erdma-agent)
      preload=$(build_output agent/preload/libsmc-preload.so smc-preload)
      cdi_hook=$(build_output agent/cdihook/erdma-cdi-hook erdma-cdi-hook)
      agent=$(stripped "$agent")
      preload=$(stripped "$preload")
      cdi_hook=$(stripped "$cdi_hook")
      mapfile -t pkgs < <(runtime_packages runtime-agent)
      mapfile -t lbl < <(labels erdma-agent \
        "eRDMA node agent: device plugin for aliyun/erdma, SMC-R set-up, libsmc-preload.so" "$version")
      oci --out "$out_dir/erdma-agent.tar" --ref "$registry/erdma-agent:$version" --merged-usr \
        "${pkgs[@]}" "${base_files[@]}" "${lbl[@]}" \
        --file "$agent=/usr/bin/erdma-agent" \
        --file "$preload=/usr/lib/erdma-controller/libsmc-preload.so" \
        --file "$cdi_hook=/usr/lib/erdma-controller/erdma-cdi-hook" \
        --dlopen-dir /usr/lib/x86_64-linux-gnu/libibverbs \
        --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --entrypoint '["/usr/bin/erdma-agent"]' \
        --cmd '["run","--config","/etc/erdma-agent/config.yaml"]' \
        --expose 9467/tcp
      ;;
    erdma-webhook)
      # The Deployment's preStop hook runs /bin/sleep (manifests/base/webhook-deployment.yaml).
      webhook=$(build_output webhook/erdma-webhook erdma-webhook)
      webhook=$(stripped "$webhook")
      mapfile -t pkgs < <(runtime_packages runtime-webhook)
      mapfile -t lbl < <(labels erdma-webhook \
        "Mutating admission webhook: eRDMA (NCCL) and SMC-R for Kubernetes pods" "$version")
      oci --out "$out_dir/erdma-webhook.tar" --ref "$registry/erdma-webhook:$version" --merged-usr \
        "${pkgs[@]}" "${base_files[@]}" "${lbl[@]}" \
        --file "$webhook=/usr/bin/erdma-webhook" \
        --from-package coreutils=/bin/sleep \
        --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --entrypoint '["/usr/bin/erdma-webhook"]' --cmd '["serve","--help"]' \
        --user 65532:65532 --expose 8443/tcp --expose 8080/tcp
      ;;
    pause)
      compile "$work/pause" -static -O2 -s -Wall -Wextra "$SOURCE_DIR/images/pause/pause.c"
      oci --out "$out_dir/pause.tar" --ref "localhost/erdma-controller/pause:1" \
        --file "$work/pause=/pause" --entrypoint '["/pause"]' --env PATH=/ \
        --label=org.opencontainers.image.title=pause \
        --label=org.opencontainers.image.description="Pod sandbox init: waits, reaps children, exits on SIGTERM"
      ;;
    workload)
      compile "$work/tcp-bulk" -O2 -s -Wall -Wextra "$SOURCE_DIR/images/workload/tcp_bulk.c"
      compile "$work/smcss" -O2 -s -Wall -Wextra "$SOURCE_DIR/images/workload/smcss.c"
      links=()
      for tool in sh ls cat env sleep echo ps grep ip id hostname stat wc sha256sum; do
        links+=(--symlink "/usr/bin/$tool=busybox")
      done
      oci --out "$out_dir/workload.tar" --ref "localhost/erdma-controller/workload:1" --merged-usr \
        --package busybox-static --package libc6 "${base_files[@]}" "${links[@]}" \
        --package ibverbs-utils --package libibverbs1 --package ibverbs-providers \
        --package libnl-3-200 --package libnl-route-3-200 \
        --file "$work/tcp-bulk=/usr/bin/tcp-bulk" --file "$work/smcss=/usr/bin/smcss" \
        --env PATH=/usr/bin:/bin --entrypoint '["/bin/sh"]' \
        --label=org.opencontainers.image.title=workload \
        --label=org.opencontainers.image.description="Test workload: busybox, tcp-bulk (dynamic, for LD_PRELOAD), smcss and rdma-core's verbs tools"
      ;;
  esac
done
echo "build-images: ${#images[@]} image(s) in $out_dir, $(elapsed "$t_all") s"
