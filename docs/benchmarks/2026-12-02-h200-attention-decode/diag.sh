#!/usr/bin/env bash
# On the device: one kiln run per path of the attention twin, each under a short timeout,
# printed as it goes (a hang shows which path).
set -u
rm -rf /tmp/kiln; mkdir -p /tmp/kiln; tar -xJf .device/kiln-device.tar.xz -C /tmp/kiln
export LD_LIBRARY_PATH=/tmp/kiln/lib:/usr/local/cuda/lib64; K=/tmp/kiln/bin
one() { # env-mode kernel shape
  local mode=$1 k=$2 s=$3
  KILN_HOPPER_SPLIT_K=$mode timeout ${T:-40} $K/kiln run $k --backend cuda --dtype bf16 --shape $s --seed 1 > /tmp/r.log 2>&1
  echo "rc=$? split=$mode $k $s | $(grep -o 'reference_ok=[a-z]* rel_l2=[^ ]*' /tmp/r.log) | $(grep "^launch:" /tmp/r.log | cut -c1-170) | $(tail -1 /tmp/r.log | cut -c1-100)"
}
one auto attention_decode 1x4x4x1x300x128
one 1 attention_decode 1x32x32x1x32768x128
one auto attention 1x8x8x1000x128
one auto attention_causal 1x4x1x1000x128
one 2 attention_decode 1x32x32x1x32768x128
one auto attention_decode 1x32x32x1x32768x128
one auto attention_decode 1x8x2x1x4096x64
