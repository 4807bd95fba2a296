#!/usr/bin/env bash
# Saves screenshots of tidemark-gui's main views into docs/images/, rendered under a real X
# server (Xvfb, via xvfb-run) from a recording of samples/train_mlp.
#   gui/tests/screenshots.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
gui=$build/gui/tidemark-gui

[ -x "$gui" ] || { echo "screenshots.sh: $gui not built (needs Qt 6)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TIDEMARK_OUTPUT="$tmp/train_mlp.db" "$build/samples/train_mlp" 20 >/dev/null
mkdir -p "$root/docs/images"
for view in timeline allocator summary; do
  QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" \
    "$gui" --screenshot "$root/docs/images/gui-$view.png" --view "$view" "$tmp/train_mlp.db"
  echo "docs/images/gui-$view.png"
done
