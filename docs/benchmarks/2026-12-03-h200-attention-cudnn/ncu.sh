#!/usr/bin/env bash
# On the device (repo root, .device carried): Nsight Compute on one warm launch of kiln's
# attention and one of cuDNN's (kiln bench's two routes), same shape, to see where kiln's
# time goes against cuDNN's. Reports into $OUT/ncu.tar.gz; the details pages are printed.
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT; R=/tmp/ncu; rm -rf $R; mkdir -p $R
rm -rf /tmp/kiln-new; mkdir -p /tmp/kiln-new; tar -xJf ${PKG:-.device/kiln-device.tar.xz} -C /tmp/kiln-new
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null)
export KILN_CUDNN_LIBRARY=$CUDNN_DIR/libcudnn.so.9
export LD_LIBRARY_PATH=/tmp/kiln-new/lib:$CUDNN_DIR:/usr/local/cuda/lib64
K=${K:-attention}; S=${S:-4x32x32x4096x128}
SECTIONS="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats"
for route in kiln framework; do
  timeout 280 ncu --clock-control none $SECTIONS --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum \
    -k 'regex:^(?!kiln_flush_read)' --launch-skip ${SKIP:-3} --launch-count 1 -o $R/$route \
    /tmp/kiln-new/bin/kiln bench $K --backend=cuda --dtype bf16 --shape $S --routes $route --reps 2 --warmup 2 --no-progress > $R/$route.log 2>&1
  echo "== $route rc=$?"
  ncu -i $R/$route.ncu-rep --page details > $R/$route.txt 2>&1
  grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|Throughput|Registers Per|Shared Memory Config|Dynamic Shared|Block Size|Grid Size|Cluster|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Executed Ipc|No Eligible|Warp Cycles Per Issued|gmma|inst_executed|Stall|One or More" $R/$route.txt | head -60
done
tar -C $R -czf $OUT/ncu.tar.gz .
