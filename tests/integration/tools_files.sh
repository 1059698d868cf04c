#!/bin/sh
# The tools and the files around them: an output never replaces an input (shards, config.json, the
# index), another output (however either is spelt) or something
# that is not a regular file; a failed run leaves what was at its output paths as it was; a FIFO given
# as an input is refused at once; hz-mkmodel run again in a directory leaves one checkpoint there (and
# its --embed-std changes the embedding alone); a
# config with absurd counts is refused before anything is allocated for them; an expert width the
# checkpoint's expert tensors do not have, or a missing expert tensor, is refused from the headers
# before any output is created or any buffer is sized from that width.
# usage: tools_files.sh HZ_MKMODEL HZ_PACK HZ_INSPECT
set -eu
mkmodel=$1 pack=$2 inspect=$3
w=$(mktemp -d "${TMPDIR:-/tmp}/hz-tools-files.XXXXXX")
trap 'rm -rf "$w"' EXIT

fail() { echo "tools_files: FAIL: $*" >&2; exit 1; }
# expect_fail STDERR_NEEDLE cmd...: a non-zero exit within 30 s (a FIFO must not block) and the needle
expect_fail() {
    needle=$1; shift
    rc=0
    timeout 30 "$@" >"$w/out" 2>"$w/err" || rc=$?
    test $rc -ne 0 || fail "succeeded: $*"
    test $rc -ne 124 || fail "timed out (blocked?): $*"
    grep -q -- "$needle" "$w/err" || { cat "$w/err" >&2; fail "stderr lacks '$needle': $*"; }
}
no_temp_left() { ! ls "$1" | grep -q '\.tmp\.' || fail "a temporary file was left in $1: $(ls "$1")"; }

"$mkmodel" --arch olmoe --preset tiny --seed 2 "$w/m" >/dev/null
cp "$w/m/model.safetensors" "$w/orig.safetensors"

# 1. outputs that name an input or each other are refused, and the input is untouched
expect_fail "the export path $w/m/model.safetensors is the checkpoint's file" \
    "$pack" "$w/m" "$w/a.hzq" --export-dequantized "$w/m/model.safetensors" --quiet
expect_fail "the artifact path $w/m/model.safetensors is the checkpoint's file" \
    "$pack" "$w/m" "$w/m/model.safetensors" --quiet
expect_fail "the artifact and the export are both" "$pack" "$w/m" "$w/same" --export-dequantized "$w/same" --quiet
# ... however spelt, and config.json is an input too
expect_fail "are the same file" "$pack" "$w/m" "$w/same" --export-dequantized "$w/./same" --quiet
mkdir "$w/sub"
expect_fail "are the same file" "$pack" "$w/m" "$w/same" --export-dequantized "$w/sub/../same" --quiet
cp "$w/m/config.json" "$w/orig.config.json"
expect_fail "is the checkpoint's file $w/m/config.json" "$pack" "$w/m" "$w/m/config.json" --quiet
expect_fail "is the checkpoint's file $w/m/config.json" \
    "$pack" "$w/m" "$w/a.hzq" --export-dequantized "$w/sub/../m/config.json" --quiet
cmp "$w/m/config.json" "$w/orig.config.json" || fail "config.json changed"
cmp "$w/m/model.safetensors" "$w/orig.safetensors" || fail "the checkpoint changed"
test ! -e "$w/a.hzq" && test ! -e "$w/same" || fail "an output was written by a refused run"

# 2. a failed run leaves existing outputs as they were (here the artifact's directory does not exist)
echo "an earlier export" >"$w/prev.safetensors"
echo "an earlier artifact" >"$w/prev.hzq"
expect_fail "cannot create" "$pack" "$w/m" "$w/no/such/dir/a.hzq" --export-dequantized "$w/prev.safetensors" --quiet
grep -q "an earlier export" "$w/prev.safetensors" || fail "the earlier export was lost"
no_temp_left "$w"
"$pack" "$w/m" "$w/prev.hzq" --export-dequantized "$w/prev.safetensors" --quiet
"$inspect" --verify "$w/prev.hzq" | grep -q '^verify: OK' || fail "the replaced artifact does not verify"
test "$(head -c 8 "$w/prev.safetensors" | od -An -tu8 | tr -d ' ')" -gt 0 || fail "the export was not replaced"
no_temp_left "$w"

