#!/usr/bin/env bash
# The GPU checks of tensorlib's CUDA backend and of libtidemark_inject.so, in one go
# (docs/cuda.md, "GPU checks"): configures a CUDA build in its own directory, builds only what
# the checks need, runs every test labelled `gpu`, interpose/tests/gpu_check.sh, the GPU
# benchmarks (with PyTorch's figures when torch is installed) and tests/gpu/pytorch_snapshots.py,
# and prints a one-screen report last. Exits 77 (nothing run) without a GPU, 1 when a check
# fails or is skipped on a GPU machine, 0 when all pass.
#
#   tests/gpu/run.sh [build-dir]      (default: build-gpu next to the sources)
#
# Environment:
#   TIDEMARK_GPU_DRY_RUN=1    for a machine without a GPU: configure, build, check that the
#                             programs load and run ctest -L gpu (each GPU test skips with "no
#                             CUDA device"), then exit 77; scripts/gpu-dry-run.sh runs it so
#   TIDEMARK_GPU_FIRST_RUN=1  the PyTorch step ratios, the recording overhead and "every memcpy
#                             has a call site" are reported, not enforced (tests/gpu/device.sh
#                             sets it; docs/cuda.md says why)
#   TIDEMARK_GPU_LOG_DIR      each log is copied there as its step ends (default: $OUT/logs
#                             when OUT is set, the device tool's folder that comes back)
#   TIDEMARK_GPU_DATA_DIR     where pytorch_snapshots.py writes (default: $OUT/pytorch when OUT
#                             is set, else BUILD/pytorch)
#   TIDEMARK_GPU_TIME_SCALE   multiplies every step's time limit (the dry run's 2 cores)
#   JOBS                      build jobs (default: every core)
#
# Each step has its own time limit; together they stay under 560 s, so the device tool's
# 600 s call always reaches the report and the copy of the logs:
#   configure 40 + build 190 + ctest 70 + interpose 120 + PyTorch baseline 30 + benchmarks 45
#   + PyTorch snapshots 40 = 535 s (tests/gpu/device.sh unpacks the dependencies within 20 s).
# Expected on an H200 with 16 cores: about 6 minutes.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc)}
DRY=${TIDEMARK_GPU_DRY_RUN:-0}
FIRST=${TIDEMARK_GPU_FIRST_RUN:-0}
SCALE=${TIDEMARK_GPU_TIME_SCALE:-1}   # every time limit times this (the dry run on 2 cores)
START=$(date +%s)
LOG_DIR=${TIDEMARK_GPU_LOG_DIR:-${OUT:+$OUT/logs}}
DATA_DIR=${TIDEMARK_GPU_DATA_DIR:-${OUT:+$OUT/pytorch}}
DATA_DIR=${DATA_DIR:-$BUILD/pytorch}
REPORT=()   # the lines of the final report
note() { REPORT+=("$*"); }

if [ "$DRY" != 1 ] && ! { [ -e /dev/nvidiactl ] || nvidia-smi -L >/dev/null 2>&1; }; then
  echo "tests/gpu/run.sh: no GPU on this machine (no /dev/nvidiactl, nvidia-smi finds none):"
  echo "  nothing run; the GPU checks are owed (docs/cuda.md); TIDEMARK_GPU_DRY_RUN=1 builds anyway"
  exit 77
fi
if [ "$DRY" = 1 ]; then
  echo "dry run (TIDEMARK_GPU_DRY_RUN=1): configure, build, ctest -L gpu; no GPU needed"
  note "dry run: no GPU used"
else
  GPU=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)
  echo "gpu: $GPU"
  note "gpu: $GPU"
fi
[ "$FIRST" = 1 ] && note "first run (TIDEMARK_GPU_FIRST_RUN=1): PyTorch ratios, recording overhead and memcpy call sites reported, not enforced"
mkdir -p "$BUILD"
if [ -n "$LOG_DIR" ]; then mkdir -p "$LOG_DIR"; fi
keep_log() { if [ -n "$LOG_DIR" ]; then cp "$1" "$LOG_DIR/" 2>/dev/null || true; fi; }
step() { echo "== $1 ($(($(date +%s) - START)) s)"; }

