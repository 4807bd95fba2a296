#!/usr/bin/env bash
# The GPU checks of tensorlib's CUDA backend, in one go (docs/cuda.md, "GPU checks"):
# configures a CUDA build in its own directory, builds only what the checks need, runs every
# test labelled `gpu`, the GPU benchmarks (with PyTorch's figures when torch is installed) and
# interpose/tests/gpu_check.sh, and prints a compact report. Exits 77 (nothing run) without a
# GPU, 1 when a check fails or is skipped on a GPU machine, 0 when all pass. Expected: about
# 6 minutes on an H200 with 16 cores (the build 2, the tests 1, the benchmarks 1, interpose 2);
# the per-step limits add up to more, so run it with the device tool's 540-600 s limit and
# read the sections printed so far if it is cut short.
#   tests/gpu/run.sh [build-dir]      (default: build-gpu next to the sources)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-gpu}
JOBS=${JOBS:-$(nproc)}
START=$(date +%s)

if ! { [ -e /dev/nvidiactl ] || nvidia-smi -L >/dev/null 2>&1; }; then
  echo "tests/gpu/run.sh: no GPU on this machine (no /dev/nvidiactl, nvidia-smi finds none):"
  echo "  nothing run; the GPU checks are owed (docs/cuda.md)"
  exit 77
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null |
  sed 's/^/gpu: /'

# The Fashion-MNIST files for the GPU accuracy test: the Debian package where it is installed,
# else a copy travelling with the sources (a GPU machine without the package:
#   mkdir -p .cache/fashion-mnist && cp /usr/share/datasets/fashion-mnist/*.gz .cache/fashion-mnist/
# on the development machine, then carry .cache/fashion-mnist; .cache/ is ignored by git).
if [ -z "${TIDEMARK_FASHION_MNIST_DIR:-}" ] &&
   [ ! -e /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ] &&
   [ -e "$ROOT/.cache/fashion-mnist/t10k-labels-idx1-ubyte.gz" ]; then
  export TIDEMARK_FASHION_MNIST_DIR=$ROOT/.cache/fashion-mnist
fi
echo "fashion-mnist: ${TIDEMARK_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"

step() { echo "== $1 ($(($(date +%s) - START)) s)"; }
step "configure $BUILD"
timeout 90 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTIDEMARK_CUDA=ON -DTIDEMARK_BENCH=ON -DTIDEMARK_GUI=OFF -DTIDEMARK_TESTS=ON \
  >"$BUILD.configure.log" 2>&1 || { tail -30 "$BUILD.configure.log"; echo "FAIL: configure"; exit 1; }
step "build the GPU tests, gpu_ops_bench, tidemark and the interpose library"
TARGETS="$(cd "$ROOT/tests/gpu" && for f in *_test.cpp; do echo "gpu_${f%.cpp}"; done)
  gpu_ops_bench tidemark tidemark_inject"
# shellcheck disable=SC2086
timeout 300 cmake --build "$BUILD" -j "$JOBS" --target $TARGETS >"$BUILD/gpu-build.log" 2>&1 ||
  { tail -40 "$BUILD/gpu-build.log"; if [ -n "${OUT:-}" ]; then cp "$BUILD/gpu-build.log" "$OUT/" 2>/dev/null; fi
    echo "FAIL: build"; exit 1; }

# Each section prints its summary as soon as it ends, so a run cut short (the device tool's
# time limit) still shows what finished; with $OUT set (the device tool's folder that comes
# back), the full logs are copied there too.
keep_log() { if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then cp "$1" "$OUT/" 2>/dev/null || true; fi; }

step "run ctest -L gpu"
LOG=$BUILD/gpu-ctest.log
# ASan is not used here: CUDA under ASan needs ASAN_OPTIONS=protect_shadow_gap=0.
timeout 200 ctest --test-dir "$BUILD" -L gpu -E 'CudaBackendWithoutDevice' --timeout 120 \
  --output-on-failure >"$LOG" 2>&1
RC=$?
keep_log "$LOG"
PASSED=$(grep -cE 'Test +#[0-9]+: .* Passed' "$LOG")
SKIPPED=$(grep -cE 'Test +#[0-9]+: .*\*\*\*Skipped' "$LOG")
FAILED=$(grep -cE 'Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception|Not Run)' "$LOG")
grep -E 'Test +#[0-9]+: ' "$LOG" | sed -E 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: //; s/ +\.+ */  /'
echo "ctest: passed $PASSED, failed $FAILED, skipped $SKIPPED (rc $RC; full log: $LOG)"
if [ "$FAILED" -ne 0 ] || [ "$RC" -ne 0 ]; then
  grep -E '^(/.*: Failure|Expected|Which is|  Actual|Value of|.*\[  FAILED  \])' "$LOG" | head -40
fi
grep -E 'Skipped|SKIPPED' "$LOG" | grep -v 'Test +#' | head -10

step "GPU benchmarks (bench/gpu)"
BENCH_LOG=$BUILD/gpu-bench.log
TORCH_JSON=$BUILD/torch-baseline.json
rm -f "$TORCH_JSON"
timeout 100 python3 "$ROOT/bench/gpu/torch_baseline.py" "$TORCH_JSON" >"$BUILD/torch-baseline.log" 2>&1
keep_log "$BUILD/torch-baseline.log"
# Google Benchmark 1.7 (Debian 12) takes the minimum time in seconds as a bare number.
TIDEMARK_TORCH_BASELINE=$TORCH_JSON timeout 150 "$BUILD/bench/gpu_ops_bench" \
  --benchmark_min_time=0.2 >"$BENCH_LOG" 2>&1
BENCH_RC=$?
keep_log "$BENCH_LOG"
echo "benchmarks: rc $BENCH_RC (full log: $BENCH_LOG)"
sed -n '/^target /,$p' "$BENCH_LOG"
grep -h 'torch\|PyTorch' "$BUILD/torch-baseline.log" | head -2

step "interpose/tests/gpu_check.sh"
INTERPOSE_LOG=$BUILD/gpu-interpose.log
timeout 180 "$ROOT/interpose/tests/gpu_check.sh" "$BUILD" >"$INTERPOSE_LOG" 2>&1
INTERPOSE_RC=$?
keep_log "$INTERPOSE_LOG"
echo "interpose: rc $INTERPOSE_RC (full log: $INTERPOSE_LOG)"
grep -E '^(==|FAIL|ok|info|gpu_check)' "$INTERPOSE_LOG" | tail -40

echo
echo "== report ($(($(date +%s) - START)) s)"
echo "ctest: passed $PASSED, failed $FAILED, skipped $SKIPPED; benchmarks rc $BENCH_RC; interpose rc $INTERPOSE_RC"
if [ "$FAILED" -ne 0 ] || [ "$RC" -ne 0 ] || [ "$BENCH_RC" -ne 0 ] || [ "$INTERPOSE_RC" -ne 0 ]; then
  echo "RESULT: FAIL"
  exit 1
fi
if [ "$SKIPPED" -ne 0 ]; then
  echo "RESULT: FAIL (a GPU check skipped on a GPU machine)"
  exit 1
fi
echo "RESULT: PASS"
