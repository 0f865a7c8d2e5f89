// Gated DeltaNet mixer (Qwen3.5 linear_attn, qwen35.md §2.6): in_proj_qkv → causal conv + SiLU → L2-normed
// q, k → gated delta rule on the fp32 state → per-head gated RMSNorm with silu(z) → out_proj.
#pragma once
#include <cstdint>
#include <vector>

#include "ops/gated_delta_rule/gated_delta_rule.h"
#include "ops/linear/weight.h"

namespace ember {

struct GatedDeltaNetWeights {
    Weight in_proj_qkv;          // [2*nk*dk + nv*dv, hidden]   rows: q | k | v
    Weight in_proj_z;            // [nv*dv, hidden]
    Weight in_proj_b;            // [nv, hidden]   → β = σ(b)
    Weight in_proj_a;            // [nv, hidden]   → g = −exp(A_log)·softplus(a + dt_bias)
    Weight out_proj;             // [hidden, nv*dv]
    std::vector<float> conv;     // [conv_dim, K]  (w[c, K−1] multiplies the current token)
    std::vector<float> A_log;    // [nv] fp32
    std::vector<float> dt_bias;  // [nv]
    std::vector<float> norm;     // [dv]  plain weight (not 1+w)
};

struct DeltaNetShape {
    int64_t hidden, conv_kernel;
    GdnShape heads;  // nk, nv, dk, dv, key-head map
    float eps;
    int64_t conv_dim() const { return 2 * heads.nk * heads.dk + heads.nv * heads.dv; }
};

// Recurrent state of one GDN layer for one sequence.
struct DeltaNetState {
    std::vector<float> conv;  // [K−1, conv_dim]  last pre-conv inputs, oldest first
    std::vector<float> S;     // [nv, dk, dv] fp32
    void init(const DeltaNetShape& s);
    int64_t bytes() const { return static_cast<int64_t>((conv.size() + S.size()) * sizeof(float)); }
};


// The layer, for x [n, hidden] (the normed layer input), in three steps so that the rows of several sequences share
// the projections (models/decoder.cpp): gated_delta_net_in over every row, gated_delta_net_core per sequence (its
// state advances by its rows), then out = y·W_outᵀ over every row.
struct DeltaNetRows {
    std::vector<float> qkv, z, b, a;  // [n, conv_dim] (before the conv), [n, nv·dv], [n, nv], [n, nv]
};
void gated_delta_net_in(const GatedDeltaNetWeights& w, const DeltaNetShape& s, const float* x, int64_t n,
                        DeltaNetRows& p);
// Rows [r0, r0 + m) of p: one sequence's next m tokens (its state advances by m) → the gated-normed output rows
// [r0, r0 + m) of y [·, nv·dv].
void gated_delta_net_core(const GatedDeltaNetWeights& w, const DeltaNetShape& s, DeltaNetState& st,
                          const DeltaNetRows& p, int64_t r0, int64_t m, float* y);

}  // namespace ember
