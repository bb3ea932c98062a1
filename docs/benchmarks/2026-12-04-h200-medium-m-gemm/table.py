#!/usr/bin/env python3
"""Tabulates kiln bench CSVs named hopper-<kernel>-<variant>.csv in a folder: per kernel and
shape, kiln's median warm time per variant and cuBLASLt's (the framework route) in the same
runs, in microseconds. Usage: table.py FOLDER VARIANT... (in the order to print)."""
import csv, glob, os, sys
from collections import defaultdict

folder, variants = sys.argv[1], sys.argv[2:]
kiln, cublas, unverified = defaultdict(dict), defaultdict(list), []
for f in sorted(glob.glob(os.path.join(folder, "hopper-*.csv"))):
    kernel, variant = os.path.basename(f)[len("hopper-"):-len(".csv")].rsplit("-", 1)
    for r in csv.DictReader(open(f)):
        us = float(r["warm_ms"]) * 1000
        if r["reference_ok"] != "true":
            unverified.append((f, r["shape"], r["route"]))
        if r["route"] == "framework":
            cublas[(kernel, r["shape"])].append(us)
        else:
            kiln[(kernel, r["shape"])][variant] = us
print("kernel shape | cuBLASLt us (min-max) | kiln us: " + " ".join(variants))
for (kernel, shape), v in kiln.items():
    fw = cublas[(kernel, shape)]
    cells = " ".join(f"{v[x]:.1f}" if x in v else "-" for x in variants)
    print(f"{kernel} {shape} | {min(fw):.1f}-{max(fw):.1f} | {cells}")
print("rows not verified:", unverified or "none")
