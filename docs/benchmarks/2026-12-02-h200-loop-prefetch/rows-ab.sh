#!/usr/bin/env bash
# A/B of the row kernels (softmax, rmsnorm, add) and example-decide between two packages.
set -u
OUT=${OUT:-/tmp/kiln-out}; R=/tmp/rows-ab; rm -rf $R; mkdir -p $R $OUT
for v in kiln-old kiln-device; do mkdir -p /tmp/ab/$v && tar -xJf .device/$v.tar.xz -C /tmp/ab/$v; done
for round in ${ROUNDS:-1 2}; do
  for v in kiln-old kiln-device; do
    export LD_LIBRARY_PATH=/tmp/ab/$v/lib:/usr/local/cuda/lib64 KILN_CACHE_DIR=/tmp/kc-$v
    for k in softmax rmsnorm add; do
      /tmp/ab/$v/bin/kiln bench $k --backend=cuda --dtype bf16 --shape 4096x4096 --shape 16384x4096 --shape 64x4096 --shape 4096x1000 \
        --routes kiln --reps 30 --warmup 5 --no-progress --csv $R/$v-$k-$round.csv > $R/$v-$k-$round.log 2>&1
    done
    /tmp/ab/$v/bin/example-decide --csv $R/$v-decide-$round.csv > $R/$v-decide-$round.log 2>&1
  done
done
cat $R/*softmax-1.log | head -12
python3 - <<'PY'
import csv,glob,os
rows={}
for f in sorted(glob.glob('/tmp/rows-ab/*.csv')):
    b=os.path.basename(f)[:-4]
    v='new' if b.startswith('kiln-device') else 'old'
    for r in csv.DictReader(open(f)):
        key=(r['kernel'],r['shape'],r['route'])
        rows.setdefault(key,{}).setdefault(v,[]).append((float(r['warm_ms'])*1000, r['reference_ok'], r.get('gbps','')))
for k,d in sorted(rows.items()):
    print(f"{k[0]:12s} {k[1]:12s} {k[2]:12s} old {[round(x[0],1) for x in d.get('old',[])]} new {[round(x[0],1) for x in d.get('new',[])]} ok {set(x[1] for x in d.get('new',[]))} GB/s new {[x[2][:6] for x in d.get('new',[])]}")
PY
tar -C $R -czf $OUT/rows-ab.tar.gz .
