#!/bin/sh
# End to end for one architecture: hz-mkmodel (tiny) -> hz-pack (+ dequantized export) ->
# hz-inspect --verify -> host backing open (e2e_check), then the failure paths of the tools.
# usage: e2e.sh HZ_MKMODEL HZ_PACK HZ_INSPECT E2E_CHECK MKF32CKPT ARCH
set -eu
mkmodel=$1 pack=$2 inspect=$3 check=$4 mkf32=$5 arch=$6
w=$(mktemp -d "${TMPDIR:-/tmp}/hz-e2e-$arch.XXXXXX")
trap 'rm -rf "$w"' EXIT

fail() { echo "e2e($arch): FAIL: $*" >&2; exit 1; }
# expect_fail STDERR_NEEDLE cmd...: the command must exit non-zero and print the needle on stderr
expect_fail() {
    needle=$1; shift
    if "$@" >"$w/out" 2>"$w/err"; then fail "succeeded: $*"; fi
    grep -q -- "$needle" "$w/err" || { cat "$w/err" >&2; fail "stderr lacks '$needle': $*"; }
}

# 1. checkpoint, artifact, verification, backing
"$mkmodel" --arch "$arch" --preset tiny --seed 3 "$w/m"
test -f "$w/m/config.json" && test -f "$w/m/model.safetensors" || fail "mkmodel output missing"
"$pack" "$w/m" "$w/a.hzq" --export-dequantized "$w/d.safetensors" --quiet
test -f "$w/a.hzq" || fail "no artifact"
ls "$w" | grep -q '\.tmp\.' && fail "temporary file left behind"
"$inspect" --verify "$w/a.hzq" >"$w/inspect.txt"
cat "$w/inspect.txt"
grep -q '^verify: OK' "$w/inspect.txt" || fail "verify did not say OK"
id=$(sed -n 's/^identity: //p' "$w/inspect.txt")
test ${#id} -eq 32 || fail "bad identity '$id'"
"$check" "$w/a.hzq" "$id" "$w/d.safetensors" "$w/m"

# 2. determinism: the same seed gives the same checkpoint and the same artifact identity
"$mkmodel" --arch "$arch" --preset tiny --seed 3 "$w/m2" >/dev/null
cmp "$w/m/model.safetensors" "$w/m2/model.safetensors" || fail "mkmodel is not deterministic"
"$pack" "$w/m2" "$w/a2.hzq" --quiet
id2=$("$inspect" "$w/a2.hzq" | sed -n 's/^identity: //p')
test "$id" = "$id2" || fail "identity differs between identical packs: $id $id2"

# 3. a sharded checkpoint (index + shards) packs to the same tensors
"$mkmodel" --arch "$arch" --preset tiny --seed 3 --shard-bytes 1000000 "$w/ms" >/dev/null
test -f "$w/ms/model.safetensors.index.json" || fail "no index for a sharded checkpoint"
ls "$w/ms" | grep -q 'model-00002-of-' || fail "no second shard"
grep -q '"total_size"' "$w/ms/model.safetensors.index.json" || fail "index lacks metadata.total_size"
"$pack" "$w/ms" "$w/as.hzq" --export-dequantized "$w/ds.safetensors" --quiet
ids=$("$inspect" --verify "$w/as.hzq" | sed -n 's/^identity: //p')
"$check" "$w/as.hzq" "$ids" "$w/ds.safetensors" "$w/ms" >/dev/null

# 4. a corrupt blob: --verify names it and exits 1
region=$(sed -n 's/^routed region: [0-9]* bytes at offset //p' "$w/inspect.txt")
stride=$(sed -n 's/.*(stride \([0-9]*\)).*/\1/p' "$w/inspect.txt")
cp "$w/a.hzq" "$w/bad.hzq"
# layer 0 expert 1, byte 100
printf '\377' | dd of="$w/bad.hzq" bs=1 seek=$((region + stride + 100)) conv=notrunc 2>/dev/null
expect_fail "layer 0 expert 1" "$inspect" --verify "$w/bad.hzq"
grep -q "HZ_EIDENTITY" "$w/err" || fail "corrupt blob not HZ_EIDENTITY"
"$inspect" "$w/bad.hzq" >/dev/null || fail "without --verify the summary still prints"
expect_fail "layer 0 expert 1" "$check" "$w/bad.hzq" "$id"

# 5. truncated artifact
head -c 5000 "$w/a.hzq" >"$w/short.hzq"
expect_fail "truncated: file is 5000 bytes" "$inspect" "$w/short.hzq"
expect_fail "HZ_EFORMAT" "$inspect" "$w/short.hzq"
# not an artifact at all
expect_fail "not a Horizon artifact" "$inspect" "$w/m/model.safetensors"

# 6. hz-pack failures: a value outside FP16 range (FP32 checkpoint), a missing checkpoint
"$mkf32" "$w/m" "$w/f32" model.norm.weight 1e6
expect_fail "hz-pack: HZ_ERANGE: tensor 'model.norm.weight'" "$pack" "$w/f32" "$w/f32.hzq" --quiet
test ! -e "$w/f32.hzq" || fail "a failed pack left an artifact"
ls "$w" | grep -q '\.tmp\.' && fail "a failed pack left a temporary file"
# FP32 source within range packs, and records f32 as the source dtype
"$mkf32" "$w/m" "$w/f32ok" model.norm.weight 1.5
"$pack" "$w/f32ok" "$w/f32ok.hzq" --quiet
"$inspect" --verify "$w/f32ok.hzq" | grep -q "precision: source f32" || fail "f32 source dtype"
expect_fail "hz-pack: HZ_EIO" "$pack" "$w/nonexistent" "$w/x.hzq" --quiet
echo "e2e($arch): OK"
