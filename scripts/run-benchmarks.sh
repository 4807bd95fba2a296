#!/usr/bin/env bash
# Runs every benchmark in bench/ and prints their ratio tables. Exit status 1 when a target
# is missed. Usage: scripts/run-benchmarks.sh [BUILD_DIR] [benchmark args...]
set -uo pipefail
build=${1:-build}
shift || true
# OpenBLAS's slowest kernels on a CPU it does not know would skew every ratio against BLAS.
coretype=$("$(dirname "$0")/openblas-coretype.sh" || true)
if [ -n "$coretype" ]; then
  export OPENBLAS_CORETYPE=$coretype
  echo "OpenBLAS does not know this CPU: OPENBLAS_CORETYPE=$coretype" >&2
fi
status=0
for b in "$build"/bench/*_bench; do
  echo "== $(basename "$b")"
  "$b" --benchmark_min_time=0.5 "$@" || status=1
done
exit $status
