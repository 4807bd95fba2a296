#!/usr/bin/env bash
# The `tidemark` package as a user gets it: the build tree's `python` component (what a wheel
# holds: python/CMakeLists.txt) installed into a fresh venv's site-packages, then
# test_module.py run by that venv's interpreter against the installed package alone -- its own
# command in tidemark/bin, its native part, no TIDEMARK_CLI, no source tree on the path.
# usage: run-installed.sh BUILD_DIR WORK_DIR
set -euo pipefail
build=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}

rm -rf "$work"
# --without-pip: nothing is downloaded; numpy, if the system has it, stays out as well.
"$python" -m venv --without-pip "$work/venv"
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
cmake --install "$build" --component python --prefix "$site" >/dev/null
unset TIDEMARK_CLI PYTHONPATH
cd "$work"
TIDEMARK_TEST_INSTALLED="$site" exec "$work/venv/bin/python" "$here/test_module.py" -v
