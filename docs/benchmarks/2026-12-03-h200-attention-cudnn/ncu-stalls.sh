#!/usr/bin/env bash
# On the device (repo root, .device carried): where kiln's attention twin and cuDNN's kernel
# stall, instruction by instruction (Nsight Compute's warp-state sampling per SASS line),
# one warm launch each at the same shape. The per-instruction CSVs go to $OUT/stalls.tar.gz.
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT; R=/tmp/stalls; rm -rf $R; mkdir -p $R
rm -rf /tmp/kiln-new; mkdir -p /tmp/kiln-new; tar -xJf ${PKG:-.device/kiln-device.tar.xz} -C /tmp/kiln-new
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null)
export KILN_CUDNN_LIBRARY=$CUDNN_DIR/libcudnn.so.9
export LD_LIBRARY_PATH=/tmp/kiln-new/lib:$CUDNN_DIR:/usr/local/cuda/lib64
K=${K:-attention}; S=${S:-4x32x32x4096x128}
for route in kiln framework; do
  timeout 250 ncu --clock-control none --section WarpStateStats --section SourceCounters --section InstructionStats \
    -k 'regex:^(?!kiln_flush_read)' --launch-skip ${SKIP:-3} --launch-count 1 -o $R/$route \
    /tmp/kiln-new/bin/kiln bench $K --backend=cuda --dtype bf16 --shape $S --routes $route --reps 2 --warmup 2 --no-progress > $R/$route.log 2>&1
  echo "== $route rc=$?"
  ncu -i $R/$route.ncu-rep --page source --csv --print-source sass > $R/$route-sass.csv 2> $R/$route-sass.err
  ncu -i $R/$route.ncu-rep --page details > $R/$route.txt 2>&1
  grep -E "Stall|Warp Cycles|stall" $R/$route.txt | head -20
  wc -l $R/$route-sass.csv
done
tar -C $R -czf $OUT/stalls.tar.gz .
