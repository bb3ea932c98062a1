#!/usr/bin/env bash
# On the device (repo root, .device carried): kiln's attention from main
# (.device/kiln-device.tar.xz) and each build in VARIANTS (.device/kiln-device-<v>.tar.xz),
# one process per build and shape, cuDNN's fused attention in main's process (framework
# route); then the GPU tests in TESTS on the build TB. Every result is packed into
# $OUT/run.tar.gz as soon as it exists, and nothing new starts after DEADLINE seconds, so a
# call cut short still brings back what finished. A table is printed as it goes.
set -u
START=$(date +%s); DEADLINE=${DEADLINE:-480}
OUT=${OUT:-/tmp/kiln-out}; mkdir -p $OUT; R=/tmp/run; rm -rf $R; mkdir -p $R
VARIANTS=${VARIANTS:-}
SHAPES=${SHAPES:-"bf16:attention:4x32x32x4096x128 bf16:attention_causal:4x32x32x4096x128"}
pack() { tar -C $R -czf $OUT/run.tar.gz.part . && mv $OUT/run.tar.gz.part $OUT/run.tar.gz; }
late() { [ $(( $(date +%s) - START )) -ge $DEADLINE ] && { echo "deadline: stopping before $*"; return 0; }; return 1; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } > $R/device.txt
for b in main $VARIANTS; do
  pkg=.device/kiln-device.tar.xz; [ $b = main ] || pkg=.device/kiln-device-$b.tar.xz
  rm -rf /tmp/kiln-$b; mkdir -p /tmp/kiln-$b; tar -xJf $pkg -C /tmp/kiln-$b
done
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null)
export KILN_CUDNN_LIBRARY=$CUDNN_DIR/libcudnn.so.9
bench() { # build kernel shape dtype routes
  local f=$R/$1-$2-$3-$4
  LD_LIBRARY_PATH=/tmp/kiln-$1/lib:$CUDNN_DIR:/usr/local/cuda/lib64 KILN_CACHE_DIR=/tmp/cache-$1 timeout ${BT:-60} \
    /tmp/kiln-$1/bin/kiln bench $2 --backend=cuda --dtype $4 --shape $3 --routes $5 --reps ${REPS:-10} --warmup 3 \
    --no-progress --csv $f.csv > $f.log 2>&1 || { echo "$1 $4 $2 $3 rc=$? $(grep -i "error\|failed" $f.log | head -2)"; pack; return; }
  python3 - $f.csv $2 $1 $4 <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    w = r['warm_ms']
    t = 'not timed' if w in ('', 'not-run') else f"{float(w)*1e3:8.1f} us {float(r['tflops']):6.1f} TFLOP/s"
    print(f"{sys.argv[3]:7} {sys.argv[4]:4} {sys.argv[2]:16} {r['route']:9} {r['shape']:19} {t} verified={r['reference_ok']}")
PY
  pack
}
for ds in $SHAPES; do
  d=${ds%%:*}; ks=${ds#*:}; k=${ks%%:*}; s=${ks#*:}
  late "$k $s" && break
  r=kiln,framework
  bench main $k $s $d $r
  for v in $VARIANTS; do bench $v $k $s $d kiln; done
done
# TESTS: Catch2 test specs separated by ';' (names hold spaces; Catch2 2.x takes a '*' at
# either end of a name only, not inside it).
TB=${TB:-main}; n=0
IFS=';' read -r -a specs <<< "${TESTS:-}"
for t in "${specs[@]}"; do
  late "tests $t" && break
  n=$((n + 1))
  LD_LIBRARY_PATH=/tmp/kiln-$TB/lib:$CUDNN_DIR:/usr/local/cuda/lib64 KILN_CACHE_DIR=/tmp/cache-t-$TB \
    timeout ${TT:-120} /tmp/kiln-$TB/bin/kiln-gpu-tests "$t" -d yes > $R/tests-$TB-$n.log 2>&1
  echo "tests ($TB) $t rc=$? $(grep -E "test cases|All tests passed" $R/tests-$TB-$n.log | tail -1)"
  grep -B3 -A20 "FAILED" $R/tests-$TB-$n.log | head -30
  pack
done
echo "wall $(( $(date +%s) - START )) s"
