#!/bin/sh
# Runs check_gguf.py with a Python that has numpy (HZ_PYTHON, else python3); exit 77 (skipped) without one.
# usage: gguf.sh SOURCE_ROOT HZ_MKMODEL CHECK_GGUF_PY
set -eu
src=$1 mkmodel=$2 check=$3
py=${HZ_PYTHON:-python3}
if ! "$py" -c 'import numpy' >/dev/null 2>&1; then
    echo "gguf: $py has no numpy (scripts/test sets HZ_PYTHON to its venv), skipping"
    exit 77
fi
w=$(mktemp -d "${TMPDIR:-/tmp}/hz-gguf.XXXXXX")
trap 'rm -rf "$w"' EXIT
"$py" "$check" --src "$src" --mkmodel "$mkmodel" --work "$w"
