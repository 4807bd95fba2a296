#!/usr/bin/env bash
# Installs the Debian packages Tidemark needs to build and test. Idempotent: quiet when
# everything is present; uses sudo when not root. See docs/dependencies.md for why each.
# --demo: only what `make demo` builds and runs (no GoogleTest, Google Benchmark, clang for the
# fuzzer, Xvfb).
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config python3
  libopenblas-openmp-dev libsqlite3-dev libunwind-dev libdw-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libpng-dev zlib1g-dev libzstd-dev libyaml-dev
  dataset-fashion-mnist
  qt6-base-dev
)
case "${1:-}" in
  --demo) ;;
  "") packages+=(libgtest-dev libgmock-dev libbenchmark-dev clang-14 libclang-rt-14-dev xvfb xauth zstd
        libopenmpi-dev openmpi-bin chromium pybind11-dev python3-dev python3-venv clang-format) ;;
  *) echo "usage: install-deps.sh [--demo]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "tidemark: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "tidemark: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
