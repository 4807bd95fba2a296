#!/usr/bin/env bash
# Builds the dependency bundle that travels with the sources to a GPU machine that has the CUDA
# toolkit, a compiler, CMake and ninja but none of Debian's development packages and no network
# (docs/cuda.md, "Running the GPU checks on a machine without the dependencies").
#
#   scripts/gpu-bundle.sh            -> .gpu-deps/tidemark-gpu-deps.tar.xz (+ MANIFEST)
#
# The packages are fetched with `apt-get download` (nothing is installed here) and unpacked with
# `dpkg -x` into a staging tree, which keeps only what the GPU build needs (headers, shared
# libraries, the static libraries CMake package files name, pkg-config and CMake package files,
# and pkgconf itself), made relocatable:
#   * pkg-config files say `${pcfiledir}/...` instead of /usr, CMake package files
#     `${CMAKE_CURRENT_LIST_DIR}/...`, absolute symbolic links become relative ones, and the
#     usrmerge split (/lib vs /usr/lib) is folded into usr/;
#   * every shared library and pkgconf get RUNPATH $ORIGIN (patchelf), so libdw loads the
#     libelf it was built with and OpenBLAS its libgfortran from the bundle, with no
#     LD_LIBRARY_PATH that could shadow the machine's own libraries in other processes.
# The bundle is one .tar.xz because unpacked it is about 50 MB (OpenBLAS alone 36 MB), which
# with the sources and the Fashion-MNIST files would pass the 64 MiB the device tool carries.
# tests/gpu/device.sh unpacks it (into .cache/gpu-deps) and points the build at it.
#
# Idempotent: downloaded .deb files are kept in .cache/gpu-bundle/debs and reused; the staging
# tree and the archive are rebuilt each time. Needs apt-get with Debian 12 package lists and
# network access to the mirror (only for packages not yet downloaded).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT_DIR=${TIDEMARK_GPU_DEPS_DIR:-$ROOT/.gpu-deps}
WORK=$ROOT/.cache/gpu-bundle
DEBS=$WORK/debs
STAGE=$WORK/stage
ARCH=x86_64-linux-gnu
ARCHIVE=$OUT_DIR/tidemark-gpu-deps.tar.xz

die() { echo "gpu-bundle: $*" >&2; exit 1; }

# What the CUDA build (tests/gpu/run.sh's targets) links or includes, and what those libraries
# load in turn, minus what every machine with a C++ compiler has (libc, libstdc++, libgcc_s,
# libgomp). OpenBLAS, not netlib BLAS: tensorlib calls openblas_set_num_threads and uses
# OpenBLAS's cblas.h types (blasint), and its OpenMP build is what every other build uses.
# OpenMPI (tl::distributed, whose NCCL backend's test runs under `mpiexec -n 1`): the library,
# its launcher (orterun) and the plugins both load, relocated at run time by OPAL_PREFIX and
# PMIX_PREFIX (tests/gpu/device.sh); plugins needing what the bundle lacks (InfiniBand,
# UCX, libfabric, PSM, Java, Fortran) are left out.
DEV_PACKAGES=(
  libsqlite3-dev libgtest-dev libgmock-dev libbenchmark-dev libunwind-dev libdw-dev libelf-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev libpng-dev zlib1g-dev libzstd-dev liblzma-dev
  libopenblas-openmp-dev libopenmpi-dev
)
RUNTIME_PACKAGES=(
  libsqlite3-0 libbenchmark1debian libunwind8 libdw1 libelf1 libfmt9 libpng16-16 zlib1g
  libzstd1 liblzma5 libbz2-1.0 libopenblas0-openmp libgfortran5 libquadmath0
  pkgconf-bin libpkgconf3
  libopenmpi3 openmpi-bin openmpi-common libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libpmix2 libnuma1 libudev1 libmunge2
)
TOOL_PACKAGES=(patchelf)   # used here only, never shipped

for tool in apt-get dpkg-deb tar xz python3; do
  command -v "$tool" >/dev/null || die "needs $tool (a Debian machine with apt and xz-utils)"
done
[[ $(dpkg --print-architecture) == amd64 ]] ||
  die "the GPU machine is x86-64: run this on an amd64 Debian 12 machine"

# --- download (only what is missing) ---
mkdir -p "$DEBS" "$OUT_DIR"
missing=()
for p in "${DEV_PACKAGES[@]}" "${RUNTIME_PACKAGES[@]}" "${TOOL_PACKAGES[@]}"; do
  compgen -G "$DEBS/${p}_*.deb" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "gpu-bundle: downloading ${missing[*]}"
  (cd "$DEBS" && apt-get download -q -o APT::Sandbox::User=root "${missing[@]}") ||
    die "apt-get download failed (stale package lists? run apt-get update)"
fi
deb_of() {
  local f
  f=$(compgen -G "$DEBS/${1}_*.deb" | sort -V | tail -1) || true
  [[ -n $f ]] || die "no .deb for $1 in $DEBS"
  echo "$f"
}

