#!/usr/bin/env bash
# Installs the Python SDK of composition functions (PyPI crossplane-function-sdk-python)
# into a virtual environment under DIR, once, and prints the path of its python, which runs
# the functions of tests/functions/ (tests/runner_hostile.rs). The SDK needs Python 3.11 or
# newer: python3 if it is, else pyenv's newest 3.11+. A version stamp in DIR makes a second
# run print the path at once; a lock beside DIR keeps concurrent runs (test binaries, two
# cargo test) from installing over each other.
# Usage: scripts/function-sdk.sh DIR
set -euo pipefail
dir="${1:?usage: scripts/function-sdk.sh DIR}"
version=0.15.1
python_bin="$dir/bin/python"
installed() { [ -x "$python_bin" ] && [ "$(cat "$dir/.installed" 2>/dev/null)" = "$version" ]; }
if installed; then
  echo "$python_bin"
  exit 0
fi
mkdir -p "$(dirname "$dir")"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir.lock"
  flock 9
  # Another run may have installed it while this one waited.
  if installed; then
    echo "$python_bin"
    exit 0
  fi
fi
python=""
for candidate in python3 "$(pyenv root 2>/dev/null)"/versions/3.1[1-9]*/bin/python3 python3.11 python3.12 python3.13; do
  if command -v "$candidate" >/dev/null 2>&1 &&
    "$candidate" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    python="$candidate"
    break
  fi
done
if [ -z "$python" ]; then
  echo "crossplane-function-sdk-python $version needs Python 3.11 or newer" >&2
  exit 1
fi
rm -rf "$dir"
"$python" -m venv "$dir" >&2
"$dir/bin/pip" install --quiet --disable-pip-version-check "crossplane-function-sdk-python==$version" >&2
echo "$version" >"$dir/.installed"
echo "$python_bin"
