#!/usr/bin/env bash
# Correctness of the attention twin on ragged shapes, then the bench beside SDPA; per package.
set -u
OUT=${OUT:-/tmp/kiln-out}; R=/tmp/att; rm -rf $R; mkdir -p $R $OUT
for pkg in ${PKGS:-kiln-device}; do
  mkdir -p /tmp/$pkg; tar -xJf .device/$pkg.tar.xz -C /tmp/$pkg
  export LD_LIBRARY_PATH=/tmp/$pkg/lib:/usr/local/cuda/lib64 KILN_CACHE_DIR=/tmp/kc-$pkg
  K=/tmp/$pkg/bin
  for spec in ${RUNS:-}; do
    k=attention; [[ $spec == c:* ]] && k=attention_causal
    s=${spec#c:}; dt=bf16; [[ $s == *:f16 ]] && dt=f16; s=${s%:f16}
    timeout 120 $K/kiln run $k --backend=cuda --dtype $dt --shape $s > $R/$pkg-run-$k-$s-$dt.log 2>&1; rc=$?
    echo "$pkg run $k $s $dt rc=$rc $(grep -oE "launch: .*|reference_ok=[a-z]+ rel_l2=[0-9.e+-]+" $R/$pkg-run-$k-$s-$dt.log | head -3 | tr '\n' ' ')"
  done
  for spec in ${SHAPES:-}; do
    k=attention; [[ $spec == c:* ]] && k=attention_causal
    s=${spec#c:}
    timeout 200 $K/kiln bench $k --backend=cuda --dtype bf16 --shape $s --routes kiln --reps ${REPS:-10} --warmup 3 --no-progress \
      --csv $R/$pkg-$k-$s.csv > $R/$pkg-$k-$s.log 2>&1; echo "$pkg $k $s rc=$?"; grep -A1 "^route" $R/$pkg-$k-$s.log | tail -1
  done
done
[ -n "${SHAPES:-}" ] && python3 .device/sdpa.py ${SHAPES} 2>&1 | tee $R/sdpa.log
tar -C $R -czf $OUT/att.tar.gz .
if [ -n "${NCU:-}" ]; then
  for pkg in ${PKGS:-kiln-device}; do
    export LD_LIBRARY_PATH=/tmp/$pkg/lib:/usr/local/cuda/lib64 KILN_CACHE_DIR=/tmp/kc-$pkg
    timeout 150 ncu --section SpeedOfLight --section WarpStateStats --section Occupancy \
      --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,launch__registers_per_thread \
      -k regex:sm90_attn -c 1 /tmp/$pkg/bin/kiln bench attention --backend=cuda --dtype bf16 --shape $NCU --routes kiln --reps 1 --warmup 0 --no-progress > $R/ncu-$pkg.log 2>&1
    echo "ncu $pkg rc=$?"; grep -E "Duration|gmma_cycles|inst_executed|registers_per|Compute \(SM\) Throughput|Stall|Warp Cycles Per Issued" $R/ncu-$pkg.log | head -14
  done
  tar -C $R -czf $OUT/att.tar.gz .
fi
