#!/usr/bin/env bash
# On the device (repo root, .device carried): kiln's attention (the overlapped twin) beside the
# framework route (cuDNN's fused attention, called by kiln, same harness, same process), one
# process per shape; the D64 shapes also from a build whose D64 twin takes 128 keys a step
# (.device/kiln-device-kv128.tar.xz, when carried); the GPU tests named in TESTS (each filter
# its own process, -d yes); Nsight Compute's per-instruction stall samples of the twin (NCU=1).
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT; R=/tmp/final; rm -rf $R; mkdir -p $R
SHAPES=${SHAPES:-"attention:4x32x32x4096x128 attention_causal:4x32x32x4096x128 attention:4x32x32x4096x64 attention_causal:4x32x32x4096x64 attention_causal:4x32x8x4096x128 attention_decode:1x32x32x1x32768x128 attention_decode:1x32x8x1x32768x128 attention_decode:16x32x8x1x4096x128"}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $R/device.txt
for b in new kv128; do
  pkg=.device/kiln-device.tar.xz; [ $b = kv128 ] && pkg=.device/kiln-device-kv128.tar.xz
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
  bench new $k $s bf16 kiln,framework
  [ "${s##*x}" = 64 ] && [ -d /tmp/kiln-kv128 ] && bench kv128 $k $s bf16 kiln
done
for ks in ${F16:-attention:4x32x32x4096x128 attention_causal:4x32x32x4096x128}; do bench new ${ks%%:*} ${ks#*:} f16 kiln,framework; done
export LD_LIBRARY_PATH=/tmp/kiln-new/lib:$CUDNN_DIR:/usr/local/cuda/lib64
n=0
for t in ${TESTS:-}; do
  n=$((n + 1)); timeout ${TT:-200} /tmp/kiln-new/bin/kiln-gpu-tests "$t" -d yes > $R/tests-$n.log 2>&1
  echo "tests $t rc=$? $(tail -2 $R/tests-$n.log | head -1)"
  grep " s: " $R/tests-$n.log | cut -c1-100
  grep -B3 -A25 "FAILED" $R/tests-$n.log | head -60
done
if [ -n "${NCU:-}" ]; then
  timeout 150 ncu --clock-control none --section WarpStateStats --section SourceCounters --section InstructionStats \
    -k 'regex:sm90_attn' --launch-skip 3 --launch-count 1 -o $R/kiln \
    /tmp/kiln-new/bin/kiln bench attention --backend=cuda --dtype bf16 --shape 4x32x32x4096x128 --routes kiln --reps 2 --warmup 2 --no-progress > $R/ncu.log 2>&1
  echo "ncu rc=$?"
  ncu -i $R/kiln.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $R/kiln-sass.csv.gz
  ncu -i $R/kiln.ncu-rep --page details > $R/kiln.txt 2>&1; rm -f $R/kiln.ncu-rep
  grep -E "Duration|Warp Cycles Per Issued" $R/kiln.txt | head -4
fi
tar -C $R -czf $OUT/final.tar.gz .
