#!/usr/bin/env bash
# Downstream-style test: install libhorizon from a meson build directory into a temporary DESTDIR, then
# build tests/downstream/consumer.c outside the source tree with only the installed header and
# pkg-config file, and tests/downstream/older.c against an older version of that header (two struct
# fields fewer), make a tiny artifact with the installed tools, and run both programs.
# Usage: run.sh BUILD_DIR [SANITIZE]   (SANITIZE: meson's b_sanitize value, e.g. address,undefined)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
sanitize=${2:-none}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# meson reports its errors on stdout: keep it, show it only on failure.
meson install -C "$build" --destdir "$tmp/dest" --no-rebuild --quiet > "$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; echo "meson install from $build failed (is it fully built?)" >&2; exit 1; }
pc=$(find "$tmp/dest" -name horizon.pc -print -quit)
[ -n "$pc" ] || { echo "horizon.pc was not installed" >&2; exit 1; }
# The .pc file says prefix=/usr/local; the sysroot variable makes pkg-config prepend the DESTDIR.
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR="$tmp/dest"
cflags=$(pkg-config --cflags horizon)
libs=$(pkg-config --libs horizon)
libdir=$(pkg-config --libs-only-L horizon | sed 's/^ *-L//; s/ *$//')
bindir=$(dirname "$(find "$tmp/dest" -name hz-pack -type f -print -quit)")
echo "pkg-config: $cflags $libs"

san=()
[ "$sanitize" != none ] && [ -n "$sanitize" ] && san=(-fsanitize="$sanitize")

# Only the copied source, the installed header and the installed library are visible to the compiler.
mkdir "$tmp/consumer"
cp "$here/consumer.c" "$tmp/consumer/"
cd "$tmp/consumer"
# shellcheck disable=SC2086
${CC:-cc} -std=c11 -Wall -Wextra -Wpedantic -Werror "${san[@]}" $cflags consumer.c -o consumer $libs
# shellcheck disable=SC2086
${CXX:-c++} -std=c++11 -Wall -Wextra -Werror "${san[@]}" -x c++ $cflags -fsyntax-only consumer.c

# A program built against an older header than the installed library's: the installed header without
# the last field of hz_cache_options and of hz_model_info (appended later, as far as it knows). Its
# structs are smaller than the library's; older.c checks that the header's *_init macros and the
# library never write or read past them.
hdr=$(find "$tmp/dest" -path '*/horizon/horizon.h' -print -quit)
mkdir -p "$tmp/older/horizon"
awk '
    /^typedef struct (hz_cache_options|hz_model_info) \{/ { inside = 1; n = 0 }
    inside {
        buf[++n] = $0
        if ($0 ~ /^\} (hz_cache_options|hz_model_info);/) {
            for (i = 1; i <= n; i++) if (i != n - 1) print buf[i]  # all but the last field
            inside = 0
        }
        next
    }
    { print }
' "$hdr" > "$tmp/older/horizon/horizon.h"
dropped=$(diff "$hdr" "$tmp/older/horizon/horizon.h" | grep -c '^<' || true)
[ "$dropped" -eq 2 ] || { echo "making the older header dropped $dropped lines, not 2" >&2; exit 1; }
cp "$here/older.c" "$tmp/consumer/"
# shellcheck disable=SC2086
${CC:-cc} -std=c11 -Wall -Wextra -Wpedantic -Werror "${san[@]}" -I"$tmp/older" older.c -o older $libs
# shellcheck disable=SC2086
${CXX:-c++} -std=c++11 -Wall -Wextra -Werror "${san[@]}" -x c++ -I"$tmp/older" -fsyntax-only older.c

"$bindir/hz-mkmodel" --arch olmoe --preset tiny --seed 3 model >/dev/null
"$bindir/hz-pack" model tiny.hzq >/dev/null
LD_LIBRARY_PATH="$libdir" ./consumer tiny.hzq
LD_LIBRARY_PATH="$libdir" ./older tiny.hzq
# The program resolved the installed library, not one from the build tree.
LD_LIBRARY_PATH="$libdir" ldd ./consumer | grep -F "$libdir/libhorizon.so.0"
