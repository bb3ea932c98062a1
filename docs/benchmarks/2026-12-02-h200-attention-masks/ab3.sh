#!/usr/bin/env bash
# D64: two consumers at 128 keys vs three at 64 keys (env overrides), alternating; ragged checks.
set -u
OUT=${OUT:-/tmp/kiln-out}; R=/tmp/ab3; rm -rf $R; mkdir -p $R $OUT
mkdir -p /tmp/kp; tar -xJf .device/kiln-device.tar.xz -C /tmp/kp
export LD_LIBRARY_PATH=/tmp/kp/lib:/usr/local/cuda/lib64
K=/tmp/kp/bin
for v in "3 64"; do set -- $v
  for spec in c:2x8x2x333x64:f16 c:1x2x1x4097x64 1x3x3x1000x64 c:1x4x1x200x64 2x4x2x77x128; do
    k=attention; [[ $spec == c:* ]] && k=attention_causal; s=${spec#c:}; dt=bf16; [[ $s == *:f16 ]] && dt=f16; s=${s%:f16}
    KILN_ATT_CONSUMERS=$1 KILN_ATT_KV=$2 KILN_CACHE_DIR=/tmp/kc-$1-$2 timeout 120 $K/kiln run $k --backend=cuda --dtype $dt --shape $s > $R/run-$1-$2-$k-$s-$dt.log 2>&1
    echo "C=$1 kv=$2 run $k $s $dt rc=$? $(grep -oE "launch: .*|reference_ok=[a-z]+ rel_l2=[0-9.e+-]+" $R/run-$1-$2-$k-$s-$dt.log | head -2 | tr '\n' ' ')"
  done
done
for round in 1 2; do for v in "2 128" "3 64"; do set -- $v
  for spec in 4x32x32x4096x64 c:4x32x32x4096x64 4x32x8x4096x64; do
    k=attention; [[ $spec == c:* ]] && k=attention_causal; s=${spec#c:}
    KILN_ATT_CONSUMERS=$1 KILN_ATT_KV=$2 KILN_CACHE_DIR=/tmp/kc-$1-$2 timeout 200 $K/kiln bench $k --backend=cuda --dtype bf16 --shape $s --routes kiln --reps 10 --warmup 3 --no-progress --csv $R/b$round-$1-$2-$k-$s.csv > $R/b$round-$1-$2-$k-$s.log 2>&1
    echo "round $round C=$1 kv=$2 $k $s rc=$? $(grep -A1 '^route' $R/b$round-$1-$2-$k-$s.log | tail -1 | awk '{print $4, $9}')"
  done
done; done
python3 .device/sdpa.py 4x32x32x4096x64 c:4x32x32x4096x64 4x32x8x4096x64 2>&1 | grep CUDNN | tee $R/sdpa.log
tar -C $R -czf $OUT/ab3.tar.gz .
