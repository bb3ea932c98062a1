#!/usr/bin/env bash
# On the device (repo root, .device carried): kiln's attention from two builds, main
# (.device/kiln-device.tar.xz) and a variant (.device/kiln-device-$VARIANT.tar.xz, when carried),
# beside cuDNN's fused attention (the framework route, same harness, same process as main's row),
# one process per shape and build; then the GPU tests named in TESTS from the build TB (each
# filter its own process, -d yes).
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT; R=/tmp/run; rm -rf $R; mkdir -p $R
VARIANT=${VARIANT:-vers}
SHAPES=${SHAPES:-"attention:4x32x32x4096x128 attention_causal:4x32x32x4096x128 attention:4x32x32x4096x64 attention_causal:4x32x32x4096x64 attention_causal:4x32x8x4096x128 attention_decode:1x32x32x1x32768x128 attention_decode:1x32x8x1x32768x128 attention_decode:16x32x8x1x4096x128"}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $R/device.txt
for b in main $VARIANT; do
  pkg=.device/kiln-device.tar.xz; [ $b = main ] || pkg=.device/kiln-device-$b.tar.xz
  [ -f $pkg ] && { rm -rf /tmp/kiln-$b; mkdir -p /tmp/kiln-$b; tar -xJf $pkg -C /tmp/kiln-$b; }
done
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null)
export KILN_CUDNN_LIBRARY=$CUDNN_DIR/libcudnn.so.9
bench() { # build kernel shape dtype routes
  local f=$R/$1-$2-$3-$4
  LD_LIBRARY_PATH=/tmp/kiln-$1/lib:$CUDNN_DIR:/usr/local/cuda/lib64 KILN_CACHE_DIR=/tmp/cache-$1 timeout 200 \
    /tmp/kiln-$1/bin/kiln bench $2 --backend=cuda --dtype $4 --shape $3 --routes $5 --reps ${REPS:-10} --warmup 3 \
    --no-progress --csv $f.csv > $f.log 2>&1 || { echo "$1 $2 $3 $4 rc=$?: $(grep -i "error\|failed" $f.log | head -3)"; return; }
  python3 - $f.csv $2 $1 $4 <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
fw = {r['shape']: float(r['warm_ms']) for r in rows if r['route'] == 'framework' and r['warm_ms'] not in ('', 'not-run')}
for r in rows:
    w = r['warm_ms']
    if w in ('', 'not-run'):
        print(f"{sys.argv[3]:5} {sys.argv[4]:4} {sys.argv[2]:16} {r['route']:9} {r['shape']:19} not timed, verified={r['reference_ok']}"); continue
    ratio = f" x{fw[r['shape']] / float(w):.3f} of cuDNN" if r['shape'] in fw and r['route'] != 'framework' else ""
    print(f"{sys.argv[3]:5} {sys.argv[4]:4} {sys.argv[2]:16} {r['route']:9} {r['shape']:19} {float(w)*1e3:8.1f} us {float(r['tflops']):6.1f} TFLOP/s "
          f"{float(r['gbps'])/1e3:.3f} TB/s verified={r['reference_ok']}{ratio}")
PY
}
for ks in $SHAPES; do
  k=${ks%%:*}; s=${ks#*:}
  bench main $k $s bf16 kiln,framework
  [ -d /tmp/kiln-$VARIANT ] && bench $VARIANT $k $s bf16 kiln
done
for ks in ${F16:-attention:4x32x32x4096x128}; do
  bench main ${ks%%:*} ${ks#*:} f16 kiln,framework
  [ -d /tmp/kiln-$VARIANT ] && bench $VARIANT ${ks%%:*} ${ks#*:} f16 kiln
done
TB=${TB:-$VARIANT}; [ -d /tmp/kiln-$TB ] || TB=main
export LD_LIBRARY_PATH=/tmp/kiln-$TB/lib:$CUDNN_DIR:/usr/local/cuda/lib64
n=0
for t in ${TESTS:-}; do
  n=$((n + 1)); timeout ${TT:-200} /tmp/kiln-$TB/bin/kiln-gpu-tests "$t" -d yes > $R/tests-$n.log 2>&1
  echo "tests ($TB) $t rc=$? $(tail -2 $R/tests-$n.log | head -1)"
  grep " s: " $R/tests-$n.log | cut -c1-100
  grep -B3 -A25 "FAILED" $R/tests-$n.log | head -60
done
tar -C $R -czf $OUT/run.tar.gz .
