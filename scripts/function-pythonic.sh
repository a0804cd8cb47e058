#!/usr/bin/env bash
# Installs function-pythonic (PyPI crossplane-function-pythonic, a real third-party
# composition function) into a virtual environment under DIR, once, with pyenv's Python 3.12
# (pythonic 0.6.3 needs 3.12 or newer), and prints the path of its `function-pythonic`.
# Usage: scripts/function-pythonic.sh DIR
set -euo pipefail
dir="$1"
version=0.6.3
bin="$dir/bin/function-pythonic"
installed() { [ -x "$bin" ] && [ "$(cat "$dir/.installed" 2>/dev/null)" = "$version" ]; }
if installed; then
  echo "$bin"
  exit 0
fi
# A lock beside DIR: concurrent runs (two cargo test) do not install over each other.
mkdir -p "$(dirname "$dir")"
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir.lock"
  flock 9
  if installed; then
    echo "$bin"
    exit 0
  fi
fi
python=""
for candidate in "$(pyenv root 2>/dev/null)"/versions/3.1[2-9]*/bin/python3 python3.12 python3.13; do
  if command -v "$candidate" >/dev/null 2>&1 &&
    "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
    python="$candidate"
    break
  fi
done
if [ -z "$python" ]; then
  echo "function-pythonic $version needs Python 3.12 or newer (pyenv install 3.12)" >&2
  exit 1
fi
rm -rf "$dir"
"$python" -m venv "$dir" >&2
"$dir/bin/pip" install --quiet --disable-pip-version-check "crossplane-function-pythonic==$version" >&2
echo "$version" >"$dir/.installed"
echo "$bin"
