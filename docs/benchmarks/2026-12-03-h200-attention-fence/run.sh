#!/usr/bin/env bash
# On the device (repo root, .device carried, kiln-device.tar.xz from scripts/package-device.sh):
# kiln's attention with each FENCES setting of the experiment build (KILN_ATTN_FENCE: what sits
# between the softmax and the wait for the in-flight P V product), each in its own process and
# kernel cache, beside cuDNN's fused attention (framework route, in the first setting's process);
# then the GPU tests named in TESTS under each setting in TFENCES.
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT; R=/tmp/run; rm -rf $R; mkdir -p $R
FENCES=${FENCES:-"none acq nano"}
SHAPES=${SHAPES:-"bf16:attention:4x32x32x4096x128 bf16:attention_causal:4x32x32x4096x128 bf16:attention:4x32x32x4096x64 bf16:attention_causal:4x32x32x4096x64 bf16:attention_causal:4x32x8x4096x128 f16:attention:4x32x32x4096x128"}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $R/device.txt
rm -rf /tmp/kiln; mkdir -p /tmp/kiln; tar -xJf .device/kiln-device.tar.xz -C /tmp/kiln
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null)
export KILN_CUDNN_LIBRARY=$CUDNN_DIR/libcudnn.so.9
export LD_LIBRARY_PATH=/tmp/kiln/lib:$CUDNN_DIR:/usr/local/cuda/lib64
bench() { # fence kernel shape dtype routes
  local f=$R/$1-$2-$3-$4
  KILN_ATTN_FENCE=$1 KILN_CACHE_DIR=/tmp/cache-$1 timeout 200 \
    /tmp/kiln/bin/kiln bench $2 --backend=cuda --dtype $4 --shape $3 --routes $5 --reps ${REPS:-10} --warmup 3 \
    --no-progress --csv $f.csv > $f.log 2>&1 || { echo "$1 $2 $3 $4 rc=$?: $(grep -i "error\|failed" $f.log | head -3)"; return; }
  python3 - $f.csv $2 $1 $4 <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for r in rows:
    w = r['warm_ms']
    if w in ('', 'not-run'):
        print(f"{sys.argv[3]:5} {sys.argv[4]:4} {sys.argv[2]:16} {r['route']:9} {r['shape']:19} not timed, verified={r['reference_ok']}"); continue
    print(f"{sys.argv[3]:5} {sys.argv[4]:4} {sys.argv[2]:16} {r['route']:9} {r['shape']:19} {float(w)*1e3:8.1f} us {float(r['tflops']):6.1f} TFLOP/s verified={r['reference_ok']}")
PY
}
first=${FENCES%% *}
for ds in $SHAPES; do
  d=${ds%%:*}; ks=${ds#*:}; k=${ks%%:*}; s=${ks#*:}
  for f in $FENCES; do
    if [ $f = $first ]; then bench $f $k $s $d kiln,framework; else bench $f $k $s $d kiln; fi
  done
done
n=0
for f in ${TFENCES:-}; do
  for t in ${TESTS:-}; do
    n=$((n + 1)); KILN_ATTN_FENCE=$f KILN_CACHE_DIR=/tmp/cache-t-$f timeout ${TT:-200} /tmp/kiln/bin/kiln-gpu-tests "$t" -d yes > $R/tests-$f-$n.log 2>&1
    echo "tests ($f) $t rc=$? $(tail -2 $R/tests-$f-$n.log | head -1)"
    grep -B3 -A25 "FAILED" $R/tests-$f-$n.log | head -40
  done
done
tar -C $R -czf $OUT/run.tar.gz .
