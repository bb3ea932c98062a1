#!/usr/bin/env bash
# A bounded, reproducible fuzz run for ctest: FUZZER RUNS SEEDS WORK. Starts from the seed
# corpus in a fresh work directory (new inputs go there, never into the repository), with
# a fixed seed, so a run is the same on every machine. A finding fails the test and leaves
# its input (crash-*, timeout-*, leak-*) in WORK.
set -euo pipefail
fuzzer=$1 runs=$2 seeds=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
cd "$work"
exec "$fuzzer" -runs="$runs" -seed=1 -max_len=65536 -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
  "$work" "$seeds"
