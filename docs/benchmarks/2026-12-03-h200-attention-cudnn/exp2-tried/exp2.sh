#!/usr/bin/env bash
# On the device (.device carried): the twin with every E-th exp2 of the score tile on the FMA
# pipe (KILN_SM90_EXP2_EMULATE=E; 0: all on the MUFU), each beside cuDNN in one process per
# shape (verified: sampled rows against f64, every element against cuDNN's output).
set -u
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT; R=/tmp/exp2; rm -rf $R; mkdir -p $R
rm -rf /tmp/kiln-new; mkdir -p /tmp/kiln-new; tar -xJf ${PKG:-.device/kiln-device.tar.xz} -C /tmp/kiln-new
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null)
export KILN_CUDNN_LIBRARY=$CUDNN_DIR/libcudnn.so.9 KILN_CACHE_DIR=off
export LD_LIBRARY_PATH=/tmp/kiln-new/lib:$CUDNN_DIR:/usr/local/cuda/lib64
for E in ${ES:-0 4 2}; do
  for ks in ${SHAPES:-attention:4x32x32x4096x128 attention_causal:4x32x32x4096x128 attention_causal:4x32x32x4096x64}; do
    KILN_SM90_EXP2_EMULATE=$E timeout 100 /tmp/kiln-new/bin/kiln bench ${ks%%:*} --backend=cuda --dtype bf16 --shape ${ks#*:} \
      --routes kiln,framework --reps ${REPS:-10} --warmup 3 --no-progress > $R/$E-${ks%%:*}-${ks#*:}.log 2>&1
    grep -E "^kiln |^framework |every element" $R/$E-${ks%%:*}-${ks#*:}.log | sed "s/^/E=$E ${ks%%:*} /" | cut -c1-170
  done
done
tar -C $R -czf $OUT/exp2.tar.gz .