# --- patchelf, unpacked for this script only ---
TOOLS=$WORK/tools
rm -rf "$TOOLS" && mkdir -p "$TOOLS"
dpkg -x "$(deb_of patchelf)" "$TOOLS"
PATCHELF=$TOOLS/usr/bin/patchelf
"$PATCHELF" --version >/dev/null || die "patchelf from $(deb_of patchelf) does not run here"

# --- unpack ---
rm -rf "$STAGE" && mkdir -p "$STAGE"
manifest=()
for p in "${DEV_PACKAGES[@]}" "${RUNTIME_PACKAGES[@]}"; do
  deb=$(deb_of "$p")
  dpkg -x "$deb" "$STAGE"
  manifest+=("$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)")
done
cd "$STAGE"

# usrmerge: zlib, liblzma and libbz2 put their libraries in /lib; fold that into usr/lib.
if [[ -d lib ]]; then
  mkdir -p usr/lib
  cp -a lib/. usr/lib/
  rm -rf lib
fi

# --- keep only what the build needs ---
rm -rf usr/share/doc usr/share/man usr/share/lintian usr/share/bug usr/share/info usr/src etc
# Programs: pkgconf, and OpenMPI's launcher (mpiexec.openmpi -> orterun) with its daemon.
find usr/bin -mindepth 1 ! -name pkgconf ! -name orterun ! -name orted ! -name mpiexec.openmpi \
  -exec rm -f {} +
