#!/usr/bin/env bash
# gpu-batch-status.sh OUT — the batched engine's standing on the GPU machine, in stages that fit one or two device
# calls (each under 600 s), on prebuilt binaries (scripts/gpu-pack.sh; carry .devbin, and .devpack for the peer):
#   peerbg   llama.cpp build + the random-weight 2B GGUF (scripts/gpu-peer.sh steps build model quant), niced, in
#            the background while the next stages run (they compare variants within one run, so CPU load from the
#            build shifts both sides alike; the status stage should run without it)
#   tests    test_cuda --gtest_filter=$STATUS_TESTS (default BatchCuda.*)
#   bug9b    the bug of BatchCuda.Synthetic9BTwentySequencesEqualAlone (a race in the GEMM's slot release, mended
#            2026-12-07), kept as a regression stage: the GEMM's own plans on the model
#            shapes against fp64 (GemmQCuda.RuleChoiceOnModelShapes*, K splits of every tile), then the test by
#            default, with one GEMM tile and no K split (EMBER_GEMM_PLAN=0:1) and with the tiled head at every row
#            count (EMBER_HEAD_UNTILED_ROWS=1000); BUG9B_VARIANTS picks among them
#   ab       9B synthetic (TILED untied head) at 2 and 8 streams: the untiled head copy from 2 rows (default) vs
#            EMBER_HEAD_UNTILED_ROWS=9 (the tiled head, one stream-kernel pass per row, as before), 2 rounds
#   ab2      2B at 8 streams: the GDN rows kernel by the rule (slice below 9 rows) vs EMBER_GDN_ROWS=head
#   profile  one 2B step's GPU time by kernel at 8 and 64 streams (ember bench --profile; PROFILE_BATCHES), and
#            with PROFILE_FUSE=1 also at the first of them with EMBER_FUSE_ROWS=8 (profile-fuse8-B.md)
#   peer     waits for peerbg, then llama-batched-bench and ember on the same GGUF (gpu-peer.sh step bench), and
#            ember on that file with EMBER_HEAD_UNTILED_ROWS=2 (its Q6_K head through the block GEMV at 2-8 rows)
#   status   ember bench --synthetic $STATUS_MODELS (default qwen3.5-2b,qwen3.5-9b) --batch $STATUS_BATCH (1,8,32,64)
#            -n $STATUS_N (default 128) -r 2 -c 512
#   pd       persistent decode (EMBER_DECODE=persistent, its GEMV ring released after a proxy fence since
#            2026-12-07) vs the graph, synthetic 2B, one stream, 2 rounds
#   q6k      on the 2B Q4_0 mix (Q4_0 layers, Q6_K head; --synthetic qwen3.5-2b:q4_0, or with Q6K_SRC=peer peerbg's
#            GGUF, waiting for it): the head at 2-8 rows with up to 4 rows per
#            stream-kernel pass (EMBER_STREAM_ROWS=1) vs one pass per row (EMBER_STREAM_ROWS=0), 2 rounds
#   q6k16    the same model at 16-32 rows: the tiled head in 4-row passes (default) vs the untiled copy's split
#            GEMM (EMBER_HEAD_UNTILED_ROWS=9), 1 round
#   gemm8    2B synthetic at 4 and 8 streams: the rule (gemm_small_rows: the GEMVs for the 2B) vs the tensor-core
#            GEMM from 5 rows for every matrix (EMBER_GEMM_FROM_ROWS=5), 2 rounds
#   pairs    2B synthetic at 1 and 8 streams: SwiGLU pairs (the [gate|up] GEMV stores silu(g)·u; default) vs
#            EMBER_SWIGLU_PAIRS=0 (the GEMV, then the SwiGLU kernel or the down GEMV's SwiGLU prologue), 2 rounds
#   normpost 2B synthetic at 1, 2 and 8 streams: the RMSNorm factor applied to the sums (default) vs
#            EMBER_NORM_POST=0 (a norm pass before staging) vs EMBER_FUSE_ROWS=8, 2 rounds
#   fuse5t   the batched-engine tests (BatchCuda, BatchSampleCuda, EngineCuda) with EMBER_FUSE_ROWS=5 (the default since 12-07): fused steps of
#            3-5 rows against the sequences decoded alone (before making 5 the default: 1-3 % faster, 12-07 H100)
#   mixed    2B synthetic engine (--engine 8,32, 500-token prompts, 128 generated): mixed prefill/decode rounds
#            (EMBER_MIXED_STEP=1) vs rounds apart (0, the default), 2 rounds
#   fuse8    2B synthetic at 4 and 8 streams: the rule (fused norms / SwiGLU up to 5 rows) vs EMBER_FUSE_ROWS=8, 2 rounds
#   p27      prefill of the synthetic 27B (issue 18's pp512 target), ember bench -p 512 -n 0 -r 2
#   baseab   2B synthetic at $BASEAB_BATCH (1,8) streams: ember_base (scripts/gpu-pack.sh EMBER_BASE) vs this ember, and this one
#            with EMBER_FUSE_ROWS=8, 2 rounds
#            (and ember_var, VARIANT_DIR)
#   gemvab   gemv_bench --quick from gemv_bench_base (GEMV_BASE), this binary and gemv_bench_var, alternating, 2 rounds
#   sass     cuobjdump -sass of the q kernel (4-bit g64 bf16, G = 1 and 4) from gemv_bench, into OUT/sass-*.txt
#   gemv     gemv_bench --quick (the 2B shapes at 1-8 rows: q and mma kernels, µs and % of copy bandwidth)
#   ncu      Nsight Compute on the q-kernel GEMV inside a 2B decode step at 8 rows and at 1 row
# STATUS_STAGES picks them (default "peerbg tests ab profile peer"; "report" only prints the table of what OUT
# holds); logs under OUT, a short table last.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/ember-status}
mkdir -p "$OUT"
if [ ! -x build-gpu/bin/ember ] && [ -f .devbin/bins.tar.xz ]; then
  mkdir -p build-gpu && xz -dc .devbin/bins.tar.xz | tar -C build-gpu -xf -
