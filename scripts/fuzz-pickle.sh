#!/usr/bin/env bash
# Builds the libFuzzer target tests/importers/pickle_fuzz.cpp with clang
# (-fsanitize=fuzzer,address,undefined) and runs it for a bounded time on a seed corpus: the
# real snapshots of tests/data/pytorch, the reference pickles and small snapshots in
# tests/importers/data. Exit 0: no crash found; 1: a crash (the input is saved in the build
# dir and printed); 77: skipped (no clang or no libFuzzer; the message says which).
#
# Usage: scripts/fuzz-pickle.sh [--seconds N (default 20)] [--build-dir DIR] [-- libFuzzer args]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=20
build="$root/build-fuzz"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "usage: $0 [--seconds N] [--build-dir DIR] [-- libFuzzer args]" >&2; exit 2 ;;
  esac
done

cxx=""
for c in "${CLANGXX:-}" clang++ clang++-14 clang++-15 clang++-16; do
  if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1; then cxx=$c; break; fi
done
if [ -z "$cxx" ]; then
  echo "fuzz-pickle: skipped: no clang++ found (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 77
fi
mkdir -p "$build"
probe="$build/probe.cpp"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe"
if ! "$cxx" -fsanitize=fuzzer "$probe" -o "$build/probe" 2>"$build/probe.log"; then
  echo "fuzz-pickle: skipped: $cxx cannot link -fsanitize=fuzzer (apt-get install libclang-rt-14-dev): $(head -c 300 "$build/probe.log")" >&2
  exit 77
fi

# Build (again only when a source is newer than the binary). The store sources come along for
# the importer's types; the fuzz target writes nothing.
bin="$build/pickle_fuzz"
sources=("$root"/tests/importers/pickle_fuzz.cpp "$root"/profiler/pickle/*.cpp
         "$root"/profiler/importers/*.cpp "$root"/profiler/store/*.cpp)
newest=$(ls -t "${sources[@]}" "$root"/tests/importers/*.h "$root"/profiler/pickle/*.h "$root"/profiler/importers/*.h \
         "$root"/profiler/store/*.h "$0" | head -1)
if [ ! -x "$bin" ] || [ "$newest" -nt "$bin" ]; then
  echo "fuzz-pickle: building $bin with $cxx" >&2
  flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
         -fno-sanitize-recover=undefined -I"$root" -DTIDEMARK_VERSION=\"fuzz\")
  objs=()
  pids=()
  for src in "${sources[@]}"; do
    obj="$build/$(basename "$(dirname "$src")")_$(basename "$src" .cpp).o"
    objs+=("$obj")
    if [ "$(basename "$src")" = pickle_fuzz.cpp ]; then
      "$cxx" "${flags[@]}" -c "$src" -o "$obj" &
    else
      "$cxx" "${flags[@]/-fsanitize=fuzzer,address,undefined/-fsanitize=fuzzer-no-link,address,undefined}" -c "$src" -o "$obj" &
    fi
    pids+=($!)
    # Two compilers at a time.
    if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  done
  for p in "${pids[@]}"; do wait "$p"; done
  "$cxx" "${flags[@]}" "${objs[@]}" -lsqlite3 -lzstd -o "$bin"
fi

# Seed corpus.
corpus="$build/corpus"
seeds="$build/seeds"
mkdir -p "$corpus" "$seeds"
cp "$root"/tests/importers/data/*.pkl "$seeds"/ 2>/dev/null || true
cp "$root"/tests/data/pytorch/*.pickle "$seeds"/
# Inputs up to 64 KiB: the real snapshots (0.1 to 2.6 MB) enter truncated, the small snapshots whole;
# larger inputs would make each run ~20x slower.
echo "fuzz-pickle: fuzzing for ${seconds}s on $(ls "$seeds" | wc -l) seeds" >&2
cd "$build"
set +e
"$bin" "$corpus" "$seeds" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$build/crash-" "${extra[@]}" 2>"$build/fuzz.log"
status=$?
set -e
tail -n 15 "$build/fuzz.log" >&2
if [ $status -ne 0 ]; then
  echo "fuzz-pickle: FAILED (status $status); inputs: $(ls "$build"/crash-* 2>/dev/null | tr '\n' ' ')" >&2
  exit 1
fi
echo "fuzz-pickle: no crash in ${seconds}s" >&2
