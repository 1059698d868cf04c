#!/bin/sh
# ABI check: compares libhorizon.so with the committed abidw baseline (only types reachable from the
# exported functions and declared in the public header count), and checks that every enumerator and
# constant in the committed list still has its value (enums only grow; codes are never renumbered).
#   check_abi.sh LIB BASELINE.abi CONSTANTS.txt INCLUDE_DIR            check (the meson test)
#   check_abi.sh LIB BASELINE.abi CONSTANTS.txt INCLUDE_DIR --update   rewrite both files on purpose
# See doc/abi.md for the promise and for when an update is legitimate.
set -eu
lib=$1 baseline=$2 constants=$3 inc=$4 mode=${5:-check}
hdrs=$inc/horizon

# Without debug information (a release build) abidiff sees no types: nothing to compare.
if ! readelf -S "$lib" | grep -q '\.debug_info'; then
    echo "SKIP: $lib has no debug information"
    exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The constants the header defines: every enumerator of every enum (from the preprocessed header) and
# the object-like HZ_ macros with integer values.
list_constants() {
    sed '/^#include/d' "$hdrs/horizon.h" | ${CC:-cc} -E -P -x c - |
        tr ',{}' '\n\n\n' | sed -n 's/^ *\(HZ_[A-Z0-9_]*[A-Z0-9]\) *=.*/\1/p' > "$tmp/names"
    sed -n 's/^#define \(HZ_[A-Z0-9_]*[A-Z0-9]\) .*/\1/p' "$hdrs/horizon.h" >> "$tmp/names"
    # MINOR and PATCH move with every release; MAJOR is the ABI promise itself.
    grep -Ev "^HZ_VERSION_(MINOR|PATCH|NUMBER)$" "$tmp/names" > "$tmp/n2"; mv "$tmp/n2" "$tmp/names"
}
print_values() { # NAMES_FILE -> "NAME VALUE" lines, values as the compiler sees them
    { echo '#include <stdio.h>'; echo '#include <horizon/horizon.h>'; echo 'int main(void) {'
      while read -r n; do printf '    printf("%%s %%lld\\n", "%s", (long long)(%s));\n' "$n" "$n"; done < "$1"
      echo '    return 0; }'; } > "$tmp/c.c"
    ${CC:-cc} -std=c11 -I"$inc" "$tmp/c.c" -o "$tmp/c" && "$tmp/c"
}

ABIDW_FLAGS="--headers-dir $hdrs --drop-private-types --exported-interfaces-only --no-show-locs
  --no-corpus-path --no-comp-dir-path --no-elf-needed --type-id-style hash"

if [ "$mode" = --update ]; then
    # shellcheck disable=SC2086
    abidw $ABIDW_FLAGS --out-file "$baseline" "$lib"
    list_constants
    print_values "$tmp/names" > "$tmp/values"
    LC_ALL=C sort "$tmp/values" > "$constants"
    echo "wrote $baseline and $constants"
    exit 0
fi

status=0
rc=0
# shellcheck disable=SC2086
abidiff --headers-dir2 "$hdrs" --drop-private-types --exported-interfaces-only --fail-no-debug-info \
    "$baseline" "$lib" > "$tmp/report" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
    cat "$tmp/report"
    if [ $((rc & 8)) -ne 0 ]; then
        echo "INCOMPATIBLE ABI change against $baseline (abidiff exit $rc): this needs a new major version" >&2
    elif [ $((rc & 4)) -ne 0 ]; then
        echo "ABI change against $baseline (abidiff exit $rc): if it is compatible (a function added, an" \
             "options struct grown at its end), update the baseline on purpose (doc/abi.md)" >&2
    else
        echo "abidiff failed (exit $rc)" >&2
    fi
    status=1
else
    echo "abidiff: no ABI change against $(basename "$baseline")"
fi

cut -d' ' -f1 "$constants" > "$tmp/names"
print_values "$tmp/names" > "$tmp/values" || { echo "a committed constant no longer compiles" >&2; exit 1; }
LC_ALL=C sort "$tmp/values" > "$tmp/actual"
if ! diff -u "$constants" "$tmp/actual" > "$tmp/cdiff"; then
    cat "$tmp/cdiff"
    echo "enumerator or constant values differ from $constants (- committed, + header)" >&2
    status=1
else
    echo "constants: $(wc -l < "$constants") values unchanged"
fi
exit $status
