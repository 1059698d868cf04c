#!/usr/bin/env bash
# The Python package's test step: installs libhorizon from a meson build directory into a temporary
# DESTDIR, builds the horizon-cffi wheel against it (found through pkg-config, as a user's build would),
# installs the wheel into a fresh virtual environment and runs the package's pytest suite, which makes
# its tiny model with the build's tools.
# Usage: tests/python/run.sh BUILD_DIR
#   PYTHON      interpreter for the venv (default python3)
#   HZ_PY_VENV  reuse this venv instead of a fresh one (faster when iterating)
#   HZ_PY_KEEP  directory to copy the built wheel into
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 1 ] || { echo "usage: $0 BUILD_DIR [pytest args...]" >&2; exit 2; }
build=$(cd "$1" && pwd)
shift
py=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== installing $build into a temporary DESTDIR"
# meson reports its errors on stdout: keep it, show it only on failure.
meson install -C "$build" --destdir "$tmp/dest" --no-rebuild --quiet > "$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; echo "meson install from $build failed (is it fully built?)" >&2; exit 1; }
pc=$(find "$tmp/dest" -name horizon.pc -print -quit)
[ -n "$pc" ] || { echo "horizon.pc was not installed" >&2; exit 1; }
# horizon.pc says prefix=/usr/local; the sysroot makes pkg-config (and so the package's build script)
# prepend the DESTDIR. The extension gets the library directory as its run path: no LD_LIBRARY_PATH.
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR="$tmp/dest"
unset HORIZON_PREFIX

venv=${HZ_PY_VENV:-$tmp/venv}
if [ ! -x "$venv/bin/python" ]; then
    echo "== creating a fresh venv ($("$py" --version))"
    "$py" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
"${pip[@]}" install pytest numpy

# Build from a copy so an in-tree build/ or *.egg-info never lands in the checkout.
cp -r "$root/bindings/python" "$tmp/src"
rm -rf "$tmp/src/build" "$tmp/src"/src/*.egg-info
echo "== building the wheel"
"${pip[@]}" wheel --no-deps -w "$tmp/wheels" "$tmp/src"
wheel=$(ls "$tmp/wheels"/horizon_cffi-*.whl)
echo "   $(basename "$wheel")"
[ -n "${HZ_PY_KEEP:-}" ] && mkdir -p "$HZ_PY_KEEP" && cp "$wheel" "$HZ_PY_KEEP/"
"${pip[@]}" install --force-reinstall "$wheel"

echo "== pytest"
cd "$tmp"  # not the source tree: `import horizon` must find the installed package
PYTHONDONTWRITEBYTECODE=1 HZ_BUILD_ROOT="$build" HZ_SOURCE_ROOT="$root" \
    "$venv/bin/python" -m pytest -p no:cacheprovider -q "$tmp/src/tests" "$@"
