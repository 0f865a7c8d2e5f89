#!/usr/bin/env bash
# Diagnostics for the decode GEMV on the device machine (scripts/gpu-ncu.sh OUT_DIR): the read-only streaming
# ceiling (read_bench) and Nsight Compute sections for the q kernel on a few shapes. Expects the binaries in
# $EMBER_PREBUILT (gemv_bench, read_bench) or build-gpu/. Writes OUT/read_bench.md and OUT/ncu_*.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-/tmp/ember-gpu}}
mkdir -p "$OUT"
B=${EMBER_PREBUILT:-build-gpu}
export LD_LIBRARY_PATH="$PWD/build-gpu/lib:$(cd "$B" && pwd):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -x "$B/read_bench" ] && [ -z "${EMBER_SKIP_READ:-}" ]; then
  timeout 120 "$B/read_bench" ${EMBER_READ_ARGS:---quick} > "$OUT/read_bench.md" 2>&1; echo "read_bench rc=$?"
fi
shapes=${EMBER_NCU_SHAPES:-"9B mlp gate|9B lm"}
IFS='|' read -ra list <<< "$shapes"
for s in "${list[@]}"; do
  f="$OUT/ncu_$(echo "$s" | tr ' /' '__').txt"
  timeout 200 "$NCU" --clock-control none -k "regex:${EMBER_NCU_KERNEL:-gemv_q_kernel}" --launch-skip 6 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis --section LaunchStats --section Occupancy --section InstructionStats \
    "$B/gemv_bench" --quick --no-ggml --no-prefill --only "$s" --n ${EMBER_NCU_N:-1} > "$f" 2>&1
  echo "ncu '$s' rc=$? ($f)"
done
[ -f "$OUT/read_bench.md" ] && tail -12 "$OUT/read_bench.md"
for f in "$OUT"/ncu_*.txt; do
  echo "== $f"; grep -E "DRAM Throughput|Memory Throughput|Duration|Issue Slots Busy|Issued Ipc|No Eligible|Active Warps Per|Stall|Registers Per|Executed Instructions  " "$f" | head -24
done
