// ops/attention/attention_prefill.h: the n > 1 attention of gated_attention_core (spec of the whole op:
// attention_cuda.h) on tensor cores, flash-attention style. Internal to ops/attention (attention.cu calls it
// after the q/k prologue; the tests and the benchmark call the pieces).
//
// After the prologue (q normed + roped → workspace [n, H, D] fp32; k/v appended to the cache, fp32 or bf16):
//   1. convert: cache rows [0, pos0 + n) of every kv head → bf16 hi + lo with x = hi + lo + δ, |δ| ≤ 2⁻¹⁶|x|
//      (bf16 mode: hi only), into the workspace as kv16 [2 (K, V)][G][capacity][P][D], P = 2 (hi, lo) or 1.
//      A bf16 cache has lo = 0; in bf16 mode (P = 1) a contiguous one is read in place (no convert). A paged
//      cache (`pages`, attention_cuda.h) is gathered page by page into kv16.
//   2. flash: block = (key split, kv head g [· head sub-group], query tile), W = 4 warps of 16 rows (W = 8 is
//      built for d = 128 / 256 and measured slower); the block's 16·W rows are (token, head) pairs of one kv head,
//      token-major (row m = token t0 + m / RB, head g·R + m % RB), so all query heads of a kv head share every
//      K/V tile read. Per tile of BN keys (16 for d = 256, else 64): S = Q·Kᵀ and O += P·V by mma.sync
//      m16n8k16 (bf16 in, fp32 accumulation) as the three products hi·hi + lo·hi + hi·lo (one hi·hi in bf16
//      mode; S keeps the three in separate accumulators), the online softmax in base 2 in registers (P goes
//      from the S accumulators straight into A fragments). K and V tiles come by cp.async into single buffers:
//      the next K tile loads during softmax + P·V, the next V tile during the next Q·Kᵀ. Query tiles with the
//      longest causal ranges are launched first. d = 256: O is 128 registers per thread, the kernel ~255.
//   3. combine (only query tiles with more than one live split): out = Σ_s w_s·acc_s / Σ_s w_s·l_s ·
//      σ(gate), w_s = 2^(m_s − max m). One live split writes out (with the gate) directly from step 2.
// Splits: the host knows n but not pos0 (device memory), so it launches `splits` (prefill_plan: enough blocks
// for two waves, at most 16, a pure function of dims and n) and every block derives its key range from the live
// length T = pos0 + (last token of its tile) + 1: chunk = max(128, ⌈T / splits⌉ rounded up to 64); splits past T
// exit at once.
// Numerics (fp32-faithful mode): each product carries a relative error ≤ 3·2⁻¹⁶ (the split errors and the
// dropped lo·lo term), summed in fp32; the probabilities P are split the same way.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ops/attention/attention_cuda.h"

namespace ember::cuda::detail {

struct PrefillPlan {
    int heads = 0;        // query heads per block (RB)
    int tokens = 0;       // tokens per query tile (TB = 64 / RB)
    int n_sub = 0;        // head sub-groups per kv head (⌈R / RB⌉; 1 unless R > 64)
    int64_t n_tiles = 0;  // query tiles (⌈n / TB⌉)
    int splits = 0;       // key splits launched
    int key_tile = 0;     // BN
    int warps = 0;        // W: 4, or 8 (d = 128, 256); rows per block 16·W
};
// warps = 0: the rule (default_warps in attention_prefill.cu); 4 or 8 forces it (the benchmark compares them).
PrefillPlan prefill_plan(const GatedAttentionDims& d, int64_t n, int warps = 0);

// Workspace of steps 1-3 for n tokens: kv16 + the split partials (acc [splits, n, H, D], (m, l) [splits, n, H, 2]),
// enough for either block size.
size_t prefill_workspace_bytes(const GatedAttentionDims& d, int64_t n);

enum PrefillStage : unsigned { PREFILL_CONVERT = 1, PREFILL_FLASH = 2, PREFILL_COMBINE = 4, PREFILL_ALL = 7 };

// Steps 1-3 (those in `stages`; the benchmark times them one by one). q_ws [n, H, D] from the prologue; gate = qg
// [n, H, 2, D] or nullptr (ungated); ws ≥ prefill_workspace_bytes(d, n), 16-byte aligned.
void attention_prefill(const GatedAttentionDims& d, const float* q_ws, const float* gate, const void* K_cache,
                       const void* V_cache, const int32_t* pos0_dev, int64_t n, float* out, void* ws,
                       cudaStream_t st, unsigned stages = PREFILL_ALL, int warps = 0, const int32_t* pages = nullptr);

// The previous n > 1 path (one key split per token on the CUDA cores), kept for A/B benchmarks; same contract as
// gated_attention_core.
void gated_attention_core_per_token(const GatedAttentionDims& d, const float* qg, const float* k, const float* v,
                                    const float* q_norm, const float* k_norm, void* K_cache, void* V_cache,
                                    const int32_t* pos0_dev, int64_t n, float* out, void* workspace,
                                    size_t workspace_bytes, cudaStream_t stream);

// Where gated_attention_core keeps q [n, H, D] and the prefill workspace inside its workspace (for the benchmark's
// per-stage timing).
const float* prefill_q(const GatedAttentionDims& d, int64_t n, const void* workspace);
void* prefill_workspace(const GatedAttentionDims& d, int64_t n, void* workspace);

}  // namespace ember::cuda::detail
