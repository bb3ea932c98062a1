#!/usr/bin/env python3
"""Prints ncu PM-sampling timelines, one block per profiled launch.

Input: the CSV of `ncu --import REPORT --page raw --csv --print-metric-instances values`
for a report collected with `--section PmSampling`. Each PM-sampling metric is a series of
per-interval values; this prints, for every launch, the window where the first series is
above 0.5 (and two samples either side). By default: DRAM read and write throughput, the
tensor pipe, L2 traffic from the SMs and the clusters active, in percent of peak (clusters: a
count); the window is where DRAM reads pass 0.5% of peak.

usage: pm-timeline.py RAW.csv [METRIC-SUBSTRING ...]  (the first names the window's series)
"""
import csv
import sys

DEFAULT = [
    ("dram read %", "dramc__read_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("dram write %", "dramc__write_throughput.avg.pct_of_peak_sustained_elapsed"),
    ("tensor pipe %", "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"),
    ("L2 from SMs %", "lts__t_sector_throughput_srcunit_tex.avg.pct_of_peak_sustained_elapsed"),
    ("clusters active", "gpc__cgas_active_realtime.avg"),
]


def series(cell):
    """'(1; 2,5; 3)' -> [1.0, 2.5, 3.0]; [] for a cell holding no series."""
    if "(" not in cell:
        return []
    body = cell[cell.index("(") + 1:cell.rindex(")")]
    return [float(x.replace(",", "")) for x in body.split(";")]


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    rows = list(csv.reader(open(argv[1], newline="")))
    if len(rows) < 3:
        sys.exit(f"{argv[1]}: no launches (is it ncu's raw page with --print-metric-instances values?)")
    header = rows[0]
    wanted = [(s, s) for s in argv[2:]] or DEFAULT
    columns = []
    for label, part in wanted:
        match = next((i for i, name in enumerate(header) if part in name), None)
        if match is not None:
            columns.append((label, match))
        elif not columns:  # the window's series
            sys.exit(f"{argv[1]}: no '{part}' series: was the report collected with --section PmSampling?")
        else:
            print(f"(no metric matches '{part}')")
    shown = 0
    for row in rows[2:]:  # rows[1] holds the units
        cells = dict(zip(header, row))
        first = series(row[columns[0][1]])
        busy = [i for i, x in enumerate(first) if x > 0.5]
        if not busy:
            continue
        shown += 1
        lo, hi = max(0, busy[0] - 2), busy[-1] + 3
        print(f"== launch {cells.get('ID', '?')}: {cells.get('Kernel Name', '')[:60]} (samples {lo}..{hi - 1})")
        for label, i in columns:
            print(f"{label:16s}" + "".join(f"{x:6.0f}" for x in series(row[i])[lo:hi]))
    if not shown:
        sys.exit(f"{argv[1]}: no launch has a DRAM series (--print-metric-instances values, --section PmSampling?)")


if __name__ == "__main__":
    main(sys.argv)
