#!/usr/bin/env bash
# On the device (repo root, .device carried with two builds): kiln bench per shape with the
# build in .device/kiln-device-base.tar.xz and the one in .device/kiln-device.tar.xz, in
# turn, in one call (an A/B of a compiler change with no runtime switch), then the new
# build's GPU tests named in TESTS, and PyTorch SDPA beside (SDPA=1).
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT; R=/tmp/ab; rm -rf $R; mkdir -p $R
SHAPES=${SHAPES:-"attention_decode:1x32x32x1x32768x64 attention_decode:1x32x8x1x32768x64 attention:4x32x32x4096x64 attention_causal:4x32x32x4096x64"}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $R/device.txt
for round in $(seq 1 ${ROUNDS:-2}); do
  for build in base new; do
    pkg=.device/kiln-device.tar.xz; [ $build = base ] && pkg=.device/kiln-device-base.tar.xz
    rm -rf /tmp/kiln-$build; mkdir -p /tmp/kiln-$build; tar -xJf $pkg -C /tmp/kiln-$build
    for ks in $SHAPES; do
      k=${ks%%:*}; s=${ks#*:}; f=$R/$build-$round-$k-$s
      LD_LIBRARY_PATH=/tmp/kiln-$build/lib:/usr/local/cuda/lib64 timeout 150 /tmp/kiln-$build/bin/kiln bench $k --backend=cuda \
        --dtype bf16 --shape $s --routes kiln --reps ${REPS:-10} --warmup 3 --no-progress --csv $f.csv > $f.log 2>&1 ||
        { echo "$build $k $s rc=$?: $(tail -1 $f.log)"; continue; }
      python3 - $f.csv $build $k <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    print(f"{sys.argv[2]:4} {sys.argv[3]:16} {r['shape']:20} {float(r['warm_ms'])*1e3:8.1f} us {float(r['tflops']):6.1f} TFLOP/s {float(r['gbps'])/1e3:.3f} TB/s verified={r['reference_ok']}")
PY
    done
  done
done
# PyTorch SDPA on the attention_decode shapes, same call (SDPA=1).
if [ -n "${SDPA:-}" ]; then
  dec=$(for ks in $SHAPES; do [ "${ks%%:*}" = attention_decode ] && echo -n "${ks#*:} "; done)
  python3 -W ignore docs/benchmarks/2026-12-02-h200-attention-decode/sdpa_decode.py $dec 2>&1 | grep -v "FLASH\|EFFICIENT" | tee $R/sdpa.log
fi
if [ -n "${TESTS:-}" ]; then
  LD_LIBRARY_PATH=/tmp/kiln-new/lib:/usr/local/cuda/lib64 timeout ${TT:-200} /tmp/kiln-new/bin/kiln-gpu-tests "$TESTS" > $R/tests.log 2>&1
  echo "tests rc=$? $(tail -2 $R/tests.log | head -1)"
fi
tar -C $R -czf $OUT/ab.tar.gz .
