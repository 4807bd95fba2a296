#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, builds tests/package against it with
# find_package(Tidemark), and runs the result. Usage: run.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/package" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" | tail -20
out=$("$work/build/consumer")
echo "$out"
# The softmax rows sum to one: the mean of the row sums printed on the first line is 1.
echo "$out" | head -1 | grep -Eq '^1 (1|0\.99999|1\.0000)'
