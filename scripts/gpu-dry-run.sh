#!/usr/bin/env bash
# Runs the GPU machine's command (tests/gpu/device.sh) where that machine's conditions hold
# except the GPU: a minimal Debian 12 root (mmdebstrap: the C++ toolchain, make, cmake, ninja,
# python3 and nothing else -- no development package, no pkg-config, no xz), this machine's CUDA
# toolkit mounted read-only, no network, and only what the device tool carries: the files git
# tracks or does not ignore, plus .gpu-deps and .cache/fashion-mnist. It goes as far as a
# machine without a GPU can: unpack the bundle, configure, build, check that the programs load,
# ctest -L gpu (GPU tests skip with "no CUDA device"); run.sh then exits 77
# (TIDEMARK_GPU_DRY_RUN=1). docs/cuda.md says how to read it.
#
#   scripts/gpu-dry-run.sh [--jobs N] [--keep-build] [--fake-gpu]
#
# --keep-build reuses the previous dry run's build directory (an incremental build); by default
# the build starts from nothing, as on the device. --fake-gpu answers for nvidia-smi, so run.sh
# takes its GPU path to the end (interpose, benchmarks, snapshots, the report), each step
# finding no device: a check of the scripts' own logic, which ends in RESULT: FAIL (exit 1). Needs root (chroot, mount namespaces),
# mmdebstrap (apt-get install mmdebstrap) and network to a Debian mirror the first time, to make
# the root (kept in .cache/gpu-dry-run/rootfs). Exit status: device.sh's (77 = as expected).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$ROOT/.cache/gpu-dry-run
ROOTFS=$WORK/rootfs
JOBS=2
KEEP=0
FAKE_GPU=0
while (($#)); do
  case $1 in
    --jobs) JOBS=$2; shift 2 ;;
    --keep-build) KEEP=1; shift ;;
    --fake-gpu) FAKE_GPU=1; shift ;;
    *) echo "usage: scripts/gpu-dry-run.sh [--jobs N] [--keep-build] [--fake-gpu]" >&2; exit 2 ;;
  esac
done
die() { echo "gpu-dry-run: $*" >&2; exit 1; }

[[ $(id -u) == 0 ]] || die "needs root (chroot and mount namespaces)"
for tool in unshare chroot mount git; do command -v "$tool" >/dev/null || die "needs $tool"; done
CUDA=$(CUDA_HOME=${CUDA_HOME:-} "$ROOT/tests/gpu/cuda_home.sh") || die "needs a CUDA toolkit here"
[[ -e $ROOT/.gpu-deps/tidemark-gpu-deps.tar.xz ]] || "$ROOT/scripts/gpu-bundle.sh"
[[ -e $ROOT/.cache/fashion-mnist/train-images-idx3-ubyte.gz ]] ||
  die "no .cache/fashion-mnist: mkdir -p .cache/fashion-mnist && cp /usr/share/datasets/fashion-mnist/*.gz .cache/fashion-mnist/"

# The root: a toolchain and nothing of the project's dependencies.
if [[ ! -x $ROOTFS/usr/bin/cmake ]]; then
  command -v mmdebstrap >/dev/null || die "needs mmdebstrap to make the root (apt-get install mmdebstrap)"
  rm -rf "$ROOTFS.tmp"
  mkdir -p "$(dirname "$ROOTFS")"
  mmdebstrap --variant=minbase --include=g++,make,cmake,ninja-build,python3 bookworm "$ROOTFS.tmp"
  mv "$ROOTFS.tmp" "$ROOTFS"
fi
for f in usr/include/sqlite3.h usr/include/gtest usr/include/zlib.h usr/include/libunwind.h \
         usr/include/elfutils usr/include/fmt usr/include/nlohmann usr/include/CLI usr/include/png.h \
         usr/include/zstd.h usr/include/benchmark usr/bin/pkg-config usr/bin/pkgconf usr/bin/xz; do
  [[ ! -e $ROOTFS/$f ]] || die "$ROOTFS has /$f: not the bare machine this run stands for"
