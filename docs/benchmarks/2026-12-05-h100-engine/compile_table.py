#!/usr/bin/env python3
"""Cold compile and disk hit per JIT and compile_threads: median and max over the fresh
processes of `scripts/device-run.sh cache` (compile.csv: the driver's JIT; compile-ptxas.csv:
the toolkit's ptxas; compile-auto.csv: kiln's default, KILN_HOPPER_JIT=auto).
Usage: compile_table.py FOLDER"""
import csv, os, statistics, sys

folder = sys.argv[1] if len(sys.argv) > 1 else "."
cols = ["compile_call_ms", "lowering_ms", "codegen_ms", "load_ms", "assemble_ms", "cache_load_ms", "import_ms"]
print("| kernel | JIT | compile_threads | outcome | runs | verified | " + " | ".join(c[:-3] + " (median, max)" for c in cols) + " |")
print("|---|---|---|---|---|---|" + "---|" * len(cols))
for name, jit in (("compile.csv", "driver"), ("compile-ptxas.csv", "ptxas"), ("compile-auto.csv", "auto")):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        continue
    groups = {}
    for r in csv.DictReader(open(path)):
        groups.setdefault((r.get("kernel", "gemm_bias_relu"), r["compile_threads"], r["outcome"]), []).append(r)
    for (kernel, threads, outcome), rows in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] != "miss")):
        cells = []
        for c in cols:
            v = [float(r[c]) for r in rows]
            cells.append("%.0f, %.0f" % (statistics.median(v), max(v)))
        ok = sum(r["reference_ok"] == "true" for r in rows)
        print("| %s | %s | %s | %s | %d | %d | %s |" % (kernel, jit, threads, "cold" if outcome == "miss" else outcome, len(rows), ok, " | ".join(cells)))
