#!/usr/bin/env bash
# The whole GPU run on a machine that has a GPU, the CUDA toolkit, a C++ compiler, CMake, ninja
# and python3 but none of Debian's development packages and no network (docs/cuda.md, "Running
# the GPU checks on a machine without the dependencies"). The device tool's command is just
#
#   tests/gpu/device.sh          carry: .gpu-deps .cache/fashion-mnist
#
# It unpacks the dependency bundle (scripts/gpu-bundle.sh) into .cache/gpu-deps, points CMake,
# pkg-config, the compiler and the linker at it (nothing is written outside the source tree and
# /tmp), runs tests/gpu/run.sh with every core, and leaves in $OUT: report.txt (the one-screen
# report), logs.tar.gz (run.sh's output and every step's log) and pytorch/ (the snapshots of
# tests/gpu/pytorch_snapshots.py) -- at most 8 files, as the device tool brings back.
# Without $OUT (a local run) they go to build-gpu/out. Exit status: run.sh's.
#
# No LD_LIBRARY_PATH: the programs find the bundle's libraries through their RUNPATH (CMake
# records the folder of every library linked by path), and each bundle library finds its own
# dependencies through RUNPATH $ORIGIN, so nothing shadows the machine's libraries in the
# PyTorch processes gpu_check.sh records.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/build-gpu/out}
export OUT
mkdir -p "$OUT"
DEPS=$ROOT/.gpu-deps
ARCHIVE=$DEPS/tidemark-gpu-deps.tar.xz
# Unpacked outside .gpu-deps, so that carrying .gpu-deps never carries the 50 MB unpacked.
TOP=$ROOT/.cache/gpu-deps
PREFIX=$TOP/usr
LIBDIR=$PREFIX/lib/x86_64-linux-gnu
SCALE=${TIDEMARK_GPU_TIME_SCALE:-1}
fail() { echo "device.sh: $*" | tee "$OUT/report.txt"; exit 1; }

# The machine: what the build takes from it (printed first, so a missing piece is plain).
for tool in c++ cmake ninja python3 tar; do
  command -v "$tool" >/dev/null || fail "no $tool on this machine: the GPU build needs a C++ compiler, CMake, ninja, python3 and tar"
done
echo "machine: $(uname -m), $(nproc) cores; $(c++ --version | head -1); $(cmake --version | head -1); ninja $(ninja --version); $(python3 --version 2>&1)"

# The dependency bundle, unpacked once per archive (MANIFEST says which).
[ -e "$ARCHIVE" ] || fail "$ARCHIVE missing: run scripts/gpu-bundle.sh here and carry .gpu-deps"
if ! cmp -s "$DEPS/MANIFEST" "$TOP/MANIFEST" 2>/dev/null || [ "$ARCHIVE" -nt "$TOP/MANIFEST" ]; then
  rm -rf "$TOP" "$TOP.tmp" && mkdir -p "$TOP.tmp"
  if command -v xz >/dev/null; then
    timeout $((20 * SCALE)) tar -xJf "$ARCHIVE" -C "$TOP.tmp"
  else  # no xz-utils: Python's lzma module reads it
    timeout $((20 * SCALE)) python3 -c 'import sys, tarfile; t = tarfile.open(sys.argv[1])
t.extractall(sys.argv[2], **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))' \
      "$ARCHIVE" "$TOP.tmp"
  fi || fail "could not unpack $ARCHIVE"
  mv "$TOP.tmp" "$TOP"
  touch "$TOP/MANIFEST"   # the archive's times are 0: mark when it was unpacked
fi
echo "dependencies: $PREFIX ($(wc -l <"$TOP/MANIFEST") Debian packages)"

export CMAKE_PREFIX_PATH=$PREFIX${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
export PKG_CONFIG=$PREFIX/bin/pkgconf
export PKG_CONFIG_LIBDIR=$LIBDIR/pkgconfig:$PREFIX/share/pkgconfig
unset PKG_CONFIG_PATH
# The bundle's headers as if they were in /usr/include (a safety net: the targets name their
# include folders). No LIBRARY_PATH: the compiler would report its folder as an implicit link
# directory, and CMake leaves those out of the programs' RUNPATH (the first dry run found the
# programs then could not load libfmt, libdw, libbenchmark).
export CPATH=$PREFIX/include${CPATH:+:$CPATH}
unset LIBRARY_PATH
# libdw's libelf, OpenBLAS's libgfortran: found at link time in the bundle too.
export LDFLAGS="-Wl,-rpath-link,$LIBDIR -Wl,-rpath-link,$LIBDIR/openblas-openmp${LDFLAGS:+ $LDFLAGS}"
"$PKG_CONFIG" --modversion libdw >/dev/null || fail "the bundle's pkgconf does not run here"

# The bundle's OpenMPI (tl::distributed; its NCCL test runs under `mpiexec -n 1`): CMake is
# given its header folder and libmpi (FindMPI guesses without a compiler wrapper only on
# Windows), and at run time OPAL_PREFIX, PMIX_PREFIX and PMIx's plugin path relocate it from
# /usr; one node and no ssh: the `isolated` launcher.
if [ -x "$PREFIX/bin/orterun" ]; then
  export TIDEMARK_GPU_CMAKE_ARGS="-DMPI_SKIP_COMPILER_WRAPPER=ON -DMPI_C_HEADER_DIR=$LIBDIR/openmpi/include -DMPI_C_LIB_NAMES=mpi -DMPI_mpi_LIBRARY=$LIBDIR/libmpi.so -DMPIEXEC_EXECUTABLE=$PREFIX/bin/mpiexec.openmpi"
  export OPAL_PREFIX=$PREFIX PMIX_PREFIX=$LIBDIR/pmix2 PMIX_MCA_mca_base_component_path=$LIBDIR/pmix2/lib/pmix
  export OMPI_MCA_plm=isolated OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

export TIDEMARK_GPU_FIRST_RUN=${TIDEMARK_GPU_FIRST_RUN:-1}
export TIDEMARK_GPU_LOG_DIR=$OUT/logs TIDEMARK_GPU_DATA_DIR=$OUT/pytorch
export PYTHONUNBUFFERED=1
tests/gpu/run.sh "$ROOT/build-gpu" 2>&1 | tee "$OUT/run.txt"
RC=${PIPESTATUS[0]}

# At most 8 files come back: the report, one archive of the logs, the PyTorch data.
sed -n '/^== report/,$p' "$OUT/run.txt" >"$OUT/report.txt"
[ -s "$OUT/report.txt" ] || tail -30 "$OUT/run.txt" >"$OUT/report.txt"
mkdir -p "$OUT/logs" && mv "$OUT/run.txt" "$OUT/logs/"
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
echo "device.sh: rc $RC; in $OUT: $(cd "$OUT" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')"
exit "$RC"
