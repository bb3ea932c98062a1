#!/usr/bin/env bash
# On the device (repo root, .device carried): Nsight Compute's per-instruction stall samples
# of kiln's attention twin (one warm launch, KILN_EXP_ATTN as given), and the [cudnn] GPU
# tests with their durations (under TV's KILN_EXP_ATTN).
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT; R=/tmp/diag; rm -rf $R; mkdir -p $R
rm -rf /tmp/kiln-new; mkdir -p /tmp/kiln-new; tar -xJf .device/kiln-device.tar.xz -C /tmp/kiln-new
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null)
export KILN_CUDNN_LIBRARY=$CUDNN_DIR/libcudnn.so.9
export LD_LIBRARY_PATH=/tmp/kiln-new/lib:$CUDNN_DIR:/usr/local/cuda/lib64
K=${K:-attention}; S=${S:-4x32x32x4096x128}
if [ -n "${NCU:-1}" ]; then
  timeout 200 ncu --clock-control none --section WarpStateStats --section SourceCounters --section InstructionStats \
    -k 'regex:sm90_attn' --launch-skip ${SKIP:-3} --launch-count 1 -o $R/kiln \
    /tmp/kiln-new/bin/kiln bench $K --backend=cuda --dtype bf16 --shape $S --routes kiln --reps 2 --warmup 2 --no-progress > $R/kiln.log 2>&1
  echo "== ncu rc=$?"
  ncu -i $R/kiln.ncu-rep --page source --csv --print-source sass > $R/kiln-sass.csv 2> $R/kiln-sass.err
  ncu -i $R/kiln.ncu-rep --page details > $R/kiln.txt 2>&1
  grep -E "Duration|Warp Cycles Per Issued|Issue Slots Busy|Registers" $R/kiln.txt | head
fi
if [ -n "${TESTS:-}" ]; then
  ( [ -n "${TV:-}" ] && export KILN_EXP_ATTN=$TV
    timeout ${TT:-150} /tmp/kiln-new/bin/kiln-gpu-tests "$TESTS" -d yes > $R/tests.log 2>&1 ); echo "tests rc=$? $(tail -2 $R/tests.log | head -1)"
  grep " s: " $R/tests.log | head -20
fi
gzip -f $R/*.csv 2>/dev/null; rm -f $R/*.ncu-rep
tar -C $R -czf $OUT/diag.tar.gz .
