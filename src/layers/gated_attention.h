// Gated full attention (Qwen3.5 self_attn, qwen35.md §2.4): q/gate interleaved per head, q/k RMSNorm,
// partial NeoX RoPE, GQA over a KV cache, sigmoid output gate, o_proj.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/linear/weight.h"

namespace ember {

struct GatedAttentionWeights {
    Weight q_proj;               // [n_heads * 2 * head_dim, hidden]  per head: [query(head_dim) | gate(head_dim)]
    Weight k_proj, v_proj;       // [n_kv * head_dim, hidden]
    Weight o_proj;               // [hidden, n_heads * head_dim]
    std::vector<float> q_norm;   // [head_dim]  (1 + w) already folded in
    std::vector<float> k_norm;   // [head_dim]
};

struct AttentionShape {
    int64_t hidden, n_heads, n_kv, head_dim, rot_dim;
    float rope_theta, eps;
};

// K and V for one attention layer: [n_kv, capacity, head_dim] fp32 each; grows by doubling.
struct KVCache {
    int64_t n_kv = 0, head_dim = 0, capacity = 0;
    std::vector<float> k, v;
    void ensure(int64_t n_tokens);  // capacity ≥ n_tokens, keeping the contents
    // Stores k, v [n, n_kv, head_dim] as the rows of positions pos0 .. pos0+n−1 (growing as needed).
    void append(const float* k, const float* v, int64_t pos0, int64_t n);
    int64_t bytes() const { return static_cast<int64_t>((k.size() + v.size()) * sizeof(float)); }
};


// The layer, for x [n, hidden] (the normed layer input), in three steps so that the rows of several sequences share
// the projections (models/decoder.cpp): gated_attention_in over every row, gated_attention_core per sequence (its
// rows, its cache, its positions), then out = o·Woᵀ over every row. Each step treats a row alone, so a row's result does not depend on the others.
struct GatedAttentionRows {
    std::vector<float> qg, k, v;  // [n, H, 2d] (per head: query | gate), [n, G, d], [n, G, d]
};
void gated_attention_in(const GatedAttentionWeights& w, const AttentionShape& s, const float* x, int64_t n,
                        GatedAttentionRows& p);
// Rows [r0, r0 + m) of p: one sequence's tokens at positions pos0 .. pos0+m−1 (appended to its cache) → the gated
// attention output rows [r0, r0 + m) of o [·, H·d].
void gated_attention_core(const GatedAttentionWeights& w, const AttentionShape& s, KVCache& cache, int64_t pos0,
                          const GatedAttentionRows& p, int64_t r0, int64_t m, float* o);

}  // namespace ember
