#!/usr/bin/env bash
# Final: the GPU suite's attention cases, the bench beside SDPA, cold compiles.
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT
CASE_TOOLS=none CASE_FILTER="*attention*" CASE_BUDGET=200 bash scripts/device-run.sh cases 2>&1 | tail -4
cp /tmp/kiln-out/results.tar.gz $OUT/cases.tar.gz 2>/dev/null
RUNS="c:1x2x1x4097x64 c:2x8x2x333x64:f16 1x3x3x1000x128" SHAPES="4x32x32x4096x128 c:4x32x32x4096x128 4x32x32x4096x64 c:4x32x32x4096x64 4x32x8x4096x64" REPS=10 bash .device/check.sh 2>&1 | grep -v "^kiln  " | tail -30
R=/tmp/cold; rm -rf $R; mkdir -p $R; K=/tmp/kiln-device/bin; export LD_LIBRARY_PATH=/tmp/kiln-device/lib:/usr/local/cuda/lib64
for spec in 1x32x32x4096x128 c:1x32x32x4096x128 1x32x32x4096x64 c:1x32x32x4096x64; do
  k=attention; [[ $spec == c:* ]] && k=attention_causal; s=${spec#c:}
  for i in 1 2 3; do rm -rf /tmp/kc-cold; KILN_CACHE_DIR=/tmp/kc-cold timeout 100 $K/kiln bench $k --backend=cuda --dtype bf16 --shape $s --routes kiln --reps 2 --warmup 1 --no-progress --csv $R/cold-$k-$s-$i.csv > $R/cold-$k-$s-$i.log 2>&1
  echo "cold $k $s: $(python3 -c "import csv,sys; r=next(csv.DictReader(open(sys.argv[1]))); print(r['compile_ms'], r['compile_phases'])" $R/cold-$k-$s-$i.csv)"; done
done
tar -C $R -czf $OUT/cold.tar.gz .
