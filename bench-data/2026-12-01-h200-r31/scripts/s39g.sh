#!/usr/bin/env bash
# Call 9: SASS of the decode GEMV kernels of main (main.cubin) and of wip/gemv-spec (sp.cubin).
set -u
C=/usr/local/cuda/bin/cuobjdump; ls /usr/local/cuda/bin | tr '\n' ' '; echo
for f in main sp; do $C -sass .devcarry/$f.cubin > $OUT/sass_$f.txt 2>&1; echo "$f rc $? $(wc -l < $OUT/sass_$f.txt)"; done
