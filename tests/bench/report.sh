#!/bin/sh
# scripts/bench end to end on the cpu backend (tiny models, --quick, every step that runs without a GPU,
# every transport, threaded-whole and threaded+prefetch included), its reports checked by check_report.py, then
# scripts/bench_report.py checked by check_markdown.py (figures recomputed, insertion idempotent); --steps
# clean, --embed-std's own folder, --feed random's reports, bad arguments refused.
# usage: report.sh SOURCE_ROOT BUILD_ROOT CHECK_REPORT_PY CHECK_MARKDOWN_PY
set -eu
src=$1 build=$2 check=$3 checkmd=$4
command -v python3 >/dev/null 2>&1 || { echo "report: python3 not found, skipping"; exit 77; }
command -v bash >/dev/null 2>&1 || { echo "report: bash not found, skipping"; exit 77; }
w=$(mktemp -d "${TMPDIR:-/tmp}/hz-bench-report.XXXXXX")
trap 'rm -rf "$w"' EXIT
fail() { echo "report: FAIL: $*" >&2; exit 1; }

bash "$src/scripts/bench" --tiny --device cpu --executors reference --quick --build "$build" --work "$w/work" \
    --out "$w/out" --models olmoe,qwen --steps models,ceilings,peer,llamacpp,sweep,transports,table,report \
    --transports serial,threaded,threaded-whole,registered,threaded+prefetch --transport-residency 4 \
    >"$w/log.txt" 2>&1 ||
    { tail -40 "$w/log.txt"; fail "scripts/bench exited $?"; }
tail -12 "$w/log.txt"
for f in env.json model-olmoe.json model-qwen.json benchmarks-section.md figures.json \
         bench-olmoe-reference-threaded-quick-tiny.json bench-qwen-reference-threaded-quick-tiny.json \
         xport-olmoe-reference-c4-serial-quick-tiny.json xport-olmoe-reference-c4-registered-quick-tiny.json \
         xport-olmoe-reference-c4-threaded-whole-quick-tiny.json \
         xport-olmoe-reference-c4-threaded+prefetch-quick-tiny.json; do
    [ -f "$w/out/$f" ] || fail "scripts/bench left no $f"
done
grep -q 'ceilings: SKIPPED (device cpu)' "$w/log.txt" || fail "the ceilings step was not skipped on cpu"
grep -q 'llamacpp-olmoe: SKIPPED (device cpu)' "$w/log.txt" || fail "the llamacpp step was not skipped on cpu"
# The checkpoint is deleted once no peer can use it (no cpu peer): only the artifacts stay.
[ ! -d "$w/work/tiny/olmoe-ckpt" ] || fail "the checkpoint was kept"
python3 "$check" "$w/out/bench-olmoe-reference-threaded-quick-tiny.json" --prompts 2 --blocks 1 --tokens 16 \
    --warmup 4 --resident 4,6,8 --transport threaded
python3 "$check" "$w/out/xport-olmoe-reference-c4-registered-quick-tiny.json" --prompts 2 --blocks 1 --tokens 16 \
    --warmup 4 --resident 4 --transport registered
python3 "$check" "$w/out/xport-olmoe-reference-c4-threaded-whole-quick-tiny.json" --prompts 2 --blocks 1 \
    --tokens 16 --warmup 4 --resident 4 --transport threaded-whole
python3 "$check" "$w/out/xport-olmoe-reference-c4-threaded+prefetch-quick-tiny.json" --prompts 2 --blocks 1 \
    --tokens 16 --warmup 4 --resident 4 --transport threaded --prefetch
grep -q '| threaded+prefetch |' "$w/out/benchmarks-section.md" || fail "the report has no threaded+prefetch row"
python3 "$checkmd" --src "$src" --out "$w/out" --work "$w/md"

# --steps clean removes the models; an unknown step is refused.
bash "$src/scripts/bench" --tiny --device cpu --build "$build" --work "$w/work" --out "$w/out" --steps clean \
    --models olmoe >/dev/null
[ ! -f "$w/work/tiny/olmoe.hzq" ] && [ -f "$w/work/tiny/qwen.hzq" ] || fail "clean removed the wrong models"
# --embed-std makes its checkpoints in a folder of their own: the default artifact is left as it was.
cp "$w/work/tiny/qwen.hzq" "$w/qwen-default.hzq"
bash "$src/scripts/bench" --tiny --device cpu --build "$build" --work "$w/work" --out "$w/out-e" --steps models \
    --models qwen --embed-std 1 >"$w/log-e.txt" 2>&1 || { tail -20 "$w/log-e.txt"; fail "--embed-std 1 failed"; }
grep -q -- '--embed-std 1' "$w/log-e.txt" || fail "hz-mkmodel was not given --embed-std"
[ -f "$w/work/tiny/embed-std-1/qwen.hzq" ] || fail "--embed-std left no artifact in its folder"
cmp -s "$w/work/tiny/qwen.hzq" "$w/qwen-default.hzq" || fail "--embed-std replaced the default artifact"
! cmp -s "$w/work/tiny/embed-std-1/qwen.hzq" "$w/qwen-default.hzq" || fail "--embed-std 1 made the default model"
# refused with their messages: a value that is not a number; an output folder of the other kind of checkpoint
# (its reports are named by model alone)
refused() { # NEEDLE args...: scripts/bench exits non-zero and names the problem
    needle=$1; shift
    if bash "$src/scripts/bench" --tiny --device cpu --build "$build" --work "$w/work" "$@" >"$w/ref.txt" 2>&1; then
        fail "accepted: $*"
    fi
    grep -q -- "$needle" "$w/ref.txt" || { cat "$w/ref.txt"; fail "no '$needle' for: $*"; }
}
refused "--embed-std: not a number" --out "$w/out-e2" --steps models --models qwen --embed-std 1x
refused "made with --embed-std default (this run: 1)" --out "$w/out" --steps table --embed-std 1
refused "made with --embed-std 1 (this run: default)" --out "$w/out-e" --steps table
mkdir "$w/older" && echo '{}' >"$w/older/model-qwen.json" # reports from before the folder was marked
refused "holds reports of default checkpoints" --out "$w/older" --steps table --embed-std 1
# --feed random: hz-bench's reports named for it, their rows and protocol marked in the section
bash "$src/scripts/bench" --tiny --device cpu --executors reference --quick --build "$build" --work "$w/work" \
    --out "$w/out-r" --models qwen --steps sweep,report --feed random >"$w/log-r.txt" 2>&1 ||
    { tail -20 "$w/log-r.txt"; fail "--feed random failed"; }
[ -f "$w/out-r/bench-qwen-reference-threaded-quick-tiny-random.json" ] || fail "no -random report: $(ls "$w/out-r")"
grep -q '| threaded, random ids |' "$w/out-r/benchmarks-section.md" || fail "the section's rows lack 'random ids'"
grep -q 'each decode step fed a random token id' "$w/out-r/benchmarks-section.md" ||
    fail "the section's protocol does not name the random feed"
refused "neither greedy nor random" --out "$w/out-r" --steps table --feed sometimes
if bash "$src/scripts/bench" --steps bogus --out "$w/out" --work "$w/work" >/dev/null 2>&1; then
    fail "an unknown step was accepted"
fi
echo "report: OK"
