#!/usr/bin/env bash
# Checks that a change left what users read unchanged: runs `summary`, `diagnose --json` and
# `export` (Chrome trace JSON and CSV) of two builds of the CLI on every PyTorch snapshot of a directory (the real ones in
# tests/data/pytorch by default) and compares the outputs byte for byte.
#
#   scripts/same-outputs.sh BEFORE_CLI AFTER_CLI [DIR]
#
# Build BEFORE_CLI from the commit before the change (a copy of build/cli/tidemark made then),
# AFTER_CLI from the change. Exit 0 when every output is identical, 1 naming each that is not,
# 2 on bad arguments.
set -euo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: same-outputs.sh BEFORE_CLI AFTER_CLI [DIR]" >&2
  exit 2
fi
before=$1 after=$2
dir=${3:-"$(dirname "$0")/../tests/data/pytorch"}
for cli in "$before" "$after"; do
  [ -x "$cli" ] || { echo "same-outputs.sh: $cli: not an executable" >&2; exit 2; }
done
[ -d "$dir" ] || { echo "same-outputs.sh: $dir: not a directory" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
differ=0 compared=0
shopt -s nullglob
for snapshot in "$dir"/*.pickle "$dir"/*.pkl; do
  name=$(basename "$snapshot")
  for command in "summary" "diagnose --json" "export --format chrome -o -" \
    "export --format csv -o -"; do
    for side in before after; do
      cli=$before
      [ $side = after ] && cli=$after
      # The trace a snapshot is read through is temporary: outputs name the snapshot.
      # shellcheck disable=SC2086
      "$cli" $command "$snapshot" >"$work/$side.out" 2>"$work/$side.err" || true
    done
    compared=$((compared + 1))
    if ! cmp -s "$work/before.out" "$work/after.out" || ! cmp -s "$work/before.err" "$work/after.err"; then
      echo "differs: $command $name" >&2
      diff <(cat "$work/before.out" "$work/before.err") <(cat "$work/after.out" "$work/after.err") |
        head -20 >&2 || true
      differ=$((differ + 1))
    fi
  done
done
if [ $compared -eq 0 ]; then
  echo "same-outputs.sh: $dir holds no snapshot (*.pickle, *.pkl)" >&2
  exit 2
fi
echo "same-outputs.sh: $compared outputs compared, $differ differ" >&2
[ $differ -eq 0 ]
