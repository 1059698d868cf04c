#!/bin/bash
# Prepared for the next session, not run. hz-bench (the contract's protocol, OLMoE c64, grouped, 1 block)
# on one artifact, builds alternating: build-r55/main (main at the end of the fifty-first round),
# build-r55/kvpf (probe_kv_l2.patch, branch wip/probe-kv-l2: HZ_PROBE_KV_PF=1 makes the one-pass attention
# prefetch the next layer's K/V rows into L2 before its wait, =2 the same with evict-last; 0/unset: off) and
# build-r55/m4 (wip/attn-merge4). The step bench cannot show the probe: its layers share one KV cache, so
# its rows stay in L2; the model's layers each have their own. The clock table's "staged rows' wait" grew
# from 645 cycles alone to 1,197 in the step. The probe changes no value: the tokens' hash must equal main's.
# Carry build-r55 and .devcarry/lib; about 4 min.
export LD_LIBRARY_PATH=$PWD/.devcarry/lib PATH=$PATH:/usr/local/cuda/bin
T0=$(date +%s); W=/tmp/hzw; mkdir -p $W
nvidia-smi --query-gpu=uuid,name,driver_version --format=csv,noheader
build-r55/main/tools/hz-mkmodel --arch olmoe --preset olmoe-1b-7b --seed 7 $W/olmoe-ckpt > $OUT/mkmodel.txt 2>&1 &&
  build-r55/main/tools/hz-pack $W/olmoe-ckpt $W/olmoe.hzq > $OUT/pack.txt 2>&1 && rm -rf $W/olmoe-ckpt
echo "artifact rc $? ($(( $(date +%s) - T0 )) s)"
HZ_PROBE_KV_PF=2 HZ_MODEL_GPU_QUICK=1 timeout 100 build-r55/kvpf/test_model_gpu > $OUT/model_kvpf.txt 2>&1
echo "test_model_gpu (kvpf=2, quick) rc $?: $(tail -1 $OUT/model_kvpf.txt)"
hb() { # label build env
  env $3 timeout 90 $2/tools/hz-bench $W/olmoe.hzq --device cuda:0 --executor grouped --resident 64 --transport threaded \
    --blocks 1 --json $OUT/hb_$1_$r.json > $OUT/hb_$1_$r.txt 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['runs'][0]; print('%-10s %8.1f tok/s  tokens %s' % (sys.argv[2], r['pooled_decode_tok_s'], r['generated_tokens_fnv1a64']))" $OUT/hb_$1_$r.json $1 2>&1 | tail -1
}
for r in 1 2; do
  hb main build-r55/main HZ_X=; hb kvpf1 build-r55/kvpf HZ_PROBE_KV_PF=1; hb kvpf2 build-r55/kvpf HZ_PROBE_KV_PF=2
  hb kvpf0 build-r55/kvpf HZ_PROBE_KV_PF=0; hb m4 build-r55/m4 HZ_X=
done
cd $OUT && tar -czf r53a.tgz *.txt *.json && rm -f *.txt *.json
echo "done after $(( $(date +%s) - T0 )) s"
# If kvpf2 (or 1) gains beyond the spread of main's two runs: make it a real change (the pointers in
# hz_dattn_args, documented; the chunked kernel too), test_model_gpu, the sanitizers, the contract.
