#!/usr/bin/env bash
# GPU verification and benchmarks, run on the device machine (scripts/gpu-check.sh [OUT_DIR]):
# builds with CUDA (sm_90a), runs the GPU tests, checks `ember logits --device cuda` against the oracle
# fixtures and against the CPU path, runs the benchmarks, and prints a short table last (full logs in OUT).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-/tmp/ember-gpu}}
mkdir -p "$OUT"
summary="$OUT/summary.md"
echo "| check | result |" > "$summary"; echo "|---|---|" >> "$summary"
row() { echo "| $1 | $2 |" >> "$summary"; }
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
row "commit / GPU" "$commit / $gpu"

t0=$(date +%s)
if [ -n "${EMBER_PREBUILT:-}" ]; then
  # Binaries built on the dev machine (sm_90a) and carried, with the few shared libraries the GPU image lacks.
  mkdir -p build-gpu/bin && cp "$EMBER_PREBUILT"/ember build-gpu/bin/ && cp "$EMBER_PREBUILT"/test_cuda "$EMBER_PREBUILT"/gemv_bench build-gpu/
  export LD_LIBRARY_PATH="$(cd "$EMBER_PREBUILT" && pwd):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  true
else
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  > "$OUT/build.log" 2>&1 && cmake --build build-gpu -j16 >> "$OUT/build.log" 2>&1
fi
rc=$?; row "build (s)" "rc=$rc, $(( $(date +%s) - t0 )) s"
[ $rc -ne 0 ] && { tail -40 "$OUT/build.log"; cat "$summary"; exit 1; }
E=build-gpu/bin/ember

# 1. kernel tests (GPU vs CPU references)
timeout 300 build-gpu/test_cuda --gtest_brief=1 > "$OUT/test_cuda.log" 2>&1
row "test_cuda" "rc=$?, $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_cuda.log" | tr '\n' ' ')"
grep -E "FAILED|Failure" "$OUT/test_cuda.log" | head -20

# 2. oracle fixtures on the GPU, and GPU vs CPU on synthetic 2B weights
python3 scripts/gpu_compare.py "$E" "$OUT" >> "$summary" 2> "$OUT/compare.log"
row "gpu_compare rc" "$?"

# 3. benchmarks
if [ -x build-gpu/gemv_bench ] && [ -z "${EMBER_SKIP_KERNEL_BENCH:-}" ]; then
  timeout 150 build-gpu/gemv_bench --quick > "$OUT/gemv_bench.md" 2>&1; row "gemv_bench" "rc=$? (gemv_bench.md)"
fi
if [ -f bench/peers/torch_int4.py ] && [ -z "${EMBER_SKIP_KERNEL_BENCH:-}" ]; then
  timeout 60 python3 bench/peers/torch_int4.py --quick > "$OUT/peers.md" 2>&1; row "torch peers" "rc=$? (peers.md)"
fi
if [ -z "${EMBER_SKIP_KERNEL_BENCH:-}" ]; then  # prefill attention table and its torch SDPA peer
  timeout 60 build-gpu/test_cuda --gtest_also_run_disabled_tests --gtest_filter='AttentionPrefillCuda.DISABLED_Timing' \
    > "$OUT/attention_prefill.md" 2>&1; row "attention prefill" "rc=$? (attention_prefill.md)"
  (cd bench/peers && timeout 60 python3 attention_sdpa.py) > "$OUT/attention_sdpa.md" 2>&1
  row "attention sdpa peer" "rc=$? (attention_sdpa.md)"
fi
models=${EMBER_MODELS:-qwen3.5-2b,qwen3.5-9b,qwen3.5-27b}
timeout 400 $E bench --synthetic "$models" --device cuda -p 512 -n 128 -r 2 > "$OUT/bench.md" 2> "$OUT/bench.err"
row "ember bench ($models)" "rc=$? (bench.md)"
# per-token trace of a few decode steps (kernels, GPU us, wall us)
$E generate --synthetic qwen3.5-2b --device cuda --prompt-len 16 -n 6 --ignore-eos --trace > /dev/null 2> "$OUT/trace.txt"
row "trace 2B (trace.txt)" "$(grep -c '^\[trace\]' "$OUT/trace.txt") steps; $(tail -1 "$OUT/trace.txt" | tr '|' '/')"
cat "$OUT/bench.md"
cat "$summary"
