#!/usr/bin/env bash
# tensorlib vs PyTorch on the CPU: one training step of the Fashion-MNIST MLP and CNN (batch
# 64, Adam), same models, batch, cores and thread count, interleaved (bench/pytorch/compare.py:
# the median of per-pair ratios, with its spread).
# PyTorch is a development aid here, never a dependency: point PYTHON at an interpreter that
# has it (e.g. a throwaway venv: python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip
# install torch --index-url https://download.pytorch.org/whl/cpu). Exit 77 when it is missing,
# 1 when a median ratio misses its target (<= 1.2x).
# Usage: scripts/compare-pytorch.sh [BUILD_DIR] [compare.py options: --threads N --pairs N ...]
set -euo pipefail
build=${1:-build}
shift || true
python=${PYTHON:-python3}
here=$(cd "$(dirname "$0")/.." && pwd)

if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "compare-pytorch: $python has no torch; set PYTHON to an interpreter with PyTorch" >&2
  exit 77
fi
bench="$build/bench/train_step_bench"
[ -x "$bench" ] || { echo "compare-pytorch: $bench not built (make build)" >&2; exit 2; }
# OpenBLAS's slowest kernels on a CPU it does not know would skew every ratio against BLAS.
coretype=$("$(dirname "$0")/openblas-coretype.sh" || true)
if [ -n "$coretype" ]; then
  export OPENBLAS_CORETYPE=$coretype
  echo "OpenBLAS does not know this CPU: OPENBLAS_CORETYPE=$coretype" >&2
fi
command -v taskset >/dev/null || { echo "compare-pytorch: taskset (util-linux) not found" >&2; exit 2; }
exec python3 "$here/bench/pytorch/compare.py" --bench "$bench" --python "$python" "$@"
