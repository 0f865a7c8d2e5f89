// Standard causal self-attention of the Llama family (Llama 2/3, SmolLM2, Qwen3): q/k/v projections (optional
// biases), optional per-head q/k RMSNorm (Qwen3), RoPE (NeoX or interleaved pairs, optional frequency factors),
// GQA over a KV cache, o_proj. No output gate (that is Qwen3.5's layers/gated_attention.h).
//   q = x·Wqᵀ (+bq) [n, H, d];  k, v = x·Wkᵀ, x·Wvᵀ [n, G, d];  q, k ← RMSNorm_d (if present);  q, k ← RoPE(pos)
//   o = softmax(q·Kᵀ·d^-½ + causal mask)·V  (kv head g = h / (H/G));  out = o·Woᵀ
#pragma once
#include <cstdint>
#include <vector>

#include "layers/gated_attention.h"  // KVCache
#include "ops/linear/weight.h"
#include "ops/rope/rope.h"

namespace ember {

struct AttentionWeights {
    Weight q_proj, k_proj, v_proj;      // [H·d, hidden], [G·d, hidden], [G·d, hidden]
    Weight o_proj;                      // [hidden, H·d]
    std::vector<float> q_bias, k_bias, v_bias;  // empty or [H·d] / [G·d]
    std::vector<float> q_norm, k_norm;  // empty or [d]
};

struct StdAttentionShape {
    int64_t hidden = 0, n_heads = 0, n_kv = 0, head_dim = 0, rot_dim = 0;
    float rope_theta = 10000.f, eps = 1e-6f;
    RopeStyle rope_style = RopeStyle::NEOX;
    std::vector<float> freq_factors;    // empty or [rot_dim / 2]
    float score_mul = 1.f;              // scores are q·k·d^-½·score_mul (YaRN: mscale², ops/rope/rope_scaling.h)
};


// The layer, for x [n, hidden] (the normed layer input), in three steps so that the rows of several sequences share
// the projections (models/decoder.cpp): attention_in over every row (projections + biases), attention_core per
// sequence, then out = o·Woᵀ over every row.
struct AttentionRows {
    std::vector<float> q, k, v;  // [n, H, d], [n, G, d], [n, G, d]
};
void attention_in(const AttentionWeights& w, const StdAttentionShape& s, const float* x, int64_t n, AttentionRows& p);
// Rows [r0, r0 + m) of p: one sequence's tokens at positions pos0 .. pos0+m−1 (appended to its cache) → the
// attention output rows [r0, r0 + m) of o [·, H·d].
void attention_core(const AttentionWeights& w, const StdAttentionShape& s, KVCache& cache, int64_t pos0,
                    const AttentionRows& p, int64_t r0, int64_t m, float* o);

}  // namespace ember
