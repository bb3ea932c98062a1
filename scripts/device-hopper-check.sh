#!/usr/bin/env bash
# Quick checks of the sm_90a GEMM twin on the GPU machine, each under a timeout, printing as
# it goes (a hang shows which step). Unpacks what scripts/package-device.sh built.
# `kiln run` and `kiln bench` verify against the Eigen f64 reference on the host first:
# about 15 s at 4096^3 (kiln bench uses cuBLASLt above 2^33 multiply-adds) — hence the timeouts.
set -u
cd "$(dirname "$0")/.."
mkdir -p /tmp/kiln && tar -xJf .device/kiln-device.tar.xz -C /tmp/kiln
export LD_LIBRARY_PATH=/tmp/kiln/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} KILN_CACHE_DIR=off
K=/tmp/kiln/bin
step() { local t=$1; shift; echo "== $* (timeout ${t}s)"; timeout "$t" "$@" 2>&1 | tail -n 4; echo "rc=${PIPESTATUS[0]}"; }
for env in "KILN_HOPPER_PERSISTENT=off" "KILN_HOPPER_PERSISTENT=on"; do
  for s in 256x256x256 1000x1000x1000 4096x4096x4096; do
    step 45 env $env $K/kiln run gemm_bias_relu --backend=cuda --shape $s --dtype bf16
  done
done
step 45 env KILN_HOPPER_TILE_N=256 $K/kiln run gemm_bias_relu --backend=cuda --shape 4097x4096x4096 --dtype bf16
for env in "KILN_HOPPER_PERSISTENT=off" "KILN_HOPPER_PERSISTENT=on" "KILN_HOPPER_TILE_N=256" "KILN_HOPPER_GEMM=off"; do
  echo "== bench $env"
  timeout 120 env $env $K/kiln bench gemm_bias_relu --backend=cuda --dtype bf16 --routes kiln,framework --reps 20 --warmup 3 \
    --no-progress --shape 4096x4096x4096 --shape 4097x4096x4096 --shape 1000x1000x1000 \
    --shape 128x12288x4096 --shape 16x4096x4096 2>&1 | grep -E "^(kiln|framework) " | awk '{print $1, $2, $8, $9}'
done
step 150 $K/kiln-gpu-tests "[sm90]"
step 150 $K/kiln-gpu-tests "~[sm90]~[sticky]"