# The CUDA toolkit: its home for CMake's CUPTI/NVTX search and gpu_check.sh's nvcc.
if ! CUDA_HOME=$("$ROOT/tests/gpu/cuda_home.sh"); then
  echo "FAIL: no CUDA toolkit (see above)"; exit 1
fi
export CUDA_HOME
export NVCC=${NVCC:-$CUDA_HOME/bin/nvcc}
echo "cuda: $CUDA_HOME ($("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"

# CUPTI, for libtidemark_inject.so: its header at configure time, libcupti.so.13 at run time.
# Looked for in the toolkit, then in the CUDA wheels of the machine's Python (nvidia-cuda-cupti).
CMAKE_EXTRA=()
py_nvidia=$(python3 -c 'import site; print(" ".join(p + "/nvidia" for p in site.getsitepackages()))' 2>/dev/null || true)
first_of() { for f in "$@"; do if [ -e "$f" ]; then echo "$f"; return 0; fi; done; return 1; }
# shellcheck disable=SC2046  # the site-packages folders hold no spaces
if ! first_of "$CUDA_HOME/include/cupti.h" >/dev/null; then
  CUPTI_H=$(first_of "$CUDA_HOME"/extras/CUPTI/include/cupti.h "$CUDA_HOME"/targets/*/include/cupti.h \
    $(for d in $py_nvidia; do echo "$d"/*/include/cupti.h; done)) &&
    CMAKE_EXTRA+=("-DTIDEMARK_CUPTI_INCLUDE=$(dirname "$CUPTI_H")")
fi
if [ -z "${TIDEMARK_CUPTI_PATH:-}" ]; then
  # shellcheck disable=SC2046
  CUPTI_SO=$(first_of "$CUDA_HOME"/lib64/libcupti.so.13 "$CUDA_HOME"/lib/libcupti.so.13 \
    "$CUDA_HOME"/extras/CUPTI/lib64/libcupti.so.13 "$CUDA_HOME"/targets/*/lib/libcupti.so.13 \
    $(for d in $py_nvidia; do echo "$d"/*/lib/libcupti.so.13; done)) &&
    export TIDEMARK_CUPTI_PATH=$CUPTI_SO
fi
echo "cupti: ${TIDEMARK_CUPTI_PATH:-libcupti.so.13 not found (the interpose check will say so)}${CMAKE_EXTRA[*]:+ (${CMAKE_EXTRA[*]})}"

