#!/usr/bin/env bash
# Lays out the C++ sources with clang-format 14 and the repository's .clang-format.
#   scripts/format.sh           rewrite the files that differ, in place, and name them
#   scripts/format.sh --check   change nothing: name the files that differ and exit 1 (scripts/test.sh)
# The files are the tracked *.cpp, *.hpp, *.h and *.cc; agent/preload's C library keeps its own
# style (its .clang-format turns formatting off).
# Needs clang-format 14 exactly: Debian 12's package clang-format-14 (scripts/install-deps.sh
# installs it). Other versions lay out the same code differently, so a tree formatted by one fails
# the check of another. CLANG_FORMAT names another binary, which must also be version 14.
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
case ${1:-} in
  "") ;;
  --check) check=1 ;;
  -h | --help)
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "format.sh: unknown argument \"$1\" (--check, or nothing to rewrite the files)" >&2
    exit 2
    ;;
esac

want=14
cf=${CLANG_FORMAT:-clang-format-$want}
if ! command -v "$cf" >/dev/null 2>&1; then
  echo "format.sh: $cf is missing; the layout is clang-format $want's (Debian 12: apt-get install" \
    "clang-format-$want; scripts/install-deps.sh installs it)" >&2
  exit 1
fi
version=$("$cf" --version | sed -n 1p)
if [[ ! $version =~ clang-format\ version\ $want\. ]]; then
  echo "format.sh: $cf is \"$version\", not clang-format $want (apt-get install clang-format-$want):" \
    "other versions lay the code out differently" >&2
  exit 1
fi

t0=$SECONDS
list=$(git ls-files '*.cpp' '*.hpp' '*.h' '*.cc') || {
  echo "format.sh: cannot list the repository's files with git" >&2
  exit 1
}
files=()
while IFS= read -r f; do [ -n "$f" ] && files+=("$f"); done <<<"$list"
[ ${#files[@]} -gt 0 ] || { echo "format.sh: git lists no C++ file" >&2; exit 1; }

# One clang-format process for the whole tree answers "is everything laid out?" in about a second.
# Only when it says no is each file compared on its own, to name the ones that differ.
differ=()
if ! "$cf" --style=file --dry-run --Werror "${files[@]}" >/dev/null 2>&1; then
  for f in "${files[@]}"; do
    if "$cf" --style=file "$f" | cmp -s - "$f"; then continue; fi
    # A difference, or clang-format itself failed (pipefail): run it again to tell which.
    "$cf" --style=file "$f" >/dev/null || { echo "format.sh: $cf failed on $f" >&2; exit 1; }
    differ+=("$f")
  done
fi

summary="clang-format ${version##*version }: ${#files[@]} files, ${#differ[@]} differ"
if [ ${#differ[@]} -eq 0 ]; then
  echo "$summary, in $((SECONDS - t0)) s"
  exit 0
fi
if [ "$check" -eq 1 ]; then
  printf '  %s\n' "${differ[@]}"
  echo "$summary, in $((SECONDS - t0)) s"
  echo "format.sh: FAILED; scripts/format.sh rewrites these files (then review the change and commit it)" >&2
  exit 1
fi
"$cf" --style=file -i "${differ[@]}"
printf '  %s\n' "${differ[@]}"
echo "$summary: rewritten, in $((SECONDS - t0)) s"
