#!/usr/bin/env bash
# On the device (repo root, .device carried): Nsight Compute on one warm launch of kiln's
# attention twin and of cuDNN's fused attention (the framework route) for each shape in SHAPES
# (per-instruction stall samples of kiln's kernel kept as SASS CSV); then the GPU tests in TESTS
# (each filter its own process, -d yes).
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT; R=/tmp/diag; rm -rf $R; mkdir -p $R
rm -rf /tmp/kiln-new; mkdir -p /tmp/kiln-new; tar -xJf .device/kiln-device.tar.xz -C /tmp/kiln-new
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null)
export KILN_CUDNN_LIBRARY=$CUDNN_DIR/libcudnn.so.9
export LD_LIBRARY_PATH=/tmp/kiln-new/lib:$CUDNN_DIR:/usr/local/cuda/lib64
SEC="--section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section WarpStateStats --section InstructionStats"
for ks in ${SHAPES:-attention:4x32x32x4096x128 attention:4x32x32x4096x64}; do
  k=${ks%%:*}; s=${ks#*:}; tag=$k-$s
  timeout 150 ncu --clock-control none $SEC --section SourceCounters -k 'regex:sm90_attn' --launch-skip 3 --launch-count 1 -o $R/kiln-$tag \
    /tmp/kiln-new/bin/kiln bench $k --backend=cuda --dtype bf16 --shape $s --routes kiln --reps 2 --warmup 2 --no-progress > $R/kiln-$tag.log 2>&1
  echo "== kiln $tag ncu rc=$?"
  ncu -i $R/kiln-$tag.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $R/kiln-$tag-sass.csv.gz
  ncu -i $R/kiln-$tag.ncu-rep --page details > $R/kiln-$tag.txt 2>&1
  timeout 150 ncu --clock-control none $SEC -k 'regex:(?i)(sdpa|fmha|flash|attn|fprop)' --launch-skip 3 --launch-count 1 -o $R/cudnn-$tag \
    /tmp/kiln-new/bin/kiln bench $k --backend=cuda --dtype bf16 --shape $s --routes framework --reps 2 --warmup 2 --no-progress > $R/cudnn-$tag.log 2>&1
  echo "== cudnn $tag ncu rc=$?"
  ncu -i $R/cudnn-$tag.ncu-rep --page details > $R/cudnn-$tag.txt 2>&1
  for w in kiln cudnn; do
    echo "-- $w $tag"; grep -E "^  [a-z_0-9]+.*\(|Duration|Registers Per|Block Size|Grid Size|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Achieved Occupancy|Shared Memory Config|Waves Per SM|Compute \(SM\) Throughput" $R/$w-$tag.txt | head -16
  done
done
rm -f $R/*.ncu-rep
n=0
for t in ${TESTS:-}; do
  n=$((n + 1)); timeout ${TT:-200} /tmp/kiln-new/bin/kiln-gpu-tests "$t" -d yes > $R/tests-$n.log 2>&1
  echo "tests $t rc=$? $(tail -2 $R/tests-$n.log | head -1)"
  grep " s: " $R/tests-$n.log | cut -c1-100
  grep -B3 -A25 "FAILED" $R/tests-$n.log | head -60
done
tar -C $R -czf $OUT/diag.tar.gz .
