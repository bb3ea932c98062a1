#!/usr/bin/env bash
# On the device (repo root, .device carried): Nsight Compute on one kiln bench shape, kiln's
# attention twin and cuDNN's kernel each profiled once (after warm-up launches), the
# sections that say where the time goes. Reports as text into $OUT. KERNEL, SHAPE and
# KFILTER (ncu -k, kiln's kernel: regex:__sm90 for a GEMM twin) pick another kernel.
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT
SHAPE=${SHAPE:-64x32x8x512x128}; KERNEL=${KERNEL:-attention_packed_causal}
rm -rf /tmp/kiln-main; mkdir -p /tmp/kiln-main; tar -xJf .device/kiln-device.tar.xz -C /tmp/kiln-main
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null)
export KILN_CUDNN_LIBRARY=$CUDNN_DIR/libcudnn.so.9 LD_LIBRARY_PATH=/tmp/kiln-main/lib:$CUDNN_DIR:/usr/local/cuda/lib64
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
M=""
for r in barrier long_scoreboard wait math_pipe_throttle membar sleeping branch_resolving mio_throttle lg_throttle short_scoreboard no_instruction selected dispatch_stall misc imc_miss; do
  M="$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
S="--metrics ${M#,} --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats"
for route in kiln framework; do
  filter=${KFILTER:-regex:sm90_attn}; [ $route = framework ] && filter='regex:^((?!kiln_|qkv_tma).)*$'
  timeout ${PT:-200} $NCU $S -k "$filter" --launch-skip 3 --launch-count 1 \
    /tmp/kiln-main/bin/kiln bench $KERNEL --backend=cuda --dtype bf16 --shape $SHAPE --routes $route \
    --reps 3 --warmup 2 --no-progress > $OUT/ncu-$route-$KERNEL-$SHAPE.txt 2>&1
  echo "$route rc=$?"
  grep -E "^  [a-zA-Z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Registers Per|Shared Memory Config|Dynamic Shared|Block Size|Grid Size|Achieved Occupancy|Theoretical Occupancy|L2 Hit|Waves Per SM|Warp Cycles Per Issued|Issued Warp|No Eligible|stalled" $OUT/ncu-$route-$KERNEL-$SHAPE.txt | head -60
done