# OpenMPI's C bindings only: no Fortran, Java, OpenSHMEM or tracing libraries, no wrappers' data
# (CMake finds MPI from its headers and libmpi, tests/gpu/device.sh).
OMPI=usr/lib/$ARCH/openmpi
rm -rf usr/lib/$ARCH/fortran "$OMPI"/lib/*.mod usr/share/openmpi/*wrapper-data.txt \
  usr/share/openmpi/mpijavac* usr/share/java usr/lib/$ARCH/openmpi/lib/mpi.jar
rm -f usr/lib/$ARCH/libmpi_java.so* usr/lib/$ARCH/libmpi_mpifh* usr/lib/$ARCH/libmpi_usempi* \
      usr/lib/$ARCH/liboshmem.so* usr/lib/$ARCH/libompitrace.so* "$OMPI"/lib/libmpi_java.so \
      "$OMPI"/lib/libmpi_mpifh.so "$OMPI"/lib/libmpi_usempi* "$OMPI"/lib/liboshmem.so \
      "$OMPI"/lib/libompitrace.so "$OMPI"/lib/ompi_monitoring_prof.so
# OpenMPI's internal headers: mpi.h needs only its C++ bindings (ompi/mpi/cxx) beside it.
find "$OMPI"/include/openmpi -mindepth 1 -maxdepth 1 ! -name ompi ! -name mpiext -exec rm -rf {} +
find "$OMPI"/include/openmpi/ompi -mindepth 1 -maxdepth 1 ! -name mpi -exec rm -rf {} +
find "$OMPI"/include/openmpi/ompi/mpi -mindepth 1 -maxdepth 1 ! -name cxx -exec rm -rf {} +
rm -f "$OMPI"/lib/openmpi3/mca_*oshmem* "$OMPI"/lib/openmpi3/mca_sshmem_* "$OMPI"/lib/openmpi3/mca_spml_* \
      "$OMPI"/lib/openmpi3/mca_scoll_* "$OMPI"/lib/openmpi3/mca_atomic_* "$OMPI"/lib/openmpi3/mca_memheap_*
# Static libraries: only those a CMake package file names (their import check fails without
# them); everything else links the shared library.
keep_static=$(grep -rhoE '[A-Za-z0-9_+.-]+\.a"' --include='*.cmake' usr | tr -d '"' | sort -u)
while IFS= read -r -d '' a; do
  grep -qxF "$(basename "$a")" <<<"$keep_static" || rm -f "$a"
done < <(find usr -name '*.a' -print0)
# OpenBLAS's LAPACK and reference-BLAS personalities (the alternatives' targets): unused.
rm -f usr/lib/$ARCH/openblas-openmp/liblapack.so* usr/lib/$ARCH/openblas-openmp/libblas.so*
rm -f usr/lib/$ARCH/openblas-openmp/pkgconfig/lapack-openblas.pc \
      usr/lib/$ARCH/openblas-openmp/pkgconfig/blas-openblas.pc
find usr -xtype l -delete   # links left dangling by the above

# Plugins (OpenMPI's, PMIx's, hwloc's) that need a library the bundle lacks: left out, as
# they would be on a machine without that library (each is optional; the loader skips it).
bundled() {  # is $1 (a NEEDED name) the C/C++ runtime or in the bundle?
  case $1 in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*|libgomp.so.*) return 0 ;;
  esac
  compgen -G "usr/lib/$ARCH/$1" >/dev/null || compgen -G "$OMPI/lib/$1" >/dev/null
}
dropped=()
drop_unloadable() {  # the files among $@ with a NEEDED library the bundle lacks
  local f need
  for f in "$@"; do
    for need in $("$PATCHELF" --print-needed "$f"); do
      if ! bundled "$need"; then dropped+=("$(basename "$f")"); rm -f "$f"; break; fi
    done
  done
}
# First OpenMPI's helper libraries for those transports (libmca_common_ucx, _ofi, _verbs),
# then the plugins, which may need them.
drop_unloadable usr/lib/$ARCH/libmca_common_*.so.*.*
find usr -xtype l -delete
mapfile -d '' plugins < <(find "$OMPI/lib/openmpi3" usr/lib/$ARCH/pmix2/lib/pmix \
  usr/lib/$ARCH/hwloc -name '*.so' -type f -print0 2>/dev/null)
drop_unloadable "${plugins[@]}"
((${#dropped[@]} == 0)) || echo "gpu-bundle: left out ${#dropped[@]} plugins and helpers: ${dropped[*]}"

# libmpi.so beside libmpi.so.40 (Debian keeps the link in openmpi/lib only): a program linked
# with it then gets the folder of the bundle's libraries as RUNPATH (tests/gpu/device.sh).
[[ -e usr/lib/$ARCH/libmpi.so ]] || ln -s libmpi.so.40 usr/lib/$ARCH/libmpi.so

# --- make it relocatable ---
# Absolute symbolic links (libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13) -> relative.
while IFS= read -r -d '' link; do
  target=$(readlink "$link")
  [[ $target == /* ]] || continue
  target=${target#/}
  [[ $target == usr/* ]] || target=usr/$target
  [[ -e $target ]] || die "link $link points outside the bundle: /${target#usr/}"
  ln -sfn "$(realpath --relative-to="$(dirname "$link")" "$target")" "$link"
done < <(find usr -type l -print0)

# pkg-config: prefix=/usr and the like -> ${pcfiledir}/<path to usr>.
while IFS= read -r -d '' pc; do
  up=$(realpath --relative-to="$(dirname "$pc")" usr)
  sed -i -E "s#(^|[=[:space:]])/usr(/|[[:space:]]|\$)#\1\${pcfiledir}/$up\2#g" "$pc"
done < <(find usr -name '*.pc' -print0)

# CMake package files: every absolute /usr -> ${CMAKE_CURRENT_LIST_DIR}/<path to usr>. This
# also rewrites Debian's "loaded through /lib -> /usr/lib" guards, which then compute the
# same prefix as the relative code beside them.
while IFS= read -r -d '' cm; do
  up=$(realpath --relative-to="$(dirname "$cm")" usr)
  sed -i -E "s#([\"([:space:]])/usr(/|\"|[[:space:]]|\$)#\1\${CMAKE_CURRENT_LIST_DIR}/$up\2#g" "$cm"
done < <(find usr -name '*.cmake' -print0)

left=$(grep -rlE '(^|[="( ])/usr(/|"| |$)' --include='*.pc' --include='*.cmake' usr || true)
[[ -z $left ]] || die "absolute /usr paths left in: $left"

# RUNPATH $ORIGIN on every shared library (and $ORIGIN/.. in subfolders such as
# openblas-openmp, for libgfortran), pkgconf's to the library folder.
while IFS= read -r -d '' so; do
  rp='$ORIGIN'
  [[ $(dirname "$so") == "usr/lib/$ARCH" ]] || rp="\$ORIGIN:\$ORIGIN/$(realpath --relative-to="$(dirname "$so")" "usr/lib/$ARCH")"
  "$PATCHELF" --set-rpath "$rp" "$so"
done < <(find usr/lib -type f -name '*.so*' -print0)
for prog in pkgconf orterun orted; do "$PATCHELF" --set-rpath "\$ORIGIN/../lib/$ARCH" usr/bin/$prog; done

# Every library's and program's dependencies are in the bundle or are the C/C++ runtime.
while IFS= read -r -d '' so; do
  for need in $("$PATCHELF" --print-needed "$so"); do
    bundled "$need" || die "$so needs $need, which is not in the bundle"
  done
done < <(find usr/lib usr/bin -type f \( -name '*.so*' -o -path 'usr/bin/*' \) -print0)

printf '%s\n' "${manifest[@]}" | sort >MANIFEST
cp MANIFEST "$OUT_DIR/MANIFEST"

# --- one archive ---
rm -f "$ARCHIVE.tmp"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - usr MANIFEST |
  xz -T0 -9 >"$ARCHIVE.tmp"
mv "$ARCHIVE.tmp" "$ARCHIVE"
unpacked=$(du -sb usr | cut -f1)
packed=$(stat -c %s "$ARCHIVE")
echo "gpu-bundle: $ARCHIVE: $((packed / 1024)) KiB ($((unpacked / 1024)) KiB unpacked, ${#manifest[@]} packages)"
