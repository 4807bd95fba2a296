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
DEV_PACKAGES=(
  libsqlite3-dev libgtest-dev libgmock-dev libbenchmark-dev libunwind-dev libdw-dev libelf-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev libpng-dev zlib1g-dev libzstd-dev liblzma-dev
  libopenblas-openmp-dev
)
RUNTIME_PACKAGES=(
  libsqlite3-0 libbenchmark1debian libunwind8 libdw1 libelf1 libfmt9 libpng16-16 zlib1g
  libzstd1 liblzma5 libbz2-1.0 libopenblas0-openmp libgfortran5 libquadmath0
  pkgconf-bin libpkgconf3
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
find usr/bin -mindepth 1 ! -name pkgconf -exec rm -f {} +
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
"$PATCHELF" --set-rpath "\$ORIGIN/../lib/$ARCH" usr/bin/pkgconf

# Every library's dependencies are in the bundle or are the C/C++ runtime.
while IFS= read -r -d '' so; do
  for need in $("$PATCHELF" --print-needed "$so"); do
    case $need in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*|libgomp.so.*) ;;
      *) compgen -G "usr/lib/$ARCH/$need" >/dev/null || die "$so needs $need, which is not in the bundle" ;;
    esac
  done
done < <(find usr/lib usr/bin -type f \( -name '*.so*' -o -name pkgconf \) -print0)

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
