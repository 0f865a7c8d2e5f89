#!/usr/bin/env bash
# gpu-peer.sh OUT — llama.cpp CUDA (the peer) and ember on the same GGUF, on the GPU machine (no internet).
# Needs .devpack/llama.cpp.tar.xz (scripts/pack-llama-peer.sh on the dev machine; git-ignored, so name .devpack
# in the device call's carry) and an ember CUDA binary: $EMBER (default build-gpu/bin/ember, e.g. after
# scripts/gpu-check.sh), or EMBER_PREBUILT=.devbin (scripts/gpu-pack.sh) whose bins.tar.xz is unpacked here.
# Steps (each logged to OUT/peer-*.log, each under timeout; a step whose output exists is skipped, so a second
# call on a warm machine resumes where a first one ran out of time):
#   a. unpack to /tmp/llama.cpp, build llama-batched-bench llama-bench llama-quantize (ninja -j16, ~5 min),
#      while b. runs beside it:
#   b. random-weight Qwen3.5-2B-shaped HF checkpoint (scripts/peer_llama_cpp/make_q35_hf.py, numpy only) →
#      /tmp/q35-2b-hf, converted by llama.cpp's own convert_hf_to_gguf.py (--outtype bf16 --no-mtp, the
#      pre-tokenizer named qwen35 by scripts/peer_llama_cpp/convert_hf.py) → /tmp/q35-2b-bf16.gguf
#   c. llama-quantize → /tmp/q35-2b-q4_0.gguf (PEER_QTYPE, default Q4_0)
#   d. llama-batched-bench -npp 128 -ntg 128 -npl 1,8,32,64 → OUT/peer-batched.md, and ember bench --batch on
#      the same file → OUT/ember-batched-gguf.md; PEER_LLAMA_BENCH=1 also runs llama-bench -p 512 -n 128 and
#      ember bench -p 512 -n 128 (OUT/peer-bench.md, OUT/ember-bench-gguf.md)
#   e. a summary table last (OUT/peer-summary.md): aggregate decode tok/s per stream count, both engines.
# PEER_STEPS (default "build model quant bench") picks steps; PEER_NPL (default 1,8,32,64).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-/tmp/ember-peer}}
mkdir -p "$OUT"
export PATH="$PATH:/usr/local/cuda/bin"
LL=/tmp/llama.cpp
BIN=$LL/build/bin
HF=/tmp/q35-2b-hf
QT=${PEER_QTYPE:-Q4_0}
F16=/tmp/q35-2b-bf16.gguf
F=/tmp/q35-2b-$(echo "$QT" | tr 'A-Z' 'a-z').gguf
NPL=${PEER_NPL:-1,8,32,64}
STEPS=" ${PEER_STEPS:-build model quant bench} "
has() { [[ "$STEPS" == *" $1 "* ]]; }
note() { echo "[gpu-peer $(date +%H:%M:%S)] $*" | tee -a "$OUT/peer-steps.log"; }
t00=$(date +%s)

# a. unpack (fast) first: the converter of step b is in the same tree
if [ ! -f "$LL/CMakeLists.txt" ]; then
  [ -s .devpack/llama.cpp.tar.xz ] || { note "no .devpack/llama.cpp.tar.xz (scripts/pack-llama-peer.sh; carry .devpack)"; exit 1; }
  (xz -dc .devpack/llama.cpp.tar.xz 2>/dev/null ||
   python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.decompress(open(sys.argv[1],'rb').read()))" \
     .devpack/llama.cpp.tar.xz) | tar -C /tmp -xf - || { note "unpack failed"; exit 1; }
fi
note "llama.cpp: $(head -1 "$LL/PEER-VERSION" 2>/dev/null)"

