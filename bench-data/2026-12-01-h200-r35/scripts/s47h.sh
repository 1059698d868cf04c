#!/usr/bin/env bash
# Call 10: scripts/demo's pipeline on the GPU with the demo's own build type (debugoptimized: the cache's
# invariant checker on) against the release build (build-dev): partial residency, experts ahead.
set -u
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
date
w=/tmp/demo; mkdir -p $w
build-dev/tools/hz-mkmodel --arch olmoe --preset tiny --seed 1 $w/hf > /dev/null && build-dev/tools/hz-pack $w/hf $w/model.hzq --quiet
for b in build-dev build-dbg; do
  echo "== $b"
  s=$(date +%s.%N)
  timeout 150 $b/examples/decode $w/model.hzq --device cuda:0 --resident 4 --tokens 24 --prompt 1,2,3,4,5,6,7,8 > $OUT/decode_$b.txt 2>&1
  echo "rc $? in $(echo "$(date +%s.%N) - $s" | bc) s"; tail -4 $OUT/decode_$b.txt | cut -c1-300
done
date