# 3. what is not a regular file: never replaced as an output, refused at once as an input
mkfifo "$w/fifo"
expect_fail "not a regular file" "$pack" "$w/m" "$w/fifo" --quiet
expect_fail "not a regular file" "$pack" "$w/m" "$w/b.hzq" --export-dequantized "$w/fifo" --quiet
test -p "$w/fifo" || fail "the FIFO was replaced"
expect_fail "not a regular file" "$inspect" "$w/fifo"
mkdir "$w/mf"
cp "$w/m/model.safetensors" "$w/mf/"
mkfifo "$w/mf/config.json"
expect_fail "not a regular file" "$pack" "$w/mf" "$w/c.hzq" --quiet
rm "$w/mf/config.json" && cp "$w/m/config.json" "$w/mf/" && rm "$w/mf/model.safetensors" && mkfifo "$w/mf/model.safetensors"
expect_fail "not a regular file" "$pack" "$w/mf" "$w/c.hzq" --quiet
no_temp_left "$w"

# 4. hz-mkmodel run again in one directory: one checkpoint, the same as in a fresh directory
"$mkmodel" --arch qwen2moe --preset tiny --seed 4 --shard-bytes 1000000 "$w/q" >/dev/null
ls "$w/q" | grep -q 'model-00001-of-' || fail "no shards"
"$mkmodel" --arch qwen2moe --preset tiny --seed 5 "$w/q" >/dev/null
test -z "$(ls "$w/q" | grep -e 'model-0' -e 'index.json')" || fail "stale shards or index left: $(ls "$w/q")"
"$mkmodel" --arch qwen2moe --preset tiny --seed 5 "$w/q5" >/dev/null
"$pack" "$w/q" "$w/q.hzq" --quiet && "$pack" "$w/q5" "$w/q5.hzq" --quiet
test "$("$inspect" "$w/q.hzq" | sed -n 's/^identity: //p')" = "$("$inspect" "$w/q5.hzq" | sed -n 's/^identity: //p')" ||
    fail "the rerun's checkpoint differs from a fresh one"
"$mkmodel" --arch qwen2moe --preset tiny --seed 5 --shard-bytes 1000000 "$w/q" >/dev/null
test ! -e "$w/q/model.safetensors" || fail "the single file of the earlier run was left beside the shards"
expect_fail "not a number" "$mkmodel" --arch olmoe --preset tiny --seed -1 "$w/x"
# --embed-std: 0.02 is the default (the same checkpoint); another value changes the embedding and
# nothing else (every other tensor's bytes are the same); values outside (0, 16] are refused
"$mkmodel" --arch qwen2moe --preset tiny --seed 5 --embed-std 0.02 "$w/e2" >/dev/null
cmp -s "$w/q5/model.safetensors" "$w/e2/model.safetensors" || fail "--embed-std 0.02 is not the default"
"$mkmodel" --arch qwen2moe --preset tiny --seed 5 --embed-std 1 "$w/e1" >/dev/null
python3 - "$w/q5/model.safetensors" "$w/e1/model.safetensors" <<'PY' || fail "--embed-std 1 changed more than the embedding"
import json, struct, sys
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h.pop("__metadata__", None)
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}
a, e = tensors(sys.argv[1]), tensors(sys.argv[2])
assert a.keys() == e.keys()
changed = sorted(k for k in a if a[k] != e[k])
assert changed == ["model.embed_tokens.weight"], changed
PY
for bad in 0 -1 17 x 1e400; do
    expect_fail "not a standard deviation" "$mkmodel" --arch olmoe --preset tiny --embed-std "$bad" "$w/x"
