#!/usr/bin/env bash
# Installs the build tree into a temporary prefix and builds tests/package against it with
# find_package(Tidemark) twice:
# * COMPONENTS tensorlib, with SQLite and pkg-config hidden from CMake: a program that uses
#   tensorlib alone needs none of the recorder's libraries;
# * COMPONENTS profiler: a program records a trace through the installed Tidemark::record;
# * COMPONENTS distributed (when Tidemark was built with MPI): a program all-reduces across
#   the two ranks of `mpirun -np 2` (built only, when mpirun is missing).
# It also checks that only public headers are installed, and that each compiles on its own. Usage: run.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null

for internal in profiler/store/sqlite_db.h tensorlib/cuda/cuda_internal.h tensorlib/cuda/kernel_args.h; do
  if [ -e "$work/prefix/include/$internal" ]; then
    echo "an internal header is installed: include/$internal" >&2
    exit 1
  fi
done
for public in tensorlib/tensorlib.h profiler/events/events.h profiler/record/recorder.h; do
  [ -e "$work/prefix/include/$public" ] || { echo "a public header is missing: include/$public" >&2; exit 1; }
done
# Every installed header stands alone: it compiles with only the installed include tree (and
# the system's) on the path, so nothing installed includes a header that was left out.
while IFS= read -r header; do
  rel=${header#"$work/prefix/include/"}
  printf '#include <%s>\n' "$rel" |
    ${CXX:-c++} -std=c++20 -fsyntax-only -I"$work/prefix/include" -x c++ - 2>"$work/header.err" ||
    { echo "an installed header does not compile on its own: include/$rel" >&2; cat "$work/header.err" >&2; exit 1; }
done < <(find "$work/prefix/include" -name '*.h' | sort)

cmake -S "$src/tests/package" -B "$work/tensorlib" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DTIDEMARK_COMPONENT=tensorlib -DCMAKE_DISABLE_FIND_PACKAGE_SQLite3=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON >/dev/null
cmake --build "$work/tensorlib" | tail -20
out=$("$work/tensorlib/consumer")
echo "$out"
# The softmax rows sum to one: the mean of the row sums printed on the first line is 1.
echo "$out" | head -1 | grep -Eq '^1 (1|0\.99999|1\.0000)'

cmake -S "$src/tests/package" -B "$work/profiler" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DTIDEMARK_COMPONENT=profiler >/dev/null
cmake --build "$work/profiler" | tail -20
"$work/profiler/recording_consumer" "$work/run.db"
[ -s "$work/run.db" ] || { echo "recording_consumer wrote no trace" >&2; exit 1; }

if [ -n "$(find "$work/prefix" -name TidemarkDistributedTargets.cmake)" ]; then
  cmake -S "$src/tests/package" -B "$work/distributed" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
    -DTIDEMARK_COMPONENT=distributed >/dev/null
  cmake --build "$work/distributed" | tail -20
  if command -v mpirun >/dev/null; then
    out=$(mpirun -np 2 --allow-run-as-root --oversubscribe "$work/distributed/distributed_consumer")
    echo "$out"
    echo "$out" | grep -qx "sum 3 of 2 ranks"
  else
    echo "mpirun not found: the distributed consumer is built, not run"
  fi
fi
