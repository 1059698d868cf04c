#!/usr/bin/env bash
# Call 11: scripts/demo's pipeline on the GPU with a debugoptimized build (invariant checker on) after
# the checker's reads moved to read_now; both architectures, partial residency, experts ahead.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
date
for arch in olmoe qwen2moe; do
  w=/tmp/demo-$arch; mkdir -p $w
  build-dbg/tools/hz-mkmodel --arch $arch --preset tiny --seed 1 $w/hf > /dev/null && build-dbg/tools/hz-pack $w/hf $w/model.hzq --quiet
  for b in build-dbg build-dev; do
    echo "== $arch $b"
    s=$(date +%s%N)
    timeout 150 $b/examples/decode $w/model.hzq --device cuda:0 --resident 4 --tokens 24 --prompt 1,2,3,4,5,6,7,8 > $OUT/decode_${arch}_$b.txt 2>&1
    echo "rc $? in $(( ($(date +%s%N) - s) / 1000000 )) ms"; tail -5 $OUT/decode_${arch}_$b.txt | cut -c1-300
  done
done
date
