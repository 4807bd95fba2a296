#!/usr/bin/env bash
# Saves screenshots of tidemark-gui's main views into docs/images/, rendered under a real X
# server (Xvfb, via xvfb-run) from a recording of samples/pitfall_accumulated_loss: memory that
# grows step by step, and the graph-retention finding naming the line responsible; then the
# timeline stacked by category, and Compare against the --fixed run.
#   gui/tests/screenshots.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
gui=$build/gui/tidemark-gui

[ -x "$gui" ] || { echo "screenshots.sh: $gui not built (needs Qt 6)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/cli/tidemark" record -o "$tmp/accumulated_loss.db" --stacks 32 -- \
  "$build/samples/pitfall_accumulated_loss" >/dev/null
"$build/cli/tidemark" record -o "$tmp/accumulated_loss_fixed.db" --stacks 32 -- \
  "$build/samples/pitfall_accumulated_loss" --fixed >/dev/null
cd "$tmp"  # the views name the traces as given: short names, not the temporary directory
mkdir -p "$root/docs/images"
shot() {  # NAME ARGS...
  local name=$1
  shift
  QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" \
    "$gui" --screenshot "$root/docs/images/gui-$name.png" "$@"
  echo "docs/images/gui-$name.png"
}
for view in timeline allocator summary flame; do
  shot "$view" --view "$view" accumulated_loss.db
done
shot timeline-category --view timeline --stack category accumulated_loss.db
shot compare --compare accumulated_loss.db accumulated_loss_fixed.db
shot flame-compare --view flame --compare accumulated_loss.db accumulated_loss_fixed.db
