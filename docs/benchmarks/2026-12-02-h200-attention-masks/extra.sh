#!/usr/bin/env bash
# Attention: f16, GQA, D64 f16 beside SDPA; cold compile phases (twin on / off). PKG.
set -u
OUT=${OUT:-/tmp/kiln-out}; R=/tmp/extra; rm -rf $R; mkdir -p $R $OUT
pkg=${PKG:-kiln-device}; mkdir -p /tmp/$pkg; tar -xJf .device/$pkg.tar.xz -C /tmp/$pkg
export LD_LIBRARY_PATH=/tmp/$pkg/lib:/usr/local/cuda/lib64
K=/tmp/$pkg/bin
for v in on off; do for spec in 1x32x32x4096x128 c:1x32x32x4096x128 1x32x32x4096x64; do
  k=attention; [[ $spec == c:* ]] && k=attention_causal; s=${spec#c:}
  rm -rf /tmp/kc-cold; KILN_HOPPER_GEMM=$v KILN_CACHE_DIR=/tmp/kc-cold timeout 100 $K/kiln bench $k --backend=cuda --dtype bf16 --shape $s --routes kiln --reps 2 --warmup 1 --no-progress --csv $R/cold-$v-$k-$s.csv > $R/cold-$v-$k-$s.log 2>&1
  echo "cold twin=$v $k $s: $(python3 -c "import csv,sys; r=next(csv.DictReader(open(sys.argv[1]))); print(r['compile_ms'], r['compile_phases'])" $R/cold-$v-$k-$s.csv)"
done; done
export KILN_CACHE_DIR=/tmp/kc-extra
for spec in 4x32x32x4096x128:f16 c:4x32x32x4096x128:f16 4x32x32x4096x64:f16 4x32x8x4096x128 c:4x32x8x4096x128 4x32x8x4096x64; do
  k=attention; [[ $spec == c:* ]] && k=attention_causal; s=${spec#c:}; dt=bf16; [[ $s == *:f16 ]] && dt=f16; s=${s%:f16}
  timeout 200 $K/kiln bench $k --backend=cuda --dtype $dt --shape $s --routes kiln --reps 10 --warmup 3 --no-progress --csv $R/$k-$s-$dt.csv > $R/$k-$s-$dt.log 2>&1
  echo "$k $s $dt rc=$? $(grep -A1 '^route' $R/$k-$s-$dt.log | tail -1 | awk '{print $4, $9}')"
done
python3 .device/sdpa2.py 4x32x32x4096x128:f16 c:4x32x32x4096x128:f16 4x32x32x4096x64:f16 4x32x8x4096x128 c:4x32x8x4096x128 4x32x8x4096x64 2>&1 | tee $R/sdpa.log
tar -C $R -czf $OUT/extra.tar.gz .
