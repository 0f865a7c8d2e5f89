#!/usr/bin/env bash
# Per-kernel time of a Qwen3.5-2B-shaped decode on the GPU (nsys when available): which kernels a decode token
# spends its time in. scripts/gpu-profile.sh [OUT] [MODEL-PRESET]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-/tmp/ember-gpu}}
P=${2:-qwen3.5-2b}
E=${E:-build-gpu/bin/ember}
mkdir -p "$OUT"
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
if [ -z "$NSYS" ]; then echo "nsys not found"; exit 0; fi
"$NSYS" profile -t cuda --cuda-graph-trace=node -o "$OUT/decode-$P" -f true \
  $E generate --synthetic "$P" --device cuda --prompt-len 8 -n 64 --ignore-eos > /dev/null 2> "$OUT/nsys.err"
"$NSYS" stats --report cuda_gpu_kern_sum --format csv -o "$OUT/kern-$P" "$OUT/decode-$P.nsys-rep" > /dev/null 2>&1
python3 - "$OUT/kern-${P}_cuda_gpu_kern_sum.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
tot = sum(float(r["Total Time (ns)"]) for r in rows)
print(f"| kernel | % time | calls | avg us |\n|---|---|---|---|")
for r in rows[:14]:
    print(f"| {r['Name'][:70]} | {100*float(r['Total Time (ns)'])/tot:.1f} | {r['Instances']} | {float(r['Avg (ns)'])/1e3:.2f} |")
PY
