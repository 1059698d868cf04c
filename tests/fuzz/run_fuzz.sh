#!/bin/sh
# A bounded libFuzzer run: new inputs go to a scratch directory, the committed seeds stay untouched.
set -eu
bin=$1 seeds=$2 seconds=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 "$scratch" "$seeds"
