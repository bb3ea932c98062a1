#!/usr/bin/env bash
# On the device (repo root, .device carried with .device/kiln-device.tar.xz, or PKG): each attention
# kernel beside its log-sum-exp twin (`<kernel>_lse`), alternating, ROUNDS rounds, kiln bench
# on the same shapes in one process per row; then the GPU tests named in TESTS.
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT; R=/tmp/lse; rm -rf $R; mkdir -p $R
SHAPES=${SHAPES:-"attention:4x32x32x4096x128 attention_causal:4x32x32x4096x128 attention_causal:4x32x32x4096x64 attention_decode:1x32x32x1x32768x128 attention_decode:1x32x8x1x32768x128"}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $R/device.txt
rm -rf /tmp/kiln-new; mkdir -p /tmp/kiln-new; tar -xJf ${PKG:-.device/kiln-device.tar.xz} -C /tmp/kiln-new
export LD_LIBRARY_PATH=/tmp/kiln-new/lib:/usr/local/cuda/lib64
for round in $(seq 1 ${ROUNDS:-2}); do
  for ks in $SHAPES; do
    for suffix in "" _lse; do
      k=${ks%%:*}$suffix; s=${ks#*:}; f=$R/$round-$k-$s
      timeout 150 /tmp/kiln-new/bin/kiln bench $k --backend=cuda --dtype bf16 --shape $s --routes kiln \
        --reps ${REPS:-10} --warmup 3 --no-progress --csv $f.csv > $f.log 2>&1 ||
        { echo "$k $s rc=$?: $(tail -1 $f.log)"; continue; }
      python3 - $f.csv $k <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(f"{sys.argv[2]:22} {r['shape']:20} {float(r['warm_ms'])*1e3:8.1f} us {float(r['tflops']):6.1f} TFLOP/s {float(r['gbps'])/1e3:.3f} TB/s verified={r['reference_ok']}")
PY
    done
  done
done
if [ -n "${TESTS:-}" ]; then
  timeout ${TT:-200} /tmp/kiln-new/bin/kiln-gpu-tests "$TESTS" > $R/tests.log 2>&1
  echo "tests rc=$? $(tail -2 $R/tests.log | head -1)"
  grep -B3 -A15 "FAILED" $R/tests.log | head -80
fi
tar -C $R -czf $OUT/lse.tar.gz .
