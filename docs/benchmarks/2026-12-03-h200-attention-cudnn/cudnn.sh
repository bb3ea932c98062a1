#!/usr/bin/env bash
# On the device (repo root, .device carried with .device/kiln-device.tar.xz): kiln's attention
# beside the framework route (cuDNN's fused attention, loaded by kiln from PyTorch's wheel) in
# kiln bench, one process per shape; the GPU tests named in TESTS; then PyTorch SDPA's cuDNN
# backend on the prefill shapes (sdpa2.py), in the same call, as a cross-check of the route.
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT; R=/tmp/cudnn; rm -rf $R; mkdir -p $R
HERE=$(dirname "$0")
SHAPES=${SHAPES:-"attention:4x32x32x4096x128 attention_causal:4x32x32x4096x128 attention:4x32x32x4096x64 attention_causal:4x32x32x4096x64 attention_causal:4x32x8x4096x128 attention_decode:1x32x32x1x32768x128 attention_decode:1x32x8x1x32768x128 attention_decode:16x32x8x1x4096x128"}
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $R/device.txt
rm -rf /tmp/kiln-new; mkdir -p /tmp/kiln-new; tar -xJf ${PKG:-.device/kiln-device.tar.xz} -C /tmp/kiln-new
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null)
[ -f "$CUDNN_DIR/libcudnn.so.9" ] || CUDNN_DIR=$(dirname "$(find / -name libcudnn.so.9 -path '*site-packages*' 2>/dev/null | head -1)")
export KILN_CUDNN_LIBRARY=$CUDNN_DIR/libcudnn.so.9
export LD_LIBRARY_PATH=/tmp/kiln-new/lib:$CUDNN_DIR:/usr/local/cuda/lib64
echo "cuDNN: $KILN_CUDNN_LIBRARY (torch says $(python3 -c 'import torch; print(torch.backends.cudnn.version())' 2>&1))" | tee -a $R/device.txt
timeout 60 /tmp/kiln-new/bin/kiln-cuda-support-tests "[cudnn]" > $R/support.log 2>&1; echo "support [cudnn] rc=$? $(tail -2 $R/support.log | head -1)"
timeout ${TT:-200} /tmp/kiln-new/bin/kiln-gpu-tests "${TESTS:-[cudnn]}" > $R/tests.log 2>&1
echo "tests rc=$? $(tail -2 $R/tests.log | head -1)"
grep -B3 -A25 "FAILED" $R/tests.log | head -120
for ks in $SHAPES; do
  k=${ks%%:*}; s=${ks#*:}; f=$R/$k-$s
  timeout 200 /tmp/kiln-new/bin/kiln bench $k --backend=cuda --dtype ${DT:-bf16} --shape $s --routes kiln,framework \
    --reps ${REPS:-10} --warmup 3 --no-progress --accept 1.0 --csv $f.csv > $f.log 2>&1 ||
    { echo "$k $s rc=$?: $(grep -i "error\|failed\|unsupported" $f.log | head -5)"; continue; }
  python3 - $f.csv $k <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
fw = {r['shape']: float(r['warm_ms']) for r in rows if r['route'] == 'framework' and r['warm_ms'] not in ('', 'not-run')}
for r in rows:
    w = r['warm_ms']
    if w in ('', 'not-run'):
        print(f"{sys.argv[2]:18} {r['route']:10} {r['shape']:20} not timed, verified={r['reference_ok']}"); continue
    ratio = fw[r['shape']] / float(w) if r['shape'] in fw else float('nan')
    print(f"{sys.argv[2]:18} {r['route']:10} {r['shape']:20} {float(w)*1e3:8.1f} us {float(r['tflops']):6.1f} TFLOP/s "
          f"{float(r['gbps'])/1e3:.3f} TB/s first {float(r['first_run_ms']):8.1f} ms verified={r['reference_ok']} x{ratio:.2f} of framework")
PY
done
python3 $HERE/../2026-12-02-h200-attention-masks/sdpa2.py ${SDPA:-4x32x32x4096x128 c:4x32x32x4096x128 4x32x32x4096x64 c:4x32x32x4096x64 c:4x32x8x4096x128} 2>&1 | grep CUDNN | tee $R/sdpa.log
tar -C $R -czf $OUT/cudnn.tar.gz .
