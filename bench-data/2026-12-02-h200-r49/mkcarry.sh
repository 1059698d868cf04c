#!/bin/bash
# mkcarry.sh BUILD_DIR DEST: stripped binaries a device call needs, in one flat-ish folder.
set -e
B=$1; D=$2; rm -rf $D; mkdir -p $D/tools
for f in tests/unit/model/bench_model_ops tests/unit/model/test_model_gpu tests/unit/model/test_decode_screen \
         tests/unit/model/test_decode_gemv tests/unit/model/test_router_cluster cuda/test_gpu_w4a16; do
  cp $B/$f $D/; strip $D/$(basename $f); done
cp -L $B/libhorizon.so.0 $D/libhorizon.so.0; strip $D/libhorizon.so.0
for t in hz-bench hz-mkmodel hz-pack hz-ceilings; do cp $B/tools/$t $D/tools/; strip $D/tools/$t; done
du -sh $D
