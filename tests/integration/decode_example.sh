#!/bin/sh
# examples/decode, the reference integration, end to end on a tiny generated model of one architecture
# (cpu device): its text and JSON output agree, residency and transport change nothing the model
# computes, --prompt-file reads what --prompt takes, and every bad input ends with status 1 and a
# message naming what is wrong (nothing crashes: under the sanitizers a report fails the run).
# usage: decode_example.sh HZ_MKMODEL HZ_PACK DECODE ARCH MODEL_TYPE (hz-mkmodel's --arch; the config's name)
set -eu
mkmodel=$1 pack=$2 decode=$3 arch=$4 model_type=$5
w=$(mktemp -d "${TMPDIR:-/tmp}/hz-decode-$arch.XXXXXX")
trap 'rm -rf "$w"' EXIT

fail() { echo "decode_example($arch): FAIL: $*" >&2; exit 1; }
# expect_fail STDERR_NEEDLE cmd...: the command must exit with status 1 and print the needle on stderr
expect_fail() {
    needle=$1; shift
    rc=0
    "$@" >"$w/out" 2>"$w/err" || rc=$?
    test $rc -eq 1 || { cat "$w/err" >&2; fail "exit status $rc, not 1: $*"; }
    grep -q -- "$needle" "$w/err" || { cat "$w/err" >&2; fail "stderr lacks '$needle': $*"; }
}
# json_tokens FILE: the "tokens" array of the last line (a JSON object), as space-separated ids
json_tokens() { tail -n 1 "$1" | sed -n 's/.*"tokens":\[\([0-9,]*\)\].*/\1/p' | tr ',' ' '; }

"$mkmodel" --arch "$arch" --preset tiny --seed 5 "$w/m" >/dev/null
"$pack" "$w/m" "$w/a.hzq" --quiet
m=$w/a.hzq
P=1,2,3,4,5,6,7,8
N=20

# 1. text output: the model line, N tokens, both rates, the cache summary
"$decode" "$m" --device cpu --resident 4 --tokens $N --prompt "$P" >"$w/text.txt"
cat "$w/text.txt"
grep -q "^model $m ($model_type), device cpu, executor reference, 4 of 8 routed experts resident" "$w/text.txt" ||
    fail "no model line"
text_tokens=$(sed -n "s/^tokens ($N)://p" "$w/text.txt" | sed 's/^ //')
test "$(echo "$text_tokens" | wc -w)" -eq $N || fail "expected $N token ids, got '$text_tokens'"
grep -q '^prefill: 8 tokens in ' "$w/text.txt" || fail "no prefill line"
grep -q "^decode:  $((N - 1)) steps in " "$w/text.txt" || fail "no decode line"
grep -q '^cache:   hits [0-9]*, misses [1-9][0-9]*, H2D bytes [1-9][0-9]*, expert D2H bytes 0$' "$w/text.txt" ||
    fail "cache line: 4 of 8 resident must miss, and no expert crosses back to the host"
grep -q '^         state OK, generation [0-9]* after [0-9]* publications, transport registered (auto)$' "$w/text.txt" ||
    fail "no cache state line naming the transport auto chose"

# 2. --json: one JSON object last, with the same tokens and the cache's counters
"$decode" "$m" --device cpu --resident 4 --tokens $N --prompt "$P" --json >"$w/j4.txt"
tail -n 1 "$w/j4.txt" | grep -q "^{\"model\":\"$m\",\"architecture\":\"$model_type\",\"device\":\"cpu\"" ||
    fail "the last line is not the JSON object"
tail -n 1 "$w/j4.txt" | grep -q '"resident":4,"experts":8,"prompt_tokens":8,' || fail "JSON residency fields"
tail -n 1 "$w/j4.txt" | grep -q '"cache":{"contract":"resident-qpacked-cache-v1","state":"OK"' ||
    fail "JSON without the cache stats"
test "$(json_tokens "$w/j4.txt")" = "$text_tokens" || fail "JSON tokens differ from the text output's"

