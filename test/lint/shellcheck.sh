#!/usr/bin/env bash
# Runs shellcheck on every shell script in the repository and fails on any finding, at its default
# severity (style, so every level counts). The scripts are the tracked files named *.sh and the
# tracked files whose first line is a sh or bash shebang (such as .ci/run and certs/erdma-certs).
# Without shellcheck: a skip, but under CI=true a failure (scripts/install-deps.sh installs it).
# A warning a script means to cause is disabled on its line, with the reason beside it:
#   # shellcheck disable=SC2086  # one argument per PID
set -euo pipefail
cd "$(dirname "$0")/../.."
CHECKS_NAME=shellcheck
# shellcheck source=test/cluster/checks.sh
. test/cluster/checks.sh
command -v shellcheck >/dev/null 2>&1 || skip_or_fail "shellcheck is missing (scripts/install-deps.sh installs it)"

t0=$SECONDS
files=$(git ls-files) || { echo "shellcheck: cannot list the repository's files with git" >&2; exit 1; }
scripts=()
shebang='^#!.*[/ ](ba)?sh( |$)'  # /bin/sh, /usr/bin/env bash, /bin/busybox sh; not python3
while IFS= read -r f; do
  case $f in
    *.sh) scripts+=("$f") ;;
    *)
      [ -f "$f" ] || continue
      first=
      IFS= read -r first <"$f" || true
      if [[ $first =~ $shebang ]]; then scripts+=("$f"); fi
      ;;
  esac
done <<<"$files"

# -x follows sourced files. shellcheck drops a leading $VAR/ from a sourced path and looks for the
# rest from the current directory, the repository root (`. "$SRC/test/cluster/lib.sh"`), then
# from the sourcing script's directory (SCRIPTDIR: `# shellcheck source=go-build-lib.sh`).
rc=0
out=$(shellcheck -x --source-path=SCRIPTDIR --severity=style --format=gcc "${scripts[@]}") || rc=$?
findings=0
[ -z "$out" ] || { printf '%s\n' "$out"; findings=$(printf '%s\n' "$out" | grep -c .); }
echo "shellcheck $(shellcheck --version | sed -n 's/^version: //p'): ${#scripts[@]} scripts, $findings findings in $((SECONDS - t0)) s"
if [ "$rc" -ne 0 ] || [ "$findings" -ne 0 ]; then
  echo "shellcheck: FAILED (exit $rc); each code is explained at https://www.shellcheck.net/wiki/SC<code>" >&2
  exit 1
fi
