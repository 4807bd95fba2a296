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
  if [ "$(basename "$b")" = ddp_bench ]; then
    # A plain program run as both ranks of mpirun (docs/performance.md, "Distributed training").
    if ! command -v mpirun >/dev/null; then echo "skipped: mpirun not found"; continue; fi
    root=(); [ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)
    OMP_NUM_THREADS=1 mpirun -np 2 --oversubscribe "${root[@]}" "$b" || status=1
    continue
  fi
  "$b" --benchmark_min_time=0.5 "$@" || status=1
done
# The Python module's full-resolution curve (tidemark._native) against the command's JSON.
echo "== python curve (bench/python/curve_bench.py)"
python3 "$(dirname "$0")/../bench/python/curve_bench.py" --build "$build" || status=1
# `tidemark predict` on the real sweeps: predicted against true peaks, beside the naive
# baselines, with each prediction's time (docs/predict.md).
echo "== predict on real sweeps (scripts/score-predictions.py)"
python3 "$(dirname "$0")/score-predictions.py" "$(dirname "$0")/../tests/data/pytorch/sweeps" \
  --tidemark "$build/cli/tidemark" --work "$build/bench-sweeps" --jobs 2 || status=1
# `tidemark estimate`: a 7B training step's time and memory, then all 30 real cases scored
# (docs/estimate.md); both need PyTorch (scripts/torch-venv.sh) and say so when it is missing.
torch_python=$("$(dirname "$0")/torch-venv.sh" || true)
echo "== estimate: 7B training step (bench/estimate/run.py)"
python3 "$(dirname "$0")/../bench/estimate/run.py" --tidemark "$build/cli/tidemark" \
  --python "$torch_python"; rc=$?; [ $rc -eq 0 ] || [ $rc -eq 77 ] || status=1
echo "== estimate: the real cases (scripts/score-estimates.py)"
python3 "$(dirname "$0")/score-estimates.py" --tidemark "$build/cli/tidemark" \
  --python "$torch_python" --work "$build/bench-estimate-cases" \
  --ceilings "$(dirname "$0")/../tests/data/pytorch/estimate/ceilings.json"; rc=$?
[ $rc -eq 0 ] || [ $rc -eq 77 ] || status=1
exit $status
