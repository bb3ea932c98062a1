#!/usr/bin/env bash
# On the device (repo root, .device carried: the build before a change as
# .device/kiln-device-base.tar.xz, the new one as .device/kiln-device.tar.xz): A/B of cold compiles (fresh process, empty kiln cache, driver JIT cache off) and first runs,
# then the new build's GPU tests named in TESTS. KS: the "kernel:shape" pairs (default: four).
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT; R=/tmp/cold; rm -rf $R; mkdir -p $R
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; } > $R/device.txt
for build in base new; do
  pkg=.device/kiln-device.tar.xz; [ $build = base ] && pkg=.device/kiln-device-base.tar.xz
  rm -rf /tmp/kiln-$build; mkdir -p /tmp/kiln-$build; tar -xJf $pkg -C /tmp/kiln-$build
done
for i in 1 2 3; do
  for build in base new; do
    for ks in ${KS:-attention_decode:1x32x32x1x32768x128 attention:4x32x32x4096x128 attention_causal:4x32x32x4096x64 gemm_bias_relu:4096x4096x4096}; do
      k=${ks%%:*}; s=${ks#*:}; f=$R/$build-$i-$k
      rm -rf /tmp/kc-cold
      CUDA_CACHE_DISABLE=1 KILN_CACHE_DIR=/tmp/kc-cold LD_LIBRARY_PATH=/tmp/kiln-$build/lib:/usr/local/cuda/lib64 timeout 120 \
        /tmp/kiln-$build/bin/kiln bench $k --backend=cuda --dtype bf16 --shape $s --routes kiln --reps ${REPS:-5} --warmup 2 --no-progress --csv $f.csv > $f.log 2>&1 ||
        { echo "$build $k rc=$?: $(tail -1 $f.log)"; continue; }
      python3 - $f.csv $build $k $i <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    ph = dict(p.split('=') for p in r['compile_phases'].split(';') if '=' in p)
    print(f"{sys.argv[2]:4} #{sys.argv[4]} {sys.argv[3]:16} {r['shape']:20} compile {float(r['compile_ms']):7.1f} ms (lower {float(ph.get('lowering',0)):5.0f} codegen {float(ph.get('codegen',0)):5.0f} load {float(ph.get('load',0)):5.0f}) first {float(r['first_run_ms']):7.2f} ms warm {float(r['warm_ms'])*1e3:8.1f} us verified={r['reference_ok']}")
PY
    done
  done
done
if [ -n "${TESTS:-}" ]; then
  LD_LIBRARY_PATH=/tmp/kiln-new/lib:/usr/local/cuda/lib64 timeout ${TT:-200} /tmp/kiln-new/bin/kiln-gpu-tests "$TESTS" > $R/tests.log 2>&1
  echo "tests rc=$? $(tail -2 $R/tests.log | head -1)"
  grep -B3 -A12 "FAILED" $R/tests.log | head -60
fi
tar -C $R -czf $OUT/cold.tar.gz .