done
expect_fail "not a positive number" "$mkmodel" --arch olmoe --preset tiny --shard-bytes -5 "$w/x"

# 5. absurd counts in config.json are refused by the parser (no allocation sized by them)
mkdir "$w/big"
cp "$w/m/model.safetensors" "$w/big/"
sed 's/"num_hidden_layers":[[:space:]]*[0-9]*/"num_hidden_layers": 4294967295/' "$w/m/config.json" >"$w/big/config.json"
grep -q 4294967295 "$w/big/config.json" || fail "the test could not edit config.json"
expect_fail "at most 4096 layers" "$pack" "$w/big" "$w/big.hzq" --quiet

# 6. the routed experts' tensors are checked against config.json before anything is created or sized
# from the expert width. expect_refused NEEDLE DIR: refused with an HZ_EFORMAT naming the tensor (one
# line: not an out-of-memory error, nor a sanitizer's report), artifact and export absent, no temporary
# left; and with the artifact's directory missing, the same message: the check comes before the
# outputs are created.
expect_refused() {
    expect_fail "$1" "$pack" "$2" "$w/bad.hzq" --export-dequantized "$w/bad.st" --quiet
    grep -q "^hz-pack: HZ_EFORMAT: " "$w/err" && test "$(wc -l <"$w/err")" -eq 1 ||
        { cat "$w/err" >&2; fail "not one HZ_EFORMAT line: $2"; }
    test ! -e "$w/bad.hzq" && test ! -e "$w/bad.st" || fail "a refused run left an output: $2"
    no_temp_left "$w"
    expect_fail "$1" "$pack" "$2" "$w/no/such/dir/bad.hzq" --quiet
}
# copy_with_width SRC DST KEY VALUE: the checkpoint SRC (every file) with config.json's KEY set to VALUE
copy_with_width() {
    mkdir "$2" && cp "$1"/* "$2/"
    sed "s/\"$3\":[[:space:]]*[0-9]*/\"$3\": $4/" "$1/config.json" >"$2/config.json"
    grep -q "\"$3\": $4" "$2/config.json" || fail "the test could not set $3 in $2/config.json"
}
gate0="tensor 'model.layers.0.mlp.experts.0.gate_proj.weight'"
# olmoe (expert width 256): a wrong width, and one that would ask for terabytes per buffer
copy_with_width "$w/m" "$w/w512" intermediate_size 512
expect_refused "$gate0: shape \[256, 256\] in the checkpoint, the config needs \[512, 256\]" "$w/w512"
copy_with_width "$w/m" "$w/wmax" intermediate_size 4294967295
expect_refused "$gate0: shape \[256, 256\] in the checkpoint, the config needs \[4294967295, 256\]" "$w/wmax"
# qwen2_moe (moe_intermediate_size 320; the shared expert's intermediate_size stays right), sharded
copy_with_width "$w/q" "$w/qmax" moe_intermediate_size 4294967295
ls "$w/qmax" | grep -q 'model-00001-of-' || fail "the qwen2_moe checkpoint is not sharded"
expect_refused "$gate0: shape \[320, 256\] in the checkpoint, the config needs \[4294967295, 256\]" "$w/qmax"
# the last expert tensor of the sequence missing (renamed in the header: the data stays in place)
last="model.layers.1.mlp.experts.7.down_proj.weight"
mkdir "$w/miss" && cp "$w/m/config.json" "$w/miss/"
LC_ALL=C sed "s/$last/${last%t}x/" "$w/m/model.safetensors" >"$w/miss/model.safetensors"
cmp -s "$w/m/model.safetensors" "$w/miss/model.safetensors" && fail "the test could not rename $last"
expect_refused "tensor '$last' is missing from the checkpoint" "$w/miss"
echo "tools_files: OK"
