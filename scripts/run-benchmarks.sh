#!/usr/bin/env bash
# Runs every benchmark in bench/ and prints their ratio tables. Exit status 1 when a target
# is missed. Usage: scripts/run-benchmarks.sh [BUILD_DIR] [benchmark args...]
set -uo pipefail
build=${1:-build}
shift || true
status=0
for b in "$build"/bench/*_bench; do
  echo "== $(basename "$b")"
  "$b" --benchmark_min_time=0.5 "$@" || status=1
done
exit $status
