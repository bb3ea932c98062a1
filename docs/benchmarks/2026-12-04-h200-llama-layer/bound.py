#!/usr/bin/env python3
"""What perfect fusion could give at most, from a kiln-llama CSV: every elementwise stage
(the two RMSNorms, RoPE) fused away at no cost, and every GEMM and attention stage at the
faster of kiln's and the framework's measured time. Prints that bound against the
framework's model_ms and the sum of its stages.

    python3 bound.py call9/prefill-b1.csv call9/prefill-b4.csv call9/decode-b16.csv
"""
import csv
import sys

ELEMENTWISE = {"llama.attn_norm", "llama.mlp_norm", "llama.rope"}

print(f"{'csv':28} {'bound ms':>9} {'fw model ms':>12} {'bound/model':>12} {'fw stages ms':>13} {'bound/stages':>13}")
for path in sys.argv[1:]:
    warm, model = {}, {}
    for r in csv.DictReader(open(path)):
        if r["model_ms"] != "not-run":
            model[r["route"]] = float(r["model_ms"])
        elif r["warm_ms"] != "not-run":
            warm.setdefault(r["kernel"], {})[r["route"]] = float(r["warm_ms"])
    bound = sum(min(t.values()) for k, t in warm.items() if k not in ELEMENTWISE)
    stages = sum(t["framework"] for t in warm.values())
    fw = model["framework"]
    print(f"{path:28} {bound:9.3f} {fw:12.3f} {bound / fw:12.2f} {stages:13.3f} {bound / stages:13.2f}")
