#!/bin/sh
# The public header must compile alone, warning-free, as C11 and as C++ (DESIGN.md section 3).
set -eu
inc=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <horizon/horizon.h>\nint main(void) { return hz_version_number() == HZ_VERSION_NUMBER ? 0 : 1; }\n' > "$tmp/t.c"
cp "$tmp/t.c" "$tmp/t.cpp"
cc=${CC:-cc}
"$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$inc" "$tmp/t.c"
echo "C11: ok"
cxx=$(command -v c++ || command -v g++ || command -v clang++ || true)
if [ -z "$cxx" ]; then echo "no C++ compiler found" >&2; exit 1; fi
"$cxx" -std=c++11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$inc" "$tmp/t.cpp"
echo "C++11: ok"
