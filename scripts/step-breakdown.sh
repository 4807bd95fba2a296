#!/usr/bin/env bash
# Where one training step of the Fashion-MNIST MLP and CNN (batch 64, Adam) spends its time,
# by kind of work, tensorlib (perf's call-chain samples over bench/train_step_bench) next to
# PyTorch (torch.profiler): bench/step_breakdown.py, whose table docs/performance.md shows.
# perf (Debian's linux-perf) and PyTorch are development aids, never dependencies: without
# perf the script exits 77; without PYTHON (an interpreter with torch, as for
# scripts/compare-pytorch.sh) it prints tensorlib's column alone.
# Usage: scripts/step-breakdown.sh [BUILD_DIR] [step_breakdown.py options: --threads N --json]
set -euo pipefail
build=${1:-build}
shift || true
here=$(cd "$(dirname "$0")/.." && pwd)

command -v perf >/dev/null || { echo "step-breakdown: perf not found (apt-get install linux-perf)" >&2; exit 77; }
command -v taskset >/dev/null || { echo "step-breakdown: taskset (util-linux) not found" >&2; exit 2; }
bench="$build/bench/train_step_bench"
[ -x "$bench" ] || { echo "step-breakdown: $bench not built (make build)" >&2; exit 2; }
coretype=$("$(dirname "$0")/openblas-coretype.sh" || true)
if [ -n "$coretype" ]; then
  export OPENBLAS_CORETYPE=$coretype
  echo "OpenBLAS does not know this CPU: OPENBLAS_CORETYPE=$coretype" >&2
fi
args=()
if [ -n "${PYTHON:-}" ]; then
  if "$PYTHON" -c 'import torch' 2>/dev/null; then args+=(--python "$PYTHON"); else
    echo "step-breakdown: $PYTHON has no torch: tensorlib only" >&2; fi
fi
exec python3 "$here/bench/step_breakdown.py" --bench "$bench" "${args[@]}" "$@"
