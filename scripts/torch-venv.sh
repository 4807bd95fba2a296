#!/usr/bin/env bash
# Makes (once) and prints the path of the Python environment that runs real PyTorch for
# `tidemark estimate`'s tests, its scorer and `record`'s hook tests: a venv with PyPI's torch
# and what the estimate cases import besides it (docs/dependencies.md). The C++ product never
# needs it. Kept at $TIDEMARK_TORCH_VENV (default ~/.cache/tidemark/torch-venv) so a second run
# is instant; pip's own cache makes a rebuilt one fast. Prints the interpreter's path on stdout.
# Exit 77 when PyPI cannot be reached and no venv is there (the tests that need it then skip,
# saying so).
set -euo pipefail
venv=${TIDEMARK_TORCH_VENV:-$HOME/.cache/tidemark/torch-venv}
torch_version=${TIDEMARK_TORCH_VERSION:-2.15.0}
# The packages the estimate cases' scripts import besides torch; einx 0.3.0 is what their
# repositories lock (0.4 breaks them).
extras=(numpy einx==0.3.0 einops jaxtyping pandas humanfriendly python-dateutil pytz regex tqdm
        psutil pyyaml)
stamp="$venv/.tidemark-torch-$torch_version"
if [ -f "$stamp" ] && "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi
echo "tidemark: installing PyTorch $torch_version into $venv (several GB the first time)" >&2
python3 -m venv "$venv" >&2
if ! "$venv/bin/pip" install -q --disable-pip-version-check "torch==$torch_version" "${extras[@]}" >&2; then
  echo "tidemark: could not install torch $torch_version from PyPI into $venv" >&2
  exit 77
fi
touch "$stamp"
echo "$venv/bin/python"
