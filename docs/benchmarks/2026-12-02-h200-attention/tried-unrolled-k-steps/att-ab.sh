#!/usr/bin/env bash
# A/B of attention between two packages (kiln-old, kiln-device), alternating, ROUNDS rounds.
set -u
OUT=${OUT:-/tmp/kiln-out}; R=/tmp/att-ab; rm -rf $R; mkdir -p $R $OUT
for v in kiln-old kiln-device; do mkdir -p /tmp/ab/$v && tar -xJf .device/$v.tar.xz -C /tmp/ab/$v; done
for round in ${ROUNDS:-1 2}; do
  for v in kiln-old kiln-device; do
    export LD_LIBRARY_PATH=/tmp/ab/$v/lib:/usr/local/cuda/lib64 KILN_CACHE_DIR=off
    for k in attention attention_causal; do
      timeout 60 /tmp/ab/$v/bin/kiln bench $k --backend=cuda --dtype bf16 --shape ${SHAPE:-4x32x32x4096x128} --routes kiln \
        --reps 10 --warmup 3 --no-progress --csv $R/$v-$k-$round.csv > $R/$v-$k-$round.log 2>&1
      echo "$round $v $k $(grep -A1 '^route' $R/$v-$k-$round.log | tail -1)"
    done
  done
done
tar -C $R -czf $OUT/att-ab.tar.gz .
