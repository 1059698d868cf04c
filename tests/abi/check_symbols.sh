#!/bin/sh
# Compares the dynamic symbols libhorizon.so exports with the committed list, and checks that each
# listed symbol is declared in the public header. Update the list only on purpose (see doc/abi.md).
set -eu
lib=$1 list=$2 header=$3
actual=$(mktemp) expected=$(mktemp) decls=$(mktemp)
trap 'rm -f "$actual" "$expected" "$decls"' EXIT
nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRW]$/ && $3 !~ /^HORIZON_/ {print $3}' | sed 's/@.*//' | sort -u > "$actual"
grep -v '^#' "$list" | sed '/^$/d' | sort -u > "$expected"
if ! diff -u "$expected" "$actual"; then
    echo "exported symbols differ from $list (- expected, + actual)" >&2
    exit 1
fi
# A declaration, not a macro: `type name(` or `type (name)(` (the compatibility entry points that a
# function-like macro of the same name covers, e.g. hz_cache_options_init).
grep -v '^[[:space:]]*#' "$header" > "$decls"
missing=0
while read -r sym; do
    if ! grep -Eq "([ *]$sym|[ *]\($sym\))\(" "$decls"; then
        echo "symbol $sym is exported but not declared in $header" >&2
        missing=1
    fi
done < "$expected"
[ "$missing" -eq 0 ]
# the version node carries the ABI major
nm -D "$lib" | grep -q ' HORIZON_0$' || { echo "version node HORIZON_0 missing" >&2; exit 1; }
echo "$(wc -l < "$expected") symbols match"
