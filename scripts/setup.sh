# Sourced by scripts/demo and scripts/test: installs what is missing and prepares the Python venv.
# Debian 12 packages through apt (when root; otherwise it names what to install and stops).

HZ_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HZ_APT_PACKAGES="meson ninja-build pkg-config gcc g++ clang libclang-rt-14-dev binutils libuv1-dev \
libcjson-dev libxxhash-dev libcmocka-dev abigail-tools python3 python3-venv python3-dev"

hz_missing_packages() {
    local missing=""
    for p in $HZ_APT_PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    echo "$missing"
}

hz_install_packages() {
    local missing
    missing=$(hz_missing_packages)
    [ -z "$missing" ] && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "missing Debian packages:$missing" >&2
        echo "install them with: sudo apt-get install$missing" >&2
        exit 1
    fi
    echo "== installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

# The Python tools (cffi, pytest, numpy) live in .venv, never in the system interpreter.
hz_python_venv() {
    if [ ! -x "$HZ_ROOT/.venv/bin/python" ]; then
        echo "== creating .venv"
        python3 -m venv "$HZ_ROOT/.venv"
    fi
    "$HZ_ROOT/.venv/bin/python" -m pip install -q --disable-pip-version-check cffi pytest numpy
}

# meson_build DIR [meson options...]: configure once, then build.
hz_meson_build() {
    local dir=$1
    shift
    if [ ! -f "$HZ_ROOT/$dir/build.ninja" ]; then
        meson setup "$HZ_ROOT/$dir" "$HZ_ROOT" "$@" >/dev/null
    fi
    ninja -C "$HZ_ROOT/$dir"
}
