#!/bin/sh
# hz-pack's worker pool: the artifact and the dequantized export are byte-identical for every thread
# count, and an error raised in a worker (a value outside FP16 range in a non-routed tensor, or in an
# expert, early or late in the sequence) fails the same way as single-threaded: the same message,
# exit 1, no artifact, no export, no temporary file.
# usage: pack_threads.sh HZ_MKMODEL HZ_PACK HZ_INSPECT MKF32CKPT ARCH
set -eu
mkmodel=$1 pack=$2 inspect=$3 mkf32=$4 arch=$5
w=$(mktemp -d "${TMPDIR:-/tmp}/hz-packthreads-$arch.XXXXXX")
trap 'rm -rf "$w"' EXIT

fail() { echo "pack_threads($arch): FAIL: $*" >&2; exit 1; }
identity() { "$inspect" --verify "$1" | sed -n 's/^identity: //p'; }
no_leftovers() {
    ls "$w" | grep -q '\.tmp\.' && fail "temporary file left behind ($1)"
    return 0
}

"$mkmodel" --arch "$arch" --preset tiny --seed 11 "$w/m" >/dev/null
"$mkmodel" --arch "$arch" --preset tiny --seed 11 --shard-bytes 700000 "$w/ms" >/dev/null

# 1. identical bytes for 1, 2, 4 and 7 workers (7: a window that does not divide the item count), with
# and without the export, unsharded and sharded
for src in m ms; do
    "$pack" "$w/$src" "$w/$src-1.hzq" --threads 1 --export-dequantized "$w/$src-1.st" --quiet
    id1=$(identity "$w/$src-1.hzq")
    test ${#id1} -eq 32 || fail "bad identity '$id1'"
    for n in 2 4 7; do
        "$pack" "$w/$src" "$w/$src-$n.hzq" --threads $n --export-dequantized "$w/$src-$n.st" --quiet
        cmp "$w/$src-1.hzq" "$w/$src-$n.hzq" || fail "$src: artifact differs between 1 and $n threads"
        cmp "$w/$src-1.st" "$w/$src-$n.st" || fail "$src: export differs between 1 and $n threads"
        test "$(identity "$w/$src-$n.hzq")" = "$id1" || fail "$src: identity differs at $n threads"
        rm -f "$w/$src-$n.hzq" "$w/$src-$n.st"
    done
    # without the export (a larger window) and with the default thread count
    "$pack" "$w/$src" "$w/$src-4n.hzq" --threads 4 --quiet
    cmp "$w/$src-1.hzq" "$w/$src-4n.hzq" || fail "$src: artifact differs without the export"
    out=$("$pack" "$w/$src" "$w/$src-d.hzq")
    echo "$out"
    echo "$out" | grep -q "identity $id1" || fail "$src: default thread count: $out"
    cmp "$w/$src-1.hzq" "$w/$src-d.hzq" || fail "$src: artifact differs at the default thread count"
    rm -f "$w/$src-4n.hzq" "$w/$src-d.hzq"
    echo "pack_threads($arch): $src: identity $id1 for 1, 2, 4, 7 and the default thread count"
done

# 2. errors raised in workers: the first item, a later non-routed tensor, a middle expert, the last
# expert. Single-threaded and 4 workers must print the same message.
last_layer=1 last_expert=7 # the tiny presets: 2 layers x 8 experts
for spec in "model.embed_tokens.weight|tensor 'model.embed_tokens.weight': element 0 is 1e+06" \
    "model.norm.weight|tensor 'model.norm.weight'" \
    "model.layers.0.mlp.experts.5.up_proj.weight|layer 0 expert 5.up_proj" \
    "model.layers.$last_layer.mlp.experts.$last_expert.down_proj.weight|layer $last_layer expert $last_expert.down_proj"; do
    tensor=${spec%%|*} needle=${spec#*|}
    rm -rf "$w/f32"
    "$mkf32" "$w/m" "$w/f32" "$tensor" 1e6
    for n in 1 4; do
        if "$pack" "$w/f32" "$w/bad.hzq" --threads $n --export-dequantized "$w/bad.st" --quiet \
            >"$w/out" 2>"$w/err-$n"; then
            fail "packing with $tensor = 1e6 succeeded ($n threads)"
        fi
        grep -q "^hz-pack: HZ_ERANGE: .*$needle" "$w/err-$n" || {
            cat "$w/err-$n" >&2
            fail "stderr lacks 'HZ_ERANGE ... $needle' ($n threads)"
        }
        # the message and nothing else: a sanitizer's report on this path would add lines
        test "$(wc -l <"$w/err-$n")" -eq 1 || { cat "$w/err-$n" >&2; fail "more than the error on stderr"; }
        test ! -e "$w/bad.hzq" || fail "a failed pack left an artifact ($tensor, $n threads)"
        test ! -e "$w/bad.st" || fail "a failed pack left an export ($tensor, $n threads)"
        no_leftovers "$tensor, $n threads"
    done
    cmp "$w/err-1" "$w/err-4" || fail "the error differs between 1 and 4 threads ($tensor)"
    cat "$w/err-4"
done

# 3. --threads must be a number from 1 to 256
for bad in 0 -3 abc 4x 257 ""; do
    if "$pack" "$w/m" "$w/x.hzq" --threads "$bad" --quiet 2>"$w/err"; then fail "--threads '$bad' accepted"; fi
    grep -q -- "--threads takes a number" "$w/err" || fail "--threads '$bad': $(cat "$w/err")"
done
test ! -e "$w/x.hzq" || fail "a rejected command line wrote an artifact"
echo "pack_threads($arch): OK"
