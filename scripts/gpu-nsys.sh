#!/usr/bin/env bash
# Where a batched decode step's GPU time goes (scripts/gpu-nsys.sh OUT [PRESET] [ROWS]): Nsight Systems traces
# every kernel node of `ember bench --batch ROWS` (graph nodes traced one by one) and prints the kernel summary
# (time by kernel name), mostly the decode steps (-n 128 steps against 1-token prompts). E = path of ember.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/ember-gpu}
P=${2:-qwen3.5-2b}
R=${3:-64}
E=${E:-build-gpu/bin/ember}
mkdir -p "$OUT"
N=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)
if [ -z "$N" ]; then echo "nsys not found"; exit 0; fi
timeout 300 "$N" profile --cuda-graph-trace=node -o "$OUT/nsys-$P-$R" --force-overwrite true \
  "$E" bench --synthetic "$P" --device cuda --batch "$R" -n 128 -r 1 -c 256 --batch-prompt 1 > "$OUT/nsys-$P-$R.log" 2>&1
echo "nsys rc=$?"
"$N" stats --report cuda_gpu_kern_sum --format csv "$OUT/nsys-$P-$R.nsys-rep" > "$OUT/nsys-$P-$R-kern.csv" 2> /dev/null
python3 - "$OUT/nsys-$P-$R-kern.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
hdr = next(i for i, r in enumerate(rows) if "Name" in r)
h, body = rows[hdr], rows[hdr + 1:]
ti, ci, ni = h.index("Total Time (ns)"), h.index("Instances"), h.index("Name")
tot = sum(float(r[ti]) for r in body)
print("| kernel | % | total ms | calls | avg us |\n|---|---|---|---|---|")
for r in sorted(body, key=lambda r: -float(r[ti]))[:25]:
    t = float(r[ti]); c = int(r[ci])
    print(f"| {r[ni][:90]} | {100*t/tot:.1f} | {t/1e6:.1f} | {c} | {t/c/1e3:.1f} |")
PY