build_pid=
if has build && { [ ! -x "$BIN/llama-batched-bench" ] || [ ! -x "$BIN/llama-quantize" ] || [ ! -x "$BIN/llama-bench" ]; }; then
  commit=$(grep -o 'llama\.cpp@[0-9a-f]*' "$LL/PEER-VERSION" 2>/dev/null | cut -d@ -f2)
  ( t0=$(date +%s)
    timeout 150 cmake -S "$LL" -B "$LL/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90a -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_COMMIT="${commit:-unknown}" \
    && timeout 900 ninja -C "$LL/build" -j16 llama-batched-bench llama-bench llama-quantize
    rc=$?; echo "build rc=$rc in $(( $(date +%s) - t0 )) s"; exit $rc ) > "$OUT/peer-build.log" 2>&1 &
  build_pid=$!
  note "build started (OUT/peer-build.log)"
fi

# b. the checkpoint and its BF16 GGUF (beside the build: numpy and the converter use a core or two)
if has model && [ ! -s "$F16" ]; then
  t0=$(date +%s)
  if [ ! -s "$HF/model.safetensors" ]; then
    timeout 600 python3 scripts/peer_llama_cpp/make_q35_hf.py "$HF" > "$OUT/peer-model.log" 2>&1
    note "checkpoint rc=$? $(tail -1 "$OUT/peer-model.log")"
  fi
  # convert_hf.py finds the converter as $PEER_SRC/vendor/llama.cpp
  mkdir -p /tmp/peer-src/vendor && ln -sfn "$LL" /tmp/peer-src/vendor/llama.cpp
  PEER_SRC=/tmp/peer-src timeout 900 python3 scripts/peer_llama_cpp/convert_hf.py --pre qwen35 -- "$HF" \
    --outtype bf16 --no-mtp --outfile "$F16.tmp" > "$OUT/peer-convert.log" 2>&1 && mv "$F16.tmp" "$F16"
  note "convert rc=$? in $(( $(date +%s) - t0 )) s: $(ls -la "$F16" 2>&1)"
  [ -s "$F16" ] || tail -30 "$OUT/peer-convert.log"
fi

if [ -n "$build_pid" ]; then
  wait "$build_pid"; rc=$?
  note "$(tail -1 "$OUT/peer-build.log")"
  [ $rc -ne 0 ] && { grep -E "error|FAILED" "$OUT/peer-build.log" | head -20; tail -20 "$OUT/peer-build.log"; exit 1; }
fi
[ -x "$BIN/llama-quantize" ] || { note "no $BIN/llama-quantize"; exit 1; }

# c. quantize
if has quant && [ ! -s "$F" ] && [ -s "$F16" ]; then
  t0=$(date +%s)
  timeout 400 "$BIN/llama-quantize" "$F16" "$F.tmp" "$QT" 16 > "$OUT/peer-quantize.log" 2>&1 && mv "$F.tmp" "$F"
  note "quantize $QT rc=$? in $(( $(date +%s) - t0 )) s: $(ls -la "$F" 2>&1)"
fi
[ -s "$F" ] || { note "no $F"; exit 1; }

# ember: a built binary, or the dev machine's (EMBER_PREBUILT=.devbin, as in scripts/gpu-check.sh)
EMBER=${EMBER:-build-gpu/bin/ember}
if [ ! -x "$EMBER" ] && [ -n "${EMBER_PREBUILT:-}" ] && [ -f "$EMBER_PREBUILT/bins.tar.xz" ]; then
  mkdir -p build-gpu/bin
  (xz -dc "$EMBER_PREBUILT/bins.tar.xz" 2>/dev/null ||
   python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.decompress(open(sys.argv[1],'rb').read()))" \
     "$EMBER_PREBUILT/bins.tar.xz") | tar -C build-gpu -xf -
  [ -f build-gpu/ember ] && mv build-gpu/ember build-gpu/bin/
  EMBER=build-gpu/bin/ember
fi
[ -n "${EMBER_PREBUILT:-}" ] && export LD_LIBRARY_PATH="$PWD/build-gpu/lib:$(cd "$EMBER_PREBUILT" && pwd):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"

