#!/usr/bin/env bash
# Where a decode token's GPU time goes (scripts/gpu-profile.sh [OUT] [MODEL-PRESET]): Nsight Compute times every
# kernel node of the last decode graph launch of a short synthetic generate, each kernel alone with a cold L2
# (ncu --cache-control all), and prints the per-kernel table (sum by kernel name and by GEMV shape) and the sum,
# to compare with the token's graph time from `ember bench` (the difference is launch gaps and tails that
# programmatic dependent launch did not hide). E=path/to/ember (default build-gpu/bin/ember).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-/tmp/ember-gpu}}
P=${2:-qwen3.5-2b}
E=${E:-build-gpu/bin/ember}
mkdir -p "$OUT"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -z "$NCU" ]; then echo "ncu not found"; exit 0; fi
steps=3
K=$($E generate --synthetic "$P" --device cuda --prompt-len 4 -n 2 --ignore-eos 2>&1 >/dev/null |
    sed -n 's/.* \([0-9]*\) kernels\/token.*/\1/p' | tail -1)
[ -z "$K" ] && { echo "could not read kernels/token"; exit 1; }
timeout 500 "$NCU" --clock-control none --cache-control all --graph-profiling node --metrics gpu__time_duration.sum \
  --csv --print-units base --print-kernel-base function $E generate --synthetic "$P" --device cuda --prompt-len 4 -n $steps --ignore-eos \
  > "$OUT/ncu-decode-$P.csv" 2> "$OUT/ncu-decode-$P.err"
echo "ncu rc=$?"
python3 - "$OUT/ncu-decode-$P.csv" "$K" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr, rows = rows[0], rows[1:]
ki, vi, gi, bi = hdr.index("Kernel Name"), hdr.index("Metric Value"), hdr.index("Grid Size"), hdr.index("Block Size")
K = int(sys.argv[2])
us = lambda r: float(r[vi].replace(",", "")) / 1e3  # ns → us
last = rows[-K:]  # the kernel nodes of the last decode graph launch
tot = sum(us(r) for r in last)
by = collections.OrderedDict()
for r in last:
    e = by.setdefault(r[ki], [0, 0.0])
    e[0] += 1; e[1] += us(r)
print(f"one decode token: {K} kernels, sum of isolated kernel times {tot:.1f} us (cold L2 each)\n")
print("| kernel | calls | total us | % | avg us |\n|---|---|---|---|---|")
for k, (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1]):
    print(f"| {k[:60]} | {c} | {t:.1f} | {100*t/tot:.1f} | {t/c:.2f} |")
print("\nfirst 24 and last 6 kernels of the token, in order:\n\n| # | kernel | grid | block | us |\n|---|---|---|---|---|")
for i, r in list(enumerate(last))[:24] + list(enumerate(last))[-6:]:
    print(f"| {i} | {r[ki][:50]} | {r[gi]} | {r[bi]} | {us(r):.2f} |")
PY