# 3. residency and transport decide where experts live and how they travel, not what is computed
"$decode" "$m" --device cpu --resident 0 --tokens $N --prompt "$P" --json >"$w/j0.txt"
tail -n 1 "$w/j0.txt" | grep -q '"resident":8,"experts":8,' || fail "--resident 0 must mean all 8"
test "$(json_tokens "$w/j0.txt")" = "$text_tokens" || fail "full residency gave other tokens"
for t in serial threaded registered; do
    "$decode" "$m" --device cpu --resident 3 --tokens $N --prompt "$P" --transport $t --json >"$w/jt.txt"
    tail -n 1 "$w/jt.txt" | grep -q "\"transport\":\"$t\",\"transport_requested\":\"$t\"" ||
        fail "transport $t not reported"
    test "$(json_tokens "$w/jt.txt")" = "$text_tokens" || fail "transport $t gave other tokens"
done
# the default, auto: registered where experts miss, threaded where every expert is resident
tail -n 1 "$w/j4.txt" | grep -q '"transport":"registered","transport_requested":"auto"' ||
    fail "the default transport at 4 of 8 resident is not auto's registered"
tail -n 1 "$w/j0.txt" | grep -q '"transport":"threaded","transport_requested":"auto"' ||
    fail "the default transport at full residency is not auto's threaded"

# 4. the prompt from a file (whitespace and newlines as separators), the default prompt, --stop-at-eos
printf '1 2\n3,4\t5 6\n7 8\n' >"$w/prompt.txt"
"$decode" "$m" --device cpu --resident 4 --tokens $N --prompt-file "$w/prompt.txt" --json >"$w/jf.txt"
test "$(json_tokens "$w/jf.txt")" = "$text_tokens" || fail "--prompt-file gave other tokens"
"$decode" "$m" --device cpu --tokens 3 --json >"$w/jd.txt"
tail -n 1 "$w/jd.txt" | grep -q '"prompt_tokens":1,' || fail "the default prompt is one token"
"$decode" "$m" --device cpu --tokens 3 --stop-at-eos >/dev/null || fail "--stop-at-eos"
"$decode" --help | grep -q '^usage: decode MODEL.hzq' || fail "--help"

# 5. bad input: status 1 and a message naming what is wrong
expect_fail "opening the model failed" "$decode" "$w/missing.hzq" --device cpu
expect_fail "missing.hzq" "$decode" "$w/missing.hzq" --device cpu
head -c 100000 "$m" >"$w/cut.hzq"
expect_fail "opening the model failed" "$decode" "$w/cut.hzq" --device cpu
expect_fail "--resident must be a non-negative integer, got 'x'" "$decode" "$m" --resident x
expect_fail "--tokens must be a non-negative integer, got '-3'" "$decode" "$m" --tokens -3
expect_fail "--tokens must be at least 1" "$decode" "$m" --tokens 0
expect_fail "prompt: 'abc' is not a token id" "$decode" "$m" --device cpu --prompt 1,abc
expect_fail "the prompt has no tokens" "$decode" "$m" --device cpu --prompt ", ,"
expect_fail "give --prompt or --prompt-file, not both" "$decode" "$m" --prompt 1 --prompt-file "$w/prompt.txt"
expect_fail "cannot open prompt file" "$decode" "$m" --device cpu --prompt-file "$w/none.txt"
expect_fail "unknown transport 'fast'" "$decode" "$m" --transport fast
expect_fail "unknown option or missing value: --colour" "$decode" "$m" --colour
expect_fail "unknown option or missing value: --tokens" "$decode" "$m" --tokens
expect_fail "unexpected argument 'extra'" "$decode" "$m" extra
expect_fail "usage: decode" "$decode"
expect_fail "HZ_ERANGE" "$decode" "$m" --device cpu --prompt 1,99999
expect_fail "exceed the model's context" "$decode" "$m" --device cpu --tokens 100000
expect_fail "creating the model failed" "$decode" "$m" --device cpu --executor grouped
expect_fail "opening the device failed" "$decode" "$m" --device tpu:0
echo "decode_example($arch): OK"
