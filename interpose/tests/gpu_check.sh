#!/usr/bin/env bash
# The GPU half of interpose's tests (docs/interpose.md). Exit 77 (skip) without a GPU; about
# 2 minutes on an H200. Checks (gpu_check.py, one line each):
#   1. gpu_sample.cu, a plain CUDA program, recorded by `tidemark record`: exact rows; stacks of
#      the activity events name the sample's functions (Callback API call sites); cuMemMap.
#   2. torch_train.py (skipped with a message without PyTorch): the recorded reserved peak
#      against torch.cuda.max_memory_reserved(); events on the training thread with stacks;
#      the overhead of recording (training-loop wall time, target <= 1.10x).
#   3. The same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True and a memory snapshot:
#      what was seen of the mappings, the reserved peak, and `tidemark import --onto`.
#   interpose/tests/gpu_check.sh [BUILD_DIR]      (default: build)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
tidemark=$build/cli/tidemark
if [[ ! -e /dev/nvidiactl ]] || ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no GPU, skipped"; exit 77
fi
[[ -x $tidemark ]] || { echo "gpu_check: $tidemark not built"; exit 1; }
# CUDA's home: $CUDA_HOME, else above the first nvcc on PATH with links and wrapper scripts
# seen through, else /usr/local/cuda (tests/gpu/cuda_home.sh).
cuda_home=$("$here/../../tests/gpu/cuda_home.sh") ||
  { echo "gpu_check: FAIL no CUDA toolkit found (set CUDA_HOME)"; exit 1; }
nvcc=$cuda_home/bin/nvcc
echo "gpu_check: CUDA toolkit $cuda_home"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=()

# Runs `tidemark record` with the arguments; its stdout to $1, stderr shown as tidemark's lines.
record() {
  local out=$1; shift
  local status=0
  "$tidemark" record "$@" > "$out" 2> "$work/stderr" || status=$?
  grep -v '^tidemark: \(recorded\|next:\)' "$work/stderr" | tail -n 5 || true
  if grep -q "not recorded" "$work/stderr"; then echo "FAIL CUPTI did not start"; return 1; fi
  [[ $status == 0 ]] || { echo "FAIL exit status $status"; return 1; }
}

echo "== gpu_sample (plain CUDA)"
"$nvcc" -O1 -g -o "$work/gpu_sample" "$here/gpu_sample.cu" -L"$cuda_home/lib64/stubs" -lcuda
if ! "$work/gpu_sample" > /dev/null; then
  echo "FAIL gpu_sample fails without tidemark"; failed+=(sample)
elif ! record "$work/sample.out" --stacks 24 -o "$work/gpu.db" -- "$work/gpu_sample" ||
     ! python3 "$here/gpu_check.py" sample "$work/gpu.db" "$work/sample.out"; then
  failed+=(sample)
fi

if ! python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "== pytorch: skipped: python3 -c 'import torch' failed or torch sees no GPU (reserved peak, overhead, expandable segments and import --onto not checked)"
else
  train=(python3 "$here/torch_train.py" --steps 1000)
  echo "== pytorch ($(python3 -c 'import torch; print(torch.__version__)'))"
  "${train[@]}" > "$work/plain1.json"
  "${train[@]}" > "$work/plain2.json"
  if ! record "$work/run.json" --stacks 16 -o "$work/torch.db" -- "${train[@]}" ||
     ! python3 "$here/gpu_check.py" torch "$work/torch.db" "$work/run.json" "$work/plain1.json" "$work/plain2.json"; then
    failed+=(pytorch)
  fi
  # cuMemCreate/cuMemMap may be refused under the machine's sandbox: a failure here is said as
  # such, and the lineup check then uses a snapshot of the default allocator instead.
  echo "== pytorch, expandable segments, snapshot lined up"
  snap=exp
  if ! PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
       record "$work/exp.json" --stacks 16 -o "$work/exp.db" -- "${train[@]}" --snapshot "$work/exp.pickle" ||
     ! python3 "$here/gpu_check.py" expandable "$work/exp.db" "$work/exp.json"; then
    failed+=(expandable)
    echo "WARN expandable segments failed (cuMemCreate/cuMemMap refused by this machine's sandbox?); the run goes on"
    snap=plain
    record "$work/plain.json" --stacks 16 -o "$work/plain.db" -- "${train[@]}" --steps 100 \
      --snapshot "$work/plain.pickle" || true
  fi
  if ! "$tidemark" import "$work/$snap.pickle" --onto "$work/$snap.db" -o "$work/merged.db" ||
     ! python3 "$here/gpu_check.py" lineup "$work/merged.db"; then
    failed+=(lineup)
  fi
fi

if (( ${#failed[@]} )); then echo "gpu_check: FAIL (${failed[*]})"; exit 1; fi
echo "gpu_check: PASS"
