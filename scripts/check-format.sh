#!/usr/bin/env bash
# Fails when a tracked C++ or CUDA source is not formatted as .clang-format says: the check
# .ci/run makes (`make format-check`); `make format` formats them. Exit 1 naming each file that
# is not, 2 without clang-format (scripts/install-deps.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check-format.sh: clang-format is not installed (scripts/install-deps.sh installs it)" >&2
  exit 2
fi
bad=$(git ls-files -z '*.h' '*.cpp' '*.cu' '*.cuh' |
  xargs -0 clang-format --dry-run 2>&1 | sed -n 's/^\(.*\):[0-9]*:[0-9]*: warning: .*/\1/p' | sort -u)
if [ -n "$bad" ]; then
  echo "check-format.sh: not formatted as .clang-format says (run \`make format\`):" >&2
  echo "$bad" | sed 's/^/  /' >&2
  exit 1
fi
echo "check-format.sh: $(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | wc -l) files formatted ($(clang-format --version))" >&2
