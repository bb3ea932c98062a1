#!/usr/bin/env bash
# On the device (repo root, .device carried with .device/kiln-device.tar.xz): kiln's attention
# twin with and without the intra-warpgroup overlap (KILN_EXP_ATTN=0: the earlier order, each
# step's softmax after both of its products), each shape in its own process and cache,
# beside the framework route (cuDNN's fused attention) in the new build's process; then the
# GPU tests named in TESTS.
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT; R=/tmp/overlap; rm -rf $R; mkdir -p $R
SHAPES=${SHAPES:-"attention:4x32x32x4096x128 attention_causal:4x32x32x4096x128 attention:4x32x32x4096x64 attention_causal:4x32x32x4096x64 attention_causal:4x32x8x4096x128 attention_decode:1x32x32x1x32768x128 attention_decode:1x32x8x1x32768x128"}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $R/device.txt
rm -rf /tmp/kiln-new; mkdir -p /tmp/kiln-new; tar -xJf .device/kiln-device.tar.xz -C /tmp/kiln-new
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null)
export KILN_CUDNN_LIBRARY=$CUDNN_DIR/libcudnn.so.9
export LD_LIBRARY_PATH=/tmp/kiln-new/lib:$CUDNN_DIR:/usr/local/cuda/lib64
for ks in $SHAPES; do
  k=${ks%%:*}; s=${ks#*:}
  for v in ${VARIANTS:-base new}; do
    f=$R/$v-$k-$s; routes=kiln; [ $v = new ] && routes=kiln,framework
    ( [ $v = base ] && export KILN_EXP_ATTN=0; export KILN_CACHE_DIR=/tmp/cache-$v
      timeout 200 /tmp/kiln-new/bin/kiln bench $k --backend=cuda --dtype ${DT:-bf16} --shape $s --routes $routes \
        --reps ${REPS:-10} --warmup 3 --no-progress --csv $f.csv > $f.log 2>&1 ) ||
      { echo "$v $k $s rc=$?: $(grep -i "error\|failed\|unsupported" $f.log | head -5)"; continue; }
    python3 - $f.csv $k $v <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    w = r['warm_ms']
    if w in ('', 'not-run'):
        print(f"{sys.argv[3]:4} {sys.argv[2]:18} {r['route']:10} {r['shape']:20} not timed, verified={r['reference_ok']}"); continue
    print(f"{sys.argv[3]:4} {sys.argv[2]:18} {r['route']:10} {r['shape']:20} {float(w)*1e3:8.1f} us {float(r['tflops']):6.1f} TFLOP/s "
          f"{float(r['gbps'])/1e3:.3f} TB/s verified={r['reference_ok']}")
PY
  done
done
# TESTS: test filters, each run in its own process with -d yes (a line per finished case).
n=0
for t in ${TESTS:-}; do
  n=$((n + 1)); timeout ${TT:-300} /tmp/kiln-new/bin/kiln-gpu-tests "$t" -d yes > $R/tests-$n.log 2>&1
  echo "tests $t rc=$? $(tail -2 $R/tests-$n.log | head -1)"
  grep " s: " $R/tests-$n.log | cut -c1-110
  grep -B3 -A25 "FAILED" $R/tests-$n.log | head -60
done
tar -C $R -czf $OUT/overlap.tar.gz .
