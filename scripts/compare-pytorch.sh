#!/usr/bin/env bash
# tensorlib vs PyTorch on the CPU: one training step of the Fashion-MNIST MLP and CNN (batch
# 64, Adam), same models, batch and thread count, measured side by side in this run.
# PyTorch is a development aid here, never a dependency: point PYTHON at an interpreter that
# has it (e.g. a throwaway venv: python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip
# install torch). Exit 77 when it is missing, 1 when a ratio misses its target (<= 1.5x).
# Usage: scripts/compare-pytorch.sh [BUILD_DIR] [THREADS]
set -euo pipefail
build=${1:-build}
threads=${2:-$(nproc)}
python=${PYTHON:-python3}
here=$(cd "$(dirname "$0")/.." && pwd)

if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "compare-pytorch: $python has no torch; set PYTHON to an interpreter with PyTorch" >&2
  exit 77
fi
bench="$build/bench/train_step_bench"
[ -x "$bench" ] || { echo "compare-pytorch: $bench not built (make build)" >&2; exit 2; }

out=$(mktemp)
trap 'rm -f "$out"' EXIT
OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads "$bench" \
  --benchmark_filter='BM_(Mlp|Cnn)Step' --benchmark_out="$out" --benchmark_out_format=json \
  >/dev/null 2>&1
torch_json=$("$python" "$here/bench/pytorch/train_step.py" --threads "$threads")

"$python" - "$out" "$torch_json" "$threads" <<'PY'
import json, sys
tl = json.load(open(sys.argv[1]))
pt = json.loads(sys.argv[2])
threads = sys.argv[3]
ms = {}
for b in tl["benchmarks"]:
    if b.get("aggregate_name") == "median":
        ms[b["run_name"].split("/")[0]] = b["real_time"]  # unit: ms
failed = False
print(f"training step, batch 64, {threads} threads; PyTorch {pt['torch']}")
print(f"{'model':<6} {'tensorlib':>12} {'PyTorch':>12} {'ratio':>8}  target")
for model, name in (("mlp", "BM_MlpStep"), ("cnn", "BM_CnnStep")):
    t, p = ms[name], pt[f"{model}_step_ms"]
    ok = t / p <= 1.5
    failed |= not ok
    print(f"{model:<6} {t:>9.3f} ms {p:>9.3f} ms {t / p:>7.2f}x  <= 1.5x {'ok' if ok else 'MISSED'}")
sys.exit(1 if failed else 0)
PY
