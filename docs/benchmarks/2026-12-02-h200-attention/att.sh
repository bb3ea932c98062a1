#!/usr/bin/env bash
# Attention on the H200: kiln bench attention beside PyTorch SDPA (cuDNN, FA2) in one call.
set -u
OUT=${OUT:-/tmp/kiln-out}; R=/tmp/att; rm -rf $R; mkdir -p $R $OUT /tmp/kiln
tar -xJf .device/kiln-device.tar.xz -C /tmp/kiln
export LD_LIBRARY_PATH=/tmp/kiln/lib:/usr/local/cuda/lib64 KILN_CACHE_DIR=/tmp/kc
K=/tmp/kiln/bin
if [ -n "${CASES:-}" ]; then
  $K/kiln-gpu-tests "$CASES" > $R/cases.log 2>&1; echo "cases rc=$?"; tail -3 $R/cases.log
fi
for spec in ${SHAPES:-4x32x32x4096x128 c:4x32x32x4096x128}; do
  k=attention; [[ $spec == c:* ]] && k=attention_causal
  s=${spec#c:}
  timeout 200 $K/kiln bench $k --backend=cuda --dtype bf16 --shape $s --routes kiln --reps ${REPS:-10} --warmup 3 --no-progress \
    --csv $R/$k-$s.csv > $R/$k-$s.log 2>&1; echo "$k $s rc=$?"; grep -A1 "^route" $R/$k-$s.log | tail -1
done
python3 .device/sdpa.py ${SHAPES:-4x32x32x4096x128 c:4x32x32x4096x128} 2>&1 | tee $R/sdpa.log
if [ -n "${NCU:-}" ]; then
  timeout 240 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
    -k regex:attention -c 1 $K/kiln bench attention --backend=cuda --dtype bf16 --shape $NCU --routes kiln --reps 1 --warmup 0 --no-progress > $R/ncu.log 2>&1
  echo "ncu rc=$?"; grep -E "Duration|Registers|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput|Block Limit|Shared Memory Config|Dynamic Shared|Stall|Warp Cycles" $R/ncu.log | head -40
fi
tar -C $R -czf $OUT/att.tar.gz .