fi
export LD_LIBRARY_PATH="$PWD/build-gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
E=build-gpu/bin/ember
STAGES=" ${STATUS_STAGES:-peerbg tests ab profile peer} "
has() { [[ "$STAGES" == *" $1 "* ]]; }
note() { echo "[status $(date +%H:%M:%S)] $*" | tee -a "$OUT/status.log"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv,noheader > "$OUT/gpu.txt" 2>&1
note "GPU: $(cat "$OUT/gpu.txt"); binaries $(cat .devbin/COMMIT 2>/dev/null)"

peer_pid=
if has peerbg; then
  PEER_STEPS="build model quant" nice -n 10 bash scripts/gpu-peer.sh "$OUT/peer" > "$OUT/peerbg.log" 2>&1 &
  peer_pid=$!
  note "peer build + model in the background"
fi

if has tests; then
  timeout 420 build-gpu/test_cuda --gtest_filter="${STATUS_TESTS:-BatchCuda.*}" > "$OUT/tests.log" 2>&1
  note "tests rc=$? ($(grep -cE '^\[       OK' "$OUT/tests.log") ok, $(grep -cE '^\[  FAILED  \] [A-Z]' "$OUT/tests.log") failed)"
fi

if has fuse5t; then
  EMBER_FUSE_ROWS=5 timeout 300 build-gpu/test_cuda --gtest_filter='BatchCuda.*:BatchSampleCuda.*:EngineCuda.*' \
    > "$OUT/fuse5-tests.log" 2>&1
  note "fuse5 tests rc=$? ($(grep -cE '^\[       OK' "$OUT/fuse5-tests.log") ok, $(grep -cE '^\[  FAILED  \] [A-Z]' "$OUT/fuse5-tests.log") failed)"
fi

if has bug9b; then
  timeout 150 build-gpu/test_cuda --gtest_filter='GemmQCuda.RuleChoiceOnModelShapes*:GemmQCuda.KSplits*' \
    > "$OUT/bug9b-gemm.log" 2>&1
  note "bug9b gemm plans rc=$? ($(grep -c 'Failure' "$OUT/bug9b-gemm.log") failures)"
  for v in ${BUG9B_VARIANTS:-default EMBER_GEMM_PLAN=0:1 EMBER_HEAD_UNTILED_ROWS=1000}; do
    env $([ $v = default ] || echo $v) timeout 110 build-gpu/test_cuda \
      --gtest_filter='BatchCuda.Synthetic9B*' > "$OUT/bug9b-$v.log" 2>&1
    note "bug9b $v rc=$? ($(grep -c 'Failure' "$OUT/bug9b-$v.log") failures)"
  done
fi

# ab_stage NAME SECONDS ROUNDS "BENCH ARGS" "label|bin|ENV" ... : scripts/gpu-ab.sh into OUT/NAME, table in OUT/NAME.txt
ab_stage() {
  local name=$1 secs=$2 rounds=$3 args=$4
  shift 4
  timeout "$secs" bash scripts/gpu-ab.sh "$OUT/$name" "$rounds" "$args" "$@" > "$OUT/$name.txt" 2>&1
  note "$name rc=$?"
}
# The peer's GGUF (Q4_0 layers, Q6_K head), once peerbg has made it.
gguf() {
  [ -n "$peer_pid" ] && { wait "$peer_pid"; note "peer background rc=$?"; peer_pid=; }
  [ -s /tmp/q35-2b-q4_0.gguf ] || { note "no GGUF at /tmp/q35-2b-q4_0.gguf"; return 1; }
}
S2B="--synthetic qwen3.5-2b --device cuda"
# The Q4_0 mix with its Q6_K head: the synthetic one (default) or, Q6K_SRC=peer, peerbg's GGUF.
q6k_model() {
  if [ "${Q6K_SRC:-synthetic}" = peer ]; then gguf && G2B="-m /tmp/q35-2b-q4_0.gguf --device cuda"
  else G2B="--synthetic qwen3.5-2b:q4_0 --device cuda"; fi
}

has ab && ab_stage ab 400 2 "--synthetic qwen3.5-9b --device cuda --batch 2,8 -n 32 -r 2 -c 512" \
  "untiled|$E|" "tiled|$E|EMBER_HEAD_UNTILED_ROWS=9"
has ab2 && ab_stage ab2 300 2 "$S2B --batch 8 -n 64 -r 2 -c 512" "default|$E|" "gdnhead|$E|EMBER_GDN_ROWS=head"
has pd && ab_stage pd 200 2 "$S2B -n 128 -r 2 -c 512" "graph|$E|EMBER_DECODE=graph" \
  "persistent|$E|EMBER_DECODE=persistent"
has pairs && ab_stage pairs 240 2 "$S2B --batch 1,8 -n 64 -r 2 -c 512" "pairs|$E|" "nopairs|$E|EMBER_SWIGLU_PAIRS=0"
has normpost && ab_stage normpost 300 2 "$S2B --batch 1,2,8 -n 64 -r 2 -c 512" "post|$E|" \
  "nopost|$E|EMBER_NORM_POST=0" "fuse8|$E|EMBER_FUSE_ROWS=8"
has mixed && ab_stage mixed 420 2 "$S2B --engine 8,32 --batch-prompt 500 -n 128 -r 1 -c 1024" \
  "mixed|$E|EMBER_MIXED_STEP=1" "apart|$E|EMBER_MIXED_STEP=0"
has baseab && [ -x build-gpu/ember_base ] && ab_stage baseab 420 2 "$S2B --batch ${BASEAB_BATCH:-1,8} -n 64 -r 2 -c 512" \
  "base|build-gpu/ember_base|" "new|$E|" "newfuse8|$E|EMBER_FUSE_ROWS=8" \
  $([ -x build-gpu/ember_var ] && echo "var|build-gpu/ember_var|")
has fuse8 && ab_stage fuse8 240 2 "$S2B --batch 4,8 -n 64 -r 2 -c 512" "rule|$E|" "fuse8|$E|EMBER_FUSE_ROWS=8"
has gemm8 && ab_stage gemm8 240 2 "$S2B --batch 4,8 -n 64 -r 2 -c 512" "rule|$E|" "gemm5|$E|EMBER_GEMM_FROM_ROWS=5"
has q6k && q6k_model && ab_stage q6k 240 2 "$G2B --batch ${Q6K_BATCH:-2,8} -n 64 -r 2 -c 512" "x4|$E|EMBER_STREAM_ROWS=1" \
  "pertoken|$E|EMBER_STREAM_ROWS=0"
has q6k16 && q6k_model && ab_stage q6k16 200 1 "$G2B --batch 16,32 -n 64 -r 2 -c 512" "tiledx4|$E|" \
  "splitgemm|$E|EMBER_HEAD_UNTILED_ROWS=9"

if has profile; then
  for b in ${PROFILE_BATCHES:-8 64}; do
    timeout 200 "$E" bench --synthetic qwen3.5-2b --device cuda --batch $b -n 32 -c 512 --profile \
      > "$OUT/profile-$b.md" 2> "$OUT/profile-$b.err"
    note "profile batch $b rc=$?"
  done
  if [ -n "${PROFILE_FUSE:-}" ]; then
    b=$(echo ${PROFILE_BATCHES:-8} | cut -d' ' -f1)
    EMBER_FUSE_ROWS=8 timeout 200 "$E" bench --synthetic qwen3.5-2b --device cuda --batch $b -n 32 -c 512 --profile \
      > "$OUT/profile-fuse8-$b.md" 2> "$OUT/profile-fuse8-$b.err"
    note "profile fuse8 batch $b rc=$?"
  fi
fi

if has p27; then
  timeout 400 "$E" bench --synthetic qwen3.5-27b --device cuda -p 512 -n 0 -r 2 -c 1024 > "$OUT/p27.md" 2> "$OUT/p27.err"
  note "p27 rc=$?"
fi

if has peer; then
  [ -n "$peer_pid" ] && { wait "$peer_pid"; note "peer background rc=$?"; }
  EMBER=$E PEER_STEPS=bench timeout 400 bash scripts/gpu-peer.sh "$OUT/peer" > "$OUT/peer.txt" 2>&1
  note "peer bench rc=$?"
  F=/tmp/q35-2b-q4_0.gguf
  [ -s "$F" ] && { EMBER_HEAD_UNTILED_ROWS=2 timeout 200 "$E" bench -m "$F" --device cuda --batch 1,8 -n 128 -r 2 \
    -c 512 > "$OUT/peer-ember-head2.md" 2>> "$OUT/peer-ember-head2.err"; note "ember GGUF head rows 2 rc=$?"; }
fi

if has status; then
  timeout 500 "$E" bench --synthetic ${STATUS_MODELS:-qwen3.5-2b,qwen3.5-9b} --device cuda --batch ${STATUS_BATCH:-1,8,32,64} \
    -n ${STATUS_N:-128} -r 2 -c 512 \
    > "$OUT/status.md" 2> "$OUT/status.err"
  note "status rc=$?"
fi

if has gemvab && [ -x build-gpu/gemv_bench_base ]; then  # the same quick table from the baseline and this binary, twice
  for r in 1 2; do
    for b in gemv_bench_base gemv_bench $([ -x build-gpu/gemv_bench_var ] && echo gemv_bench_var); do
      timeout 150 build-gpu/$b --quick --no-ggml --no-prefill --no-tiled > "$OUT/gemvab-$b-$r.md" 2>&1
      note "gemvab $b round $r rc=$?"
    done
  done
fi

if has sass; then  # the SASS of the q kernel's 8- and 1-row instances (4-bit g64 bf16): where its spills are
  OBJ=$(command -v cuobjdump || ls /usr/local/cuda/bin/cuobjdump 2>/dev/null | head -1)
  for gg in 1 4; do
    "$OBJ" -sass build-gpu/gemv_bench 2>/dev/null | awk -v pat="gemv_q_kernelILi4ELi64ELi${gg}E13__nv_bfloat16" \
      '/Function : /{f = index($0, pat) > 0} f' > "$OUT/sass-q4g64-G$gg.txt"
    note "sass G=$gg: $(wc -l < "$OUT/sass-q4g64-G$gg.txt") lines, $(grep -c 'LDL' "$OUT/sass-q4g64-G$gg.txt") LDL, $(grep -c 'STL' "$OUT/sass-q4g64-G$gg.txt") STL"
  done
fi

if has gemv; then
  timeout 200 build-gpu/gemv_bench --quick --no-ggml --no-prefill --no-tiled > "$OUT/gemv.md" 2>&1
  note "gemv_bench rc=$?"
fi

if has ncu; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  for b in 8 1; do
    timeout 240 "$NCU" --clock-control none -k regex:gemv_q_kernel --launch-skip ${NCU_SKIP:-300} --launch-count 4 \
      --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
      --section Occupancy --section LaunchStats \
      "$E" bench --synthetic qwen3.5-2b --device cuda --batch $b -n 8 -r 1 -c 512 > "$OUT/ncu-$b.txt" 2>&1
    note "ncu batch $b rc=$?"
  done
fi

# ---- short table last ----
echo
cat "$OUT/status.log"
[ -f "$OUT/tests.log" ] && grep -E "worst rel|^\[  FAILED|^\[  PASSED" "$OUT/tests.log" | tail -40
for f in "$OUT"/bug9b-*.log; do
  [ -f "$f" ] && { echo "== $(basename "$f")"; grep -E 'worst|among|y\[|n=.*gemm|FAILED  \]' "$f" | head -12; }
done
for f in ab ab2 pd pairs normpost mixed baseab fuse8 gemm8 q6k q6k16; do [ -f "$OUT/$f.txt" ] && cat "$OUT/$f.txt"; done
for b in 8 64; do
  [ -f "$OUT/profile-$b.md" ] && { echo "== profile $b"; grep -E '^\|' "$OUT/profile-$b.md" | head -24; }
  [ -f "$OUT/profile-fuse8-$b.md" ] && { echo "== profile fuse8 $b"; grep -E '^\|' "$OUT/profile-fuse8-$b.md" | head -24; }
done
[ -f "$OUT/p27.md" ] && grep -E '^\|' "$OUT/p27.md"
[ -f "$OUT/peer/peer-summary.md" ] && cat "$OUT/peer/peer-summary.md"
[ -f "$OUT/peer-ember-head2.md" ] && grep -E '^\|' "$OUT/peer-ember-head2.md"
[ -f "$OUT/status.md" ] && grep -E '^\|' "$OUT/status.md"
for f in "$OUT"/gemvab-*.md; do [ -f "$f" ] && { echo "== $(basename "$f")"; grep -E '^\|' "$f" | head -40; }; done
[ -f "$OUT/gemv.md" ] && grep -E '^\|' "$OUT/gemv.md" | head -60
for b in 8 1; do
  [ -f "$OUT/ncu-$b.txt" ] && { echo "== ncu $b"; grep -E "gemv_q_kernel|Duration|DRAM Throughput|Issue Slots Busy|No Eligible|Active Warps Per|Registers Per|Executed Ipc A|Stall" "$OUT/ncu-$b.txt" | head -40; }
done
exit 0
