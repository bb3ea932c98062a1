# Per-opcode warp-stall samples of the two kernels (ncu --page source --csv --print-source sass).
import csv, sys, collections, re, gzip, os
def load(f):
    rows = list(csv.reader(gzip.open(f + ".gz", "rt") if not os.path.exists(f) else open(f)))
    hdr = rows[1]; data = rows[2:]
    return hdr, data
for name in ["kiln", "framework"]:
    hdr, data = load(f"{name}-sass.csv")
    ix = {h:i for i,h in enumerate(hdr)}
    stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    tot = collections.Counter(); byop = collections.defaultdict(collections.Counter)
    samples = 0; inst = 0
    for r in data:
        if len(r) < len(hdr): continue
        src = r[ix["Source"]].strip()
        op = re.sub(r"^@!?U?P\w+\s+", "", src).split(" ")[0]
        s = int(r[ix["Warp Stall Sampling (All Samples)"]] or 0); samples += s
        inst += int(r[ix["Instructions Executed"]] or 0)
        for h in stalls:
            v = int(r[ix[h]] or 0); tot[h] += v; byop[op][h] += v
    print(f"== {name}: {samples} samples, {inst} warp instructions")
    for h, v in tot.most_common(10): print(f"  {h:28} {v:8} {100*v/samples:5.1f}%")
    opt = collections.Counter({op: sum(c.values()) for op, c in byop.items()})
    print("  by opcode:")
    for op, v in opt.most_common(14):
        top = ", ".join(f"{k[6:]} {c}" for k, c in byop[op].most_common(3))
        print(f"    {op:24} {v:8} {100*v/samples:5.1f}%   ({top})")
