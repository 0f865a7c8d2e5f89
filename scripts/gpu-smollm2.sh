#!/usr/bin/env bash
# SmolLM2-135M-Instruct (Q4_1 GGUF) on the GPU machine: greedy 128 tokens on CUDA vs CPU (must be equal),
# `ember bench` (tok/s, kernels/token, GPU/host us per token). The model comes in pieces (.devdata/smollm2.part*,
# the device copy is size-limited; the machine has no network): scripts/gpu-smollm2.sh [OUT].
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-/tmp/ember-gpu}}
mkdir -p "$OUT"
E=${E:-build-gpu/bin/ember}
export LD_LIBRARY_PATH="$(pwd)/build-gpu/lib:$(pwd)/.devbin:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
M=.devdata/SmolLM2-135M-Instruct.Q4_1.gguf
cat .devdata/smollm2.part* | xz -dc > "$M" || cat .devdata/smollm2.part* | python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.decompress(sys.stdin.buffer.read()))" > "$M"
sha=$(sha256sum "$M" 2>/dev/null | cut -c1-16)
echo "model sha256 $sha (want b179c9523d0e6a0f)"
[ "$sha" = b179c9523d0e6a0f ] || { echo "gpu-smollm2: the model was not assembled (.devdata/smollm2.part* missing?)"; exit 1; }
P="The capital of France is"
for dev in cpu cuda; do
  $E generate -m "$M" -p "$P" -n 128 --ignore-eos --device $dev > "$OUT/smollm2-$dev.txt" 2> "$OUT/smollm2-$dev.err"
  tail -1 "$OUT/smollm2-$dev.err"
done
if cmp -s "$OUT/smollm2-cpu.txt" "$OUT/smollm2-cuda.txt"; then echo "greedy 128 tokens: CUDA text == CPU text"; else
  echo "greedy 128 tokens: DIFFER"; diff <(tr ' ' '\n' < "$OUT/smollm2-cpu.txt") <(tr ' ' '\n' < "$OUT/smollm2-cuda.txt") | head; fi
$E generate -m "$M" --chat -p "What is the capital of France? Answer in one sentence." -n 48 --device cuda 2>&1 | tail -3
$E bench -m "$M" -p 512 -n 128 -r 3 --device cuda 2>&1 | tee "$OUT/smollm2-bench.md"
$E generate -m "$M" -p "$P" -n 6 --ignore-eos --device cuda --trace 2>&1 | grep trace | tail -3
