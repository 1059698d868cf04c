#!/bin/sh
# hz-bench --quick on a tiny OLMoE-shaped model (cpu), its report checked by check_report.py (greedy,
# --prefetch, --feed random), and the tool's failure paths (each must exit 1 with a message naming the problem).
# usage: bench.sh HZ_MKMODEL HZ_PACK HZ_BENCH CHECK_REPORT_PY
set -eu
mkmodel=$1 pack=$2 bench=$3 check=$4
command -v python3 >/dev/null 2>&1 || { echo "bench: python3 not found, skipping"; exit 77; }
w=$(mktemp -d "${TMPDIR:-/tmp}/hz-bench.XXXXXX")
trap 'rm -rf "$w"' EXIT

fail() { echo "bench: FAIL: $*" >&2; exit 1; }
# expect_fail STDERR_NEEDLE cmd...: exit status exactly 1 and the needle on stderr
expect_fail() {
    needle=$1; shift
    set +e
    "$@" >"$w/out" 2>"$w/err"
    st=$?
    set -e
    [ $st -eq 1 ] || { cat "$w/err" >&2; fail "exit status $st (want 1): $*"; }
    grep -q -- "$needle" "$w/err" || { cat "$w/err" >&2; fail "stderr lacks '$needle': $*"; }
}

"$mkmodel" --arch olmoe --preset tiny --seed 5 "$w/m" >/dev/null
"$pack" "$w/m" "$w/a.hzq" --quiet

# 1. the quick run: table on stdout, report in the file
# (--h2d-ceiling: the miss-path rate is also given as a fraction of it, when the library reports one)
"$bench" "$w/a.hzq" --quick --device cpu --resident 4,8 --h2d-ceiling 25 --json "$w/out.json" >"$w/table.txt"
cat "$w/table.txt"
grep -q '^c4/8 ' "$w/table.txt" || fail "table lacks the c4/8 row"
grep -q '^c8/8 ' "$w/table.txt" || fail "table lacks the c8/8 row"
grep -q 'miss GB/s' "$w/table.txt" || fail "table lacks the miss-path column"
python3 "$check" "$w/out.json" --prompts 2 --blocks 1 --tokens 16 --warmup 4 --resident 4,8 --h2d-ceiling 25

# 1b. --prefetch: the table says how much of what was prefetched was used; without it, no such line
"$bench" "$w/a.hzq" --quick --device cpu --resident 4 --prefetch --json "$w/pf.json" >"$w/pf.txt"
grep -q '^prefetch c4/8: [0-9]* of [0-9]* prefetched experts used' "$w/pf.txt" || { cat "$w/pf.txt"; fail "no prefetch line"; }
python3 "$check" "$w/pf.json" --prompts 2 --blocks 1 --tokens 16 --warmup 4 --resident 4 --prefetch
! grep -q '^prefetch ' "$w/table.txt" || fail "a prefetch line without --prefetch"

# 1c. --feed random: the protocol says so, the outputs differ from the greedy run's (other inputs) and
# are the same on a second run (seeded inputs); bad values are refused
"$bench" "$w/a.hzq" --quick --device cpu --resident 4,8 --feed random --json "$w/rnd.json" >"$w/rnd.txt"
grep -q 'random decode inputs' "$w/rnd.txt" || { cat "$w/rnd.txt"; fail "the table's protocol line lacks the feed"; }
python3 "$check" "$w/rnd.json" --prompts 2 --blocks 1 --tokens 16 --warmup 4 --resident 4,8 --feed random
"$bench" "$w/a.hzq" --quick --device cpu --resident 4 --feed random --json "$w/rnd2.json" >/dev/null
digest() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"][0]["generated_tokens_fnv1a64"])' "$1"; }
[ "$(digest "$w/rnd.json")" = "$(digest "$w/rnd2.json")" ] || fail "--feed random is not repeatable"
[ "$(digest "$w/rnd.json")" != "$(digest "$w/out.json")" ] || fail "--feed random generated the greedy run's tokens"
expect_fail "neither greedy nor random" "$bench" "$w/a.hzq" --quick --device cpu --feed sometimes

# 2. --json - puts the report on stdout and the table on stderr; explicit sizes override --quick; the
# serial transport named (its staging bytes are checked against the H2D bytes)
"$bench" "$w/a.hzq" --quick --tokens 3 --warmup 0 --device cpu --resident 4,8 --transport serial --json - \
    >"$w/stdout.json" 2>"$w/stderr.txt"
grep -q '^c8/8 ' "$w/stderr.txt" || fail "with --json - the table should go to stderr"
python3 "$check" "$w/stdout.json" --prompts 2 --blocks 1 --tokens 3 --warmup 0 --resident 4,8 --transport serial

# 2b. N = 1: no decode step, so the pooled decode rate and its spread are null in the report, "-" in the table
"$bench" "$w/a.hzq" --quick --tokens 1 --device cpu --resident 4 --json "$w/n1.json" >"$w/n1.txt"
python3 "$check" "$w/n1.json" --prompts 2 --blocks 1 --tokens 1 --warmup 4 --resident 4
grep -q '^c4/8  *- ' "$w/n1.txt" || fail "with N = 1 the table's decode rate should be '-'"

# 3. failures
expect_fail "no model given" "$bench"
expect_fail "opening the model" "$bench" "$w/missing.hzq" --quick --device cpu
expect_fail "HZ_ECAPACITY" "$bench" "$w/a.hzq" --quick --device cpu --resident 9
expect_fail "--h2d-ceiling must be a positive number" "$bench" "$w/a.hzq" --quick --device cpu --h2d-ceiling -1
expect_fail "unknown transport 'bogus'" "$bench" "$w/a.hzq" --quick --device cpu --transport bogus
expect_fail "--resident must be a comma-separated list" "$bench" "$w/a.hzq" --quick --device cpu --resident 4,,8
expect_fail "--tokens must be a non-negative integer" "$bench" "$w/a.hzq" --tokens -3
expect_fail "unknown option" "$bench" "$w/a.hzq" --frobnicate
expect_fail "opening the device" "$bench" "$w/a.hzq" --quick --device nonsense
expect_fail "model's context is 256" "$bench" "$w/a.hzq" --device cpu --prompts 8 --blocks 1 --tokens 200 --warmup 0
expect_fail "cannot create" "$bench" "$w/a.hzq" --quick --device cpu --json "$w/no/such/dir/out.json"
echo "bench: OK"
