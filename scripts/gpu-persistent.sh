#!/usr/bin/env bash
# The persistent decode kernel on the GPU machine in one call (scripts/gpu-persistent.sh OUT): its tests, the slot-copy
# variants on synthetic 2B (EMBER_PD_DEBUG: 0 contiguous + per-row bulk, 4 contiguous + cp.async rows, 6 cp.async
# only, 2 per-row bulk only, 1 no products = the weight stream alone), then decode with the multi-kernel graph and
# with the persistent kernel (best variant) in the same run on synthetic 2B / 9B (EMBER_PD_MODELS) with a phase
# trace of 2B. Binaries: EMBER_PREBUILT=.devbin (scripts/gpu-pack.sh). Prints a short table last; logs in OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-/tmp/ember-gpu}}
mkdir -p "$OUT" build-gpu/bin
P=${EMBER_PREBUILT:-.devbin}
xz -dc "$P/bins.tar.xz" | tar -C build-gpu -xf - && { [ -f build-gpu/ember ] && mv build-gpu/ember build-gpu/bin/; true; }
export LD_LIBRARY_PATH="$PWD/build-gpu/lib:$(cd "$P" && pwd):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
E=build-gpu/bin/ember
sum="$OUT/summary.md"; : > "$sum"
timeout ${EMBER_PD_TEST_TIMEOUT:-150} build-gpu/test_cuda --gtest_filter="${EMBER_PD_TESTS:-PersistentDecode*}" > "$OUT/test.log" 2>&1
echo "tests rc=$? $(grep -cE '^\[       OK \]' "$OUT/test.log") ok, failed: $(grep -E '^\[  FAILED  \] [A-Z]' "$OUT/test.log" | tr '\n' ' ')" >> "$sum"
grep -E "persistent vs graph" "$OUT/test.log" >> "$sum"
best=0; bestv=0
for d in ${EMBER_PD_VARIANTS:-0 4 6 2 1}; do
  EMBER_PD_DEBUG=$d EMBER_DECODE=persistent timeout 60 $E bench --synthetic qwen3.5-2b --device cuda -p 0 -n 64 -r 1 \
    > "$OUT/variant_$d.md" 2>&1
  v=$(awk -F'|' '/qwen3.5-2b/ {gsub(/ /,"",$6); split($6,a,"±"); print a[1]}' "$OUT/variant_$d.md" | tail -1)
  echo "variant EMBER_PD_DEBUG=$d: 2B tg64 ${v:-?} tok/s" >> "$sum"
  if [ "$d" != 1 ] && [ -n "$v" ] && awk -v a="$v" -v b="$bestv" 'BEGIN{exit !(a>b)}'; then best=$d; bestv=$v; fi
done
echo "best copy variant: EMBER_PD_DEBUG=$best" >> "$sum"
EMBER_PD_DEBUG=$best EMBER_DECODE=persistent EMBER_PD_TRACE=1 EMBER_PD_TRACE_FILE="$OUT/trace_2b.bin" timeout 60 \
  $E bench --synthetic qwen3.5-2b --device cuda -p 0 -n 128 -r 1 > "$OUT/trace_2b.md" 2>&1
grep -E "phases:|total" "$OUT/trace_2b.md" | tail -5 >> "$sum"
models=${EMBER_PD_MODELS:-qwen3.5-2b,qwen3.5-9b}
for mode in graph persistent; do
  EMBER_PD_DEBUG=$best EMBER_DECODE=$mode timeout 200 $E bench --synthetic "$models" --device cuda -p 0 -n 128 -r 2 \
    > "$OUT/bench_$mode.md" 2> "$OUT/bench_$mode.err"
  echo "EMBER_DECODE=$mode rc=$?" >> "$sum"; grep -E "^\| qwen" "$OUT/bench_$mode.md" >> "$sum"
done
cat "$sum"
