#!/usr/bin/env bash
# Prints the CUDA toolkit's home (the folder holding bin/nvcc and include/cuda_runtime.h), for
# tests/gpu/run.sh and interpose/tests/gpu_check.sh. In order: $CUDA_HOME; the folder above the
# first nvcc on PATH ($NVCC first), links resolved; nvcc's own idea of it (`nvcc --dryrun`
# prints TOP=..., which also sees through wrapper scripts such as `exec /opt/cuda/bin/nvcc "$@"`
# in /usr/local/bin); /usr/local/cuda. Exits 1 with a message on stderr when none holds a toolkit.
set -euo pipefail

tried=()
try() {
  local d=$1
  [[ -n $d ]] || return 1
  d=$(cd "$d" 2>/dev/null && pwd -P) || { tried+=("$1"); return 1; }
  if [[ -x $d/bin/nvcc ]] && { [[ -e $d/include/cuda_runtime.h ]] ||
       compgen -G "$d/targets/*/include/cuda_runtime.h" >/dev/null; }; then
    echo "$d"; exit 0
  fi
  tried+=("$d")
  return 1
}

try "${CUDA_HOME:-}" || true
nvcc=${NVCC:-$(command -v nvcc || true)}
if [[ -n $nvcc ]]; then
  try "$(dirname "$(readlink -f "$nvcc")")/.." || true
  top=$("$nvcc" --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -1) || true
  try "$top" || true
fi
try /usr/local/cuda || true
echo "cuda_home.sh: no CUDA toolkit found (tried: ${tried[*]:-nothing}; nvcc on PATH: ${nvcc:-none});" \
  "set CUDA_HOME to the folder holding bin/nvcc" >&2
exit 1
