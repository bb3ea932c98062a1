#!/usr/bin/env bash
# Runs on the GPU machine (device tool, `.device` carried): unpacks what
# scripts/package-device.sh built, runs the GPU suites and the CLI checks, and writes
# logs under $OUT. Builds nothing. Prints a short table last.
set -u
cd "$(dirname "$0")/.."
# The device tool brings back at most 8 files: everything is written under $RES and packed
# into $OUT/results.tar.gz at the end (plus the two summaries beside it).
OUT=${OUT:-/tmp/kiln-out}
RES=/tmp/kiln-results
mkdir -p "$OUT" "$RES" /tmp/kiln
tar -xJf .device/kiln-device.tar.xz -C /tmp/kiln
export LD_LIBRARY_PATH=/tmp/kiln/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
K=/tmp/kiln/bin
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > "$RES/device.txt" 2>&1

declare -A result
run() { # name, log, command...
  local name=$1 log=$2; shift 2
  local t0=$(date +%s%N)
  "$@" > "$RES/$log" 2>&1; local rc=$?
  result[$name]="rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms"
  tail -n 4 "$RES/$log"
}
# The issue-4 acceptance run: every route on the five shapes, with the reports.
SHAPES="--shape 4096x4096x4096 --shape 4097x4096x4096 --shape 1000x1000x1000 --shape 16x4096x4096 --shape 128x12288x4096"
run kiln-bench kiln-bench.log $K/kiln bench gemm_bias_relu --backend=cuda --dtype bf16 $SHAPES --reps 30 --warmup 5 \
  --csv "$RES/kiln-bench.csv" --json "$RES/kiln-bench.json" --html "$RES/kiln-bench.html"
run mlp mlp.log $K/kiln-mlp --csv "$RES/mlp.csv" --json "$RES/mlp.json" --html "$RES/mlp.html"
run cuda-support cuda-support.log $K/kiln-cuda-support-tests
run gpu-suite gpu-tests.log $K/kiln-gpu-tests --durations yes
run gpu-sticky gpu-sticky.log $K/kiln-gpu-tests "[sticky]"   # resets the context: own process
run bench bench.log $K/kiln-bench-gemm "$RES/bench.csv"
run big-gemm cli-run.log $K/kiln run gemm_bias_relu --backend=cuda --shape 4097x4096x4096 --dtype bf16
for k in gemm gemm_bias_gelu softmax add rmsnorm; do
  shape=1000x129x4097; case $k in softmax|add|rmsnorm) shape=4097x1000;; esac
  for d in f32 bf16 f16; do
    $K/kiln run $k --backend=cuda --shape $shape --dtype $d >> "$RES/cli-run.log" 2>&1 || result[cli-$k-$d]="FAILED"
  done
done
echo
tar -C "$RES" -czf "$OUT/results.tar.gz" .
cp "$RES/kiln-bench.csv" "$RES/mlp.csv" "$OUT/" 2>/dev/null
cat "$RES/device.txt"
printf '%-14s %s\n' "check" "result"
for n in "${!result[@]}"; do printf '%-14s %s\n' "$n" "${result[$n]}"; done | sort
grep -c "reference_ok=true" "$RES/cli-run.log" | sed 's/^/cli runs verified: /'
grep "reference_ok=false" "$RES/cli-run.log" | head -5
grep -vE "^(cuda|NVIDIA)" "$RES/bench.log" | cut -c1-90
grep -E "^(route|kiln|framework|framework-eager|cuda) " "$RES/kiln-bench.log"
tail -n 12 "$RES/mlp.log"