done

# The tree as the device tool sends it: tracked and untracked-not-ignored files, plus the carry.
SRC=$ROOTFS/work/tidemark
mkdir -p "$SRC"
if ((KEEP)) && [[ -d $SRC/build-gpu ]]; then
  find "$SRC" -mindepth 1 -maxdepth 1 ! -name build-gpu -exec rm -rf {} +
else
  rm -rf "$SRC" && mkdir -p "$SRC"
fi
CARRY=(.gpu-deps .cache/fashion-mnist)
(cd "$ROOT" && { git ls-files -co --exclude-standard -z; find "${CARRY[@]}" -type f -print0; } |
  tar --null -T - -cf -) | tar -xf - -C "$SRC"
bytes=$(cd "$SRC" && find . -path ./build-gpu -prune -o -type f -printf '%s\n' | awk '{s += $1} END {print s}')
echo "gpu-dry-run: carried $((bytes / 1024)) KiB of 65536 KiB (the tree, ${CARRY[*]})"
((bytes < 64 * 1024 * 1024)) || die "more than the device tool's 64 MiB"

# The CUDA toolkit where this machine has it, read-only; no network (a new network namespace:
# only the loopback, brought up as on any machine, for OpenMPI's launcher and PMIx); /sys
# read-only (hwloc reads the CPU topology there); mounts vanish with the namespace.
mkdir -p "$ROOTFS$CUDA" "$ROOTFS/proc" "$ROOTFS/dev" "$ROOTFS/tmp" "$ROOTFS/sys"
[[ $CUDA == /usr/local/cuda ]] || ln -sfn "$CUDA" "$ROOTFS/usr/local/cuda"
rm -rf "$WORK/out" && mkdir -p "$WORK/out" "$ROOTFS/out"
start=$(date +%s)
set +e
unshare --mount --net --propagation private bash -euo pipefail -c '
  rootfs=$1 cuda=$2 jobs=$3 out=$4 fake_gpu=$5
  mount --bind "$cuda" "$rootfs$cuda" && mount -o remount,bind,ro "$rootfs$cuda"
  mount -t proc proc "$rootfs/proc"
  mount --rbind /dev "$rootfs/dev"
  mount --rbind /sys "$rootfs/sys" && mount -o remount,bind,ro "$rootfs/sys"
  if command -v ip >/dev/null; then ip link set lo up; else echo "gpu-dry-run: no ip here: the loopback stays down"; fi
  mount -t tmpfs tmpfs "$rootfs/tmp"
  mount --bind "$out" "$rootfs/out"
  dry=1
  if [ "$fake_gpu" = 1 ]; then  # in the namespace'"'"'s /tmp: gone with it
    mkdir -p "$rootfs/tmp/fake-gpu"
    printf "%s\n" "#!/bin/sh" "case \"\$*\" in -L) echo \"GPU 0: stand-in\";; *) echo \"stand-in, 0 MiB, 0\";; esac" \
      >"$rootfs/tmp/fake-gpu/nvidia-smi"
    chmod +x "$rootfs/tmp/fake-gpu/nvidia-smi"
    dry=0
  fi
  exec chroot "$rootfs" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
    PATH=/tmp/fake-gpu:/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin OUT=/out JOBS="$jobs" \
    TIDEMARK_GPU_DRY_RUN=$dry TIDEMARK_GPU_TIME_SCALE=40 \
    /bin/bash -c "cd /work/tidemark && tests/gpu/device.sh"
' dry-run "$ROOTFS" "$CUDA" "$JOBS" "$WORK/out" "$FAKE_GPU"
rc=$?
set -e
expect="77: configured, built, loaded, GPU tests skipped"
((FAKE_GPU)) && expect="--fake-gpu: 1 expected, with every step run and reporting no device"
echo "gpu-dry-run: device.sh exit $rc after $(($(date +%s) - start)) s ($expect);" \
  "its \$OUT: $WORK/out"
exit $rc
