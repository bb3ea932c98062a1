#!/usr/bin/env bash
# On the device (repo root, .device carried): the GPU tests of attention over a K/V cache,
# kiln bench attention_decode (KILN_HOPPER_SPLIT_K per MODES: unset is kiln's choice, 1 no
# key splits, n at most n parts), the launch kiln chooses per shape, beside
# PyTorch SDPA in the same call, and cold compiles.
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT; R=/tmp/dec; rm -rf $R /tmp/kiln; mkdir -p $R /tmp/kiln
tar -xJf .device/kiln-device.tar.xz -C /tmp/kiln
export LD_LIBRARY_PATH=/tmp/kiln/lib:/usr/local/cuda/lib64; K=/tmp/kiln/bin
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $R/device.txt
SHAPES=${SHAPES:-"1x32x32x1x32768x128 1x32x8x1x32768x128 4x32x32x1x8192x128 16x32x8x1x4096x128 1x32x32x8x32768x128 1x32x32x1x131072x128 1x32x32x1x32768x64"}
if [ -z "${NO_TESTS:-}" ]; then
  timeout ${TT:-400} $K/kiln-gpu-tests "${TESTS:-*K/V cache*}" > $R/tests.log 2>&1; echo "tests rc=$? $(tail -2 $R/tests.log | head -1)"
fi
# One kiln bench per shape (the kernel is built per head dim); the rows printed as they come.
for mode in ${MODES:-auto 1}; do
  for s in $SHAPES; do
    KILN_HOPPER_SPLIT_K=$mode timeout 150 $K/kiln bench attention_decode --backend=cuda --dtype ${DT:-bf16} --shape $s \
      --routes kiln --reps ${REPS:-20} --warmup 3 --no-progress --csv $R/bench-$mode-$s.csv > $R/bench-$mode-$s.log 2>&1 ||
      { echo "bench split=$mode $s rc=$?: $(tail -1 $R/bench-$mode-$s.log)"; continue; }
    python3 - $R/bench-$mode-$s.csv $mode <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(f"kiln[split={sys.argv[2]}] {r['shape']} {float(r['warm_ms'])*1e3:.1f} us {float(r['gbps'])/1e3:.3f} TB/s verified={r['reference_ok']} rel_err={r['rel_err']}")
PY
  done
done
# The launch kiln chooses per shape (the bench CSV does not say): one verified kiln run each.
for s in $SHAPES; do
  timeout 60 $K/kiln run attention_decode --backend cuda --dtype ${DT:-bf16} --shape $s --seed 1 > $R/run-$s.log 2>&1
  echo "path $s: $(grep -o 'reference_ok=[a-z]*' $R/run-$s.log) $(grep '^launch:' $R/run-$s.log | grep -o '([0-9]* CTAs[^)]*)')"
done
python3 -W ignore docs/benchmarks/2026-12-02-h200-attention-decode/sdpa_decode.py $SHAPES 2>&1 | tee $R/sdpa.log
if [ -z "${NO_COLD:-}" ]; then
  for i in 1 2 3; do rm -rf /tmp/kc-cold; CUDA_CACHE_DISABLE=1 KILN_CACHE_DIR=/tmp/kc-cold timeout 100 $K/kiln bench attention_decode --backend=cuda --dtype bf16 --shape 1x32x32x1x32768x128 --routes kiln --reps 2 --warmup 1 --no-progress --csv $R/cold-$i.csv > $R/cold-$i.log 2>&1
    echo "cold $i: $(python3 -c "import csv,sys; r=next(csv.DictReader(open(sys.argv[1]))); print(r['compile_ms'], r['compile_phases'])" $R/cold-$i.csv)"; done
fi
tar -C $R -czf $OUT/decode.tar.gz .
