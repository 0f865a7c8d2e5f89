#!/usr/bin/env python3
"""Per-kernel-name totals of an Nsight Compute CSV (--metrics gpu__time_duration.sum --csv --print-units base):
prints a Markdown table (calls, total µs, %, average µs), largest first. Kernels of the weight fill / upload
(names containing 'fill', 'upload', 'repack', 'tile') are listed apart and left out of the sum."""
import collections, csv, sys

rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    print("no kernels in", sys.argv[1]); sys.exit(0)
hdr, rows = rows[0], rows[1:]
ki, vi = hdr.index("Kernel Name"), hdr.index("Metric Value")
by, setup = collections.OrderedDict(), 0.0
for r in rows:
    name = r[ki].split("(")[0].split("<")[0][-60:]
    us = float(r[vi].replace(",", "")) / 1e3
    if any(w in r[ki] for w in ("fill", "upload", "repack", "tile_")):
        setup += us
        continue
    e = by.setdefault(name, [0, 0.0])
    e[0] += 1; e[1] += us
tot = sum(t for _, t in by.values())
print(f"kernels: {sum(c for c, _ in by.values())}, sum of kernel times {tot:.1f} us (setup kernels apart: {setup:.1f} us)\n")
print("| kernel | calls | total us | % | avg us |\n|---|---|---|---|---|")
for k, (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1]):
    print(f"| {k} | {c} | {t:.1f} | {100 * t / max(tot, 1e-9):.1f} | {t / c:.2f} |")
