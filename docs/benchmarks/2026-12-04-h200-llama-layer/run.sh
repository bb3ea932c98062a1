#!/usr/bin/env bash
# On the device (repo root, .device carried): kiln-llama's two paths (kiln, framework) over
# the layer shapes in RUNS ("mode:batch" items), each with --accept 1.10, its CSV/JSON/HTML
# and log, packed into $OUT/llama.tar.gz. A table of the model rows is printed last.
set -u
FINAL=${OUT:-/tmp/kiln-out}; OUT=/tmp/llama-out; rm -rf $OUT; mkdir -p $OUT $FINAL
rm -rf /tmp/kiln-main && mkdir -p /tmp/kiln-main && tar -xJf .device/kiln-device.tar.xz -C /tmp/kiln-main
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null)
export LD_LIBRARY_PATH=/tmp/kiln-main/lib:$CUDNN_DIR:/usr/local/cuda/lib64 KILN_CUDNN_LIBRARY=$CUDNN_DIR/libcudnn.so.9
export KILN_CACHE_DIR=/tmp/kiln-cache
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $OUT/device.txt
for r in ${RUNS:-prefill:1 decode:16}; do
  m=${r%%:*}; b=${r#*:}; f=$OUT/$m-b$b
  timeout ${LT:-200} /tmp/kiln-main/bin/kiln-llama --mode $m --batch $b --reps ${REPS:-20} --accept 1.10 \
    --csv $f.csv --json $f.json --html $f.html ${EXTRA:-} > $f.log 2>&1
  echo "$m b$b rc=$? $(grep -E "model_ok|error" $f.log | tail -1)"
done
tar -C $OUT -czf $FINAL/llama.tar.gz .
for f in $OUT/*.log; do echo "== $(basename $f .log)"; grep -E "against|framework / kiln|^(kiln|framework) +llama_layer|for llama_layer" $f; done
