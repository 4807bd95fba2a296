#!/usr/bin/env bash
# Prints the OPENBLAS_CORETYPE to set when OpenBLAS does not know this CPU, nothing otherwise.
#
# Debian 12's OpenBLAS (0.3.21) picks its kernels from the CPU model. A model it does not know
# -- Sapphire and Emerald Rapids, which cloud VMs report as a plain "Intel(R) Xeon(R)
# Processor" -- falls back to its oldest x86-64 kernels ("Prescott", SSE3): GEMMs about 4x
# slower on an AVX-512 machine (docs/performance.md, "OpenBLAS on CPUs it does not know").
# Then this prints the newest kernel set the CPU's flags allow: SkylakeX (AVX-512) or Haswell
# (AVX2). Used by `make demo` and the benchmark scripts when OPENBLAS_CORETYPE is unset.
set -euo pipefail
[ -z "${OPENBLAS_CORETYPE:-}" ] || exit 0
core=$(python3 - <<'PY' 2>/dev/null || true
import ctypes
lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())
PY
)
case "$core" in
  Prescott|Core2|Penryn|Dunnington|Nehalem|Atom) ;;
  *) exit 0 ;;
esac
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
if [[ " $flags " == *" avx512f "* && " $flags " == *" avx512bw "* ]]; then
  echo SkylakeX
elif [[ " $flags " == *" avx2 "* ]]; then
  echo Haswell
fi