# d. the same file in both engines
if has bench; then
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv > "$OUT/peer-gpu.log" 2>&1
  t0=$(date +%s)
  timeout 300 "$BIN/llama-batched-bench" -m "$F" -ngl 99 -fa 1 -npp 128 -ntg 128 -npl "$NPL" -c 20000 \
    > "$OUT/peer-batched.log" 2>&1
  note "llama-batched-bench rc=$? in $(( $(date +%s) - t0 )) s"
  { echo "llama.cpp $(head -1 "$LL/PEER-VERSION" 2>/dev/null | sed 's/.*llama.cpp //'), $(basename "$F"):"
    echo "llama-batched-bench -ngl 99 -fa 1 -npp 128 -ntg 128 -npl $NPL -c 20000"; echo
    grep -E '^\|' "$OUT/peer-batched.log"; } > "$OUT/peer-batched.md"
  if [ -x "$EMBER" ]; then
    t0=$(date +%s)
    timeout 300 "$EMBER" bench -m "$F" --device cuda --batch "$NPL" -n 128 -r 2 -c 512 \
      > "$OUT/ember-batched-gguf.md" 2> "$OUT/peer-ember.log"
    rc=$?; note "ember bench --batch rc=$rc in $(( $(date +%s) - t0 )) s"
    [ $rc -ne 0 ] && tail -5 "$OUT/peer-ember.log"
  else
    note "no ember binary at $EMBER (set EMBER or EMBER_PREBUILT): ember side skipped"
  fi
  if [ "${PEER_LLAMA_BENCH:-0}" = 1 ]; then
    timeout 300 "$BIN/llama-bench" -m "$F" -ngl 99 -fa 1 -p 512 -n 128 -r 3 > "$OUT/peer-bench.md" 2> "$OUT/peer-bench.log"
    note "llama-bench rc=$?"
    [ -x "$EMBER" ] && { timeout 300 "$EMBER" bench -m "$F" --device cuda -p 512 -n 128 -r 3 \
      > "$OUT/ember-bench-gguf.md" 2>> "$OUT/peer-ember.log"; note "ember bench rc=$?"; }
  fi
fi

# e. summary: aggregate decode tok/s per stream count (llama.cpp S_TG = B·TG / T_TG; ember: B·n / decode time)
python3 - "$OUT" "$(basename "$F")" > "$OUT/peer-summary.md" <<'PY'
import re, sys, os
out, fname = sys.argv[1], sys.argv[2]
def read(p):
    p = os.path.join(out, p)
    return open(p, errors="replace").read() if os.path.exists(p) else ""
peer = {}
hdr = None
for line in read("peer-batched.md").splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if "S_TG t/s" in cells:
        hdr = cells
    elif hdr and len(cells) == len(hdr) and cells[0].isdigit():
        r = dict(zip(hdr, cells))
        peer[int(r["B"])] = (float(r["S_TG t/s"]), float(r["S_PP t/s"]))
ember = {}
for m in re.finditer(r"batch (\d+): pp\d+ \+ tg\d+ \| ([\d.]+) ± ([\d.]+) aggregate", read("ember-batched-gguf.md")):
    ember[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
print(f"### batched decode, {fname}: 128-token prompts + 128 decode steps per stream, aggregate tok/s")
print()
print("| streams | llama.cpp S_TG | ember | ember / llama.cpp | llama.cpp S_PP (batched prefill) |")
print("|---|---|---|---|---|")
for b in sorted(set(peer) | set(ember)):
    p = peer.get(b); e = ember.get(b)
    ratio = f"{e[0] / p[0]:.2f}" if p and e and p[0] > 0 else "-"
    print(f"| {b} | {f'{p[0]:,.1f}' if p else '-'} | {f'{e[0]:,.1f} ± {e[1]:.1f}' if e else '-'} | {ratio} | "
          f"{f'{p[1]:,.1f}' if p else '-'} |")
if not peer and not ember:
    print("| (no results: see peer-*.log) | | | | |")
PY
note "total $(( $(date +%s) - t00 )) s"
cat "$OUT/peer-steps.log"
echo
cat "$OUT/peer-batched.md" 2>/dev/null; echo
cat "$OUT/ember-batched-gguf.md" 2>/dev/null; echo
[ -f "$OUT/peer-bench.md" ] && { cat "$OUT/peer-bench.md"; cat "$OUT/ember-bench-gguf.md" 2>/dev/null; echo; }
cat "$OUT/peer-summary.md"