# NCCL, for tl::distributed's NCCL backend (built when MPI is found too): the toolkit's, else
# the NCCL wheel of the machine's Python (nvidia-nccl-cu13: nccl.h and libnccl.so.2 only).
if ! first_of "$CUDA_HOME/include/nccl.h" >/dev/null; then
  # shellcheck disable=SC2046
  NCCL_H=$(first_of $(for d in $py_nvidia; do echo "$d"/nccl/include/nccl.h "$d"/*/include/nccl.h; done)) &&
    NCCL_SO=$(first_of "$(dirname "$(dirname "$NCCL_H")")"/lib/libnccl.so.2) &&
    CMAKE_EXTRA+=("-DTIDEMARK_NCCL_INCLUDE=$(dirname "$NCCL_H")" "-DTIDEMARK_NCCL_LIBRARY=$NCCL_SO")
fi
# What the caller adds (tests/gpu/device.sh: the bundle's OpenMPI).
# shellcheck disable=SC2206  # flags without spaces, split on purpose
CMAKE_EXTRA+=(${TIDEMARK_GPU_CMAKE_ARGS:-})
echo "nccl: $(first_of "$CUDA_HOME/include/nccl.h" || echo "${NCCL_H:-not found (the NCCL backend is not built)}")"

# The Fashion-MNIST files for the GPU accuracy test: the Debian package where it is installed,
# else a copy travelling with the sources (.cache/fashion-mnist, carried: docs/cuda.md).
if [ -z "${TIDEMARK_FASHION_MNIST_DIR:-}" ] &&
   [ ! -e /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ] &&
   [ -e "$ROOT/.cache/fashion-mnist/t10k-labels-idx1-ubyte.gz" ]; then
  export TIDEMARK_FASHION_MNIST_DIR=$ROOT/.cache/fashion-mnist
fi
echo "fashion-mnist: ${TIDEMARK_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"

step "configure $BUILD"
CONFIGURE_LOG=$BUILD/gpu-configure.log
timeout $((40 * SCALE)) cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTIDEMARK_CUDA=ON -DTIDEMARK_BENCH=ON -DTIDEMARK_GUI=OFF -DTIDEMARK_TESTS=ON \
  "${CMAKE_EXTRA[@]}" >"$CONFIGURE_LOG" 2>&1
RC=$?
keep_log "$CONFIGURE_LOG"
if [ $RC -ne 0 ]; then tail -30 "$CONFIGURE_LOG"; echo "FAIL: configure (rc $RC; $CONFIGURE_LOG)"; exit 1; fi
grep -E 'Tidemark:|WARNING' "$CONFIGURE_LOG" | head -5

step "build the GPU tests, gpu_ops_bench, tidemark and libtidemark_inject.so (-j $JOBS)"
TARGETS="$(cd "$ROOT/tests/gpu" && for f in *_test.cpp; do echo "gpu_${f%.cpp}"; done)
  gpu_ops_bench tidemark tidemark_inject"
# The NCCL backend's test (distributed.nccl.np1, labelled gpu), where MPI and NCCL were found.
if grep -q 'NCCL backend on' "$CONFIGURE_LOG"; then
  TARGETS="$TARGETS distributed_nccl_test"
else
  note "no NCCL backend: $(grep -m1 -o 'tl::distributed.*' "$CONFIGURE_LOG" || echo 'tl::distributed not configured')"
fi
BUILD_LOG=$BUILD/gpu-build.log
BUILD_START=$(date +%s)
# shellcheck disable=SC2086
timeout $((190 * SCALE)) cmake --build "$BUILD" -j "$JOBS" --target $TARGETS >"$BUILD_LOG" 2>&1
RC=$?
keep_log "$BUILD_LOG"
if [ $RC -ne 0 ]; then
  grep -E 'error|Error|FAILED' "$BUILD_LOG" | head -20; tail -20 "$BUILD_LOG"
  echo "FAIL: build (rc $RC$([ $RC = 124 ] && echo ', cut at 190 s'); $BUILD_LOG)"; exit 1
fi
note "build: $(($(date +%s) - BUILD_START)) s with -j $JOBS"

# Every program loads: its libraries (the dependency bundle's included) resolve.
command -v ldd >/dev/null || ldd() { echo "(no ldd on this machine: not checked)"; }
UNRESOLVED=$(for f in "$BUILD"/cli/tidemark "$BUILD"/interpose/libtidemark_inject.so "$BUILD"/bench/gpu_ops_bench \
    "$BUILD"/tests/gpu/gpu_*_test "$BUILD"/tests/distributed_nccl_test; do [ -f "$f" ] && ldd "$f" 2>&1 | sed -n "s|^[[:space:]]*\(.*not found\)|$f: \1|p"; done)
if [ -n "$UNRESOLVED" ]; then echo "$UNRESOLVED"; echo "FAIL: libraries not found"; exit 1; fi
"$BUILD/cli/tidemark" --help >/dev/null || { echo "FAIL: $BUILD/cli/tidemark does not start"; exit 1; }

step "run ctest -L gpu -j 8"
LOG=$BUILD/gpu-ctest.log
# Without a device only CudaBackendWithoutDevice has something to check; with one it skips.
EXCLUDE=(-E CudaBackendWithoutDevice)
[ "$DRY" = 1 ] && EXCLUDE=()
# ASan is not used here: CUDA under ASan needs ASAN_OPTIONS=protect_shadow_gap=0.
timeout $((70 * SCALE)) ctest --test-dir "$BUILD" -L gpu "${EXCLUDE[@]}" -j 8 --timeout $((60 * SCALE)) \
  --output-on-failure >"$LOG" 2>&1
CTEST_RC=$?
keep_log "$LOG"
PASSED=$(grep -cE 'Test +#[0-9]+: .* Passed' "$LOG")
SKIPPED=$(grep -cE 'Test +#[0-9]+: .*\*\*\*Skipped' "$LOG")
FAILED=$(grep -cE 'Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Not Run)' "$LOG")
grep -E 'Test +#[0-9]+: ' "$LOG" | sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: //; s/ +\.+ */  /'
CTEST_LINE="ctest -L gpu: passed $PASSED, failed $FAILED, skipped $SKIPPED (rc $CTEST_RC$([ $CTEST_RC = 124 ] && echo ', cut at 70 s'))"
echo "$CTEST_LINE"
note "$CTEST_LINE"
if [ "$FAILED" -ne 0 ] || [ "$CTEST_RC" -ne 0 ]; then
  grep -E 'Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Not Run)' "$LOG" |
    sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: /  failed: /; s/ +\.+\** */ /' | head -12 |
    while IFS= read -r l; do echo "$l"; note "$l"; done
  grep -E '^(/.*: Failure|Expected|Which is|  Actual|Value of|.*\[  FAILED  \])' "$LOG" | head -40
  if grep -q 'ExpandableSegments.*\*\*\*Failed' "$LOG"; then
    note "  (expandable segments failed: cuMemCreate/cuMemMap under this machine's sandbox? the rest ran on)"
  fi
fi
# ctest keeps no output of a skipped test: run up to three again, verbose, for their reasons.
SKIPPED_NAMES=$(grep -E 'Test +#[0-9]+: .*\*\*\*Skipped' "$LOG" | sed -E 's/^.*Test +#[0-9]+: ([^ ]+) .*/\1/' | head -3 | paste -sd'|')
if [ -n "$SKIPPED_NAMES" ]; then
  # GoogleTest prints "FILE:LINE: Skipped", then the GTEST_SKIP message.
  SKIP_WHY=$(timeout $((20 * SCALE)) ctest --test-dir "$BUILD" -R "^($SKIPPED_NAMES)\$" -V 2>&1 |
    sed -nE '/: Skipped$/{n;s/^[0-9]+: //;p}' | sort | uniq -c | head -3)
  echo "why skipped (${SKIPPED_NAMES//|/, }):"; echo "${SKIP_WHY:-  (no message found)}"
  note "  skipped, e.g.: $(echo "$SKIP_WHY" | head -1 | sed -E 's/^ *[0-9]+ //')"
fi

if [ "$DRY" = 1 ]; then
  step "programs without a GPU"
  timeout $((30 * SCALE)) "$BUILD/bench/gpu_ops_bench" >"$BUILD/gpu-bench.log" 2>&1
  echo "gpu_ops_bench: rc $? ($(head -1 "$BUILD/gpu-bench.log"))"
  if python3 -m py_compile "$ROOT/tests/gpu/pytorch_snapshots.py" "$ROOT/bench/gpu/torch_baseline.py" \
       "$ROOT/interpose/tests/torch_train.py" "$ROOT/interpose/tests/gpu_check.py"; then
    echo "python scripts: compile"
  else
    echo "FAIL: a python script does not compile"; FAILED=$((FAILED + 1))
  fi
  echo
  echo "== report ($(($(date +%s) - START)) s)"
  printf '%s\n' "${REPORT[@]}"
  if [ "$FAILED" -ne 0 ] || [ "$CTEST_RC" -ne 0 ] || [ "$PASSED" -eq 0 ]; then
    echo "RESULT: FAIL (dry run)"; exit 1
  fi
  echo "RESULT: dry run complete: configured, built, every program loads, ctest -L gpu ran" \
    "(GPU tests skipped: no CUDA device); exit 77"
  exit 77
fi

# interpose before the benchmarks: it is the longer check and the one that must not be cut.
step "interpose/tests/gpu_check.sh"
INTERPOSE_LOG=$BUILD/gpu-interpose.log
timeout $((120 * SCALE)) "$ROOT/interpose/tests/gpu_check.sh" "$BUILD" >"$INTERPOSE_LOG" 2>&1
INTERPOSE_RC=$?
keep_log "$INTERPOSE_LOG"
INTERPOSE_LINE="interpose: rc $INTERPOSE_RC$([ $INTERPOSE_RC = 124 ] && echo ', cut at 120 s')"
echo "$INTERPOSE_LINE"
grep -E '^(==|FAIL|ok|info|REPORT|WARN|gpu_check)' "$INTERPOSE_LOG" | tail -40
note "$INTERPOSE_LINE"
while IFS= read -r l; do note "  $l"; done < <(grep -E '^(FAIL|REPORT|WARN|gpu_check)|(overhead|reserved peak|memcpys without)' "$INTERPOSE_LOG" | head -14)

step "GPU benchmarks (bench/gpu)"
BENCH_LOG=$BUILD/gpu-bench.log
TORCH_JSON=$BUILD/torch-baseline.json
rm -f "$TORCH_JSON"
timeout $((30 * SCALE)) python3 "$ROOT/bench/gpu/torch_baseline.py" "$TORCH_JSON" >"$BUILD/torch-baseline.log" 2>&1
keep_log "$BUILD/torch-baseline.log"
# Google Benchmark 1.7 (Debian 12) takes the minimum time in seconds as a bare number.
TIDEMARK_TORCH_BASELINE=$TORCH_JSON timeout $((45 * SCALE)) "$BUILD/bench/gpu_ops_bench" \
  --benchmark_min_time=0.1 >"$BENCH_LOG" 2>&1
BENCH_RC=$?
keep_log "$BENCH_LOG"
BENCH_LINE="benchmarks: rc $BENCH_RC$([ $BENCH_RC = 124 ] && echo ', cut at 45 s')"
echo "$BENCH_LINE"
sed -n '/^target /,$p' "$BENCH_LOG"
grep -h 'torch\|PyTorch' "$BUILD/torch-baseline.log" | head -2
note "$BENCH_LINE"
while IFS= read -r l; do note "  $l"; done < <(sed -n '/^target /,$p' "$BENCH_LOG" | grep -v '^target ' | cut -c1-150)

step "PyTorch snapshots (tests/gpu/pytorch_snapshots.py -> $DATA_DIR)"
SNAP_LOG=$BUILD/gpu-pytorch-snapshots.log
timeout $((40 * SCALE)) python3 "$ROOT/tests/gpu/pytorch_snapshots.py" --out "$DATA_DIR" >"$SNAP_LOG" 2>&1
SNAP_RC=$?
keep_log "$SNAP_LOG"
tail -12 "$SNAP_LOG"
note "pytorch snapshots: rc $SNAP_RC$([ $SNAP_RC = 124 ] && echo ', cut at 40 s') ($(tail -1 "$SNAP_LOG" | cut -c1-120))"

echo
echo "== report ($(($(date +%s) - START)) s)"
printf '%s\n' "${REPORT[@]}"
WHY=()
[ "$FAILED" -ne 0 ] || [ "$CTEST_RC" -ne 0 ] && WHY+=(ctest)
[ "$INTERPOSE_RC" -ne 0 ] && WHY+=(interpose)
[ "$BENCH_RC" -ne 0 ] && WHY+=(benchmarks)
[ "$SKIPPED" -ne 0 ] && WHY+=("a GPU test skipped on a GPU machine")
# The snapshots are data for later tests, not a check: reported above, never a failure here.
if ((${#WHY[@]})); then
  echo "RESULT: FAIL ($(IFS=','; echo "${WHY[*]}" | sed 's/,/, /g'))"
  exit 1
fi
echo "RESULT: PASS"
