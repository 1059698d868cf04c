#!/usr/bin/env bash
# Call 10 (carry build-dev = main, build-exp/sp = wip/gemv-copy: the q/k/v or o launches may take another
# function of the same GEMV code, HZ_GEMV_COPY bits 1 / 4; .devcarry/cp.cubin): whether the function's
# identity alone moves the step. SASS of the three copies compared first.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin HZ_LIBDIR=$PWD/.devcarry/lib
B=build-dev; S=build-exp/sp
ln -sf libhorizon.so.0.1.0 $S/libhorizon.so.0
T0=$(date +%s); t() { echo "  [$(( $(date +%s) - T0 )) s]"; }
date
/usr/local/cuda/bin/cuobjdump -sass .devcarry/cp.cubin > $OUT/sass_cp.txt 2>&1
python3 - $OUT/sass_cp.txt <<'PY'
import re,sys
txt=open(sys.argv[1]).read(); parts=re.split(r'\n\s*Function : ', txt); f={}
for p in parts[1:]:
    n=p.split('\n',1)[0].strip()
    if 'dgemv_kernelILb1ELb0ELi8ELi4E' in n: f[n[-40:]]=[m.group(1) for m in re.finditer(r'/\*[0-9a-f]{4,}\*/\s+(.*?;)', p)]
ks=sorted(f); print({k: len(v) for k,v in f.items()}); print('identical code:', all(f[k]==f[ks[0]] for k in ks))
PY
scripts/bench --build $B --models olmoe --steps models --out $OUT/models > $OUT/models.log 2>&1; echo "models rc $?"; t
M=/tmp/hz-bench-work/olmoe.hzq
hb() { d=$1 c=$2; echo "== hz-bench olmoe c64 $d copy=$c"; HZ_GEMV_COPY=$c timeout 100 $d/tools/hz-bench $M --device cuda:0 --executor grouped --resident 64 --transport threaded --blocks 1 --json $OUT/hb.json > /dev/null 2>&1; echo "rc $?"; python3 -c "import json; r=json.load(open('$OUT/hb.json'))['runs'][0]; print(r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64'])"; }
hb $B 0; for i in 1 2; do for c in 0 1 4; do hb $S $c; done; done; t
rm -rf $OUT/models $OUT/hb.json
date
