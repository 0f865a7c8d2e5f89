// Gated delta rule (Gated DeltaNet core, Qwen3.5 linear_attn; qwen35.md §2.6): gates, recurrent and chunked forms.
#pragma once
#include <cstdint>

namespace ember {

// Which key head a value head h reads when nv > nk (r = nv / nk):
//   GROUPED: h / r    (HF repeat_interleave, MLX)        TILED: h % nk   (GGUF files, V heads re-ordered)
enum class KeyHeadMap { GROUPED, TILED };

struct GdnShape {
    int64_t nk, nv;  // key heads, value heads (nv % nk == 0)
    int64_t dk, dv;  // key head dim, value head dim
    KeyHeadMap map = KeyHeadMap::GROUPED;
};

// Gates from the a/b projections (fp32):
//   g[t, h]    = −exp(A_log[h]) · softplus(a[t, h] + dt_bias[h])   softplus(x) = log1p(eˣ), = x for x > 20 (torch)
//   beta[t, h] = sigmoid(b[t, h])
//   a, b [T, nv]   A_log, dt_bias [nv]   g, beta [T, nv]
void gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t T, int64_t nv,
               float* g, float* beta);

// Gated delta rule over T tokens, per value head h with key head kh = map(h) (q, k already L2-normalised,
// q already scaled by dk^-0.5), state S_h ∈ R^{dk×dv}:
//   S ← exp(g_t)·S ;  u = Sᵀk_t ;  δ = β_t (v_t − u) ;  S ← S + k_t δᵀ ;  o_t = Sᵀq_t   (o reads the updated S)
//   q, k [T, nk, dk]   v [T, nv, dv]   g [T, nv] (log-decay, ≤ 0)   beta [T, nv]
//   S [nv, dk, dv] fp32 in/out (dv contiguous, HF layout)   o [T, nv, dv]
// Token-sequential; use for decode (T = 1). Parallel over value heads.
void gated_delta_rule_recurrent(const GdnShape& shape, int64_t T, const float* q, const float* k, const float* v,
                                const float* g, const float* beta, float* S, float* o);

// Same result through the chunked (WY / UT-transform) form, chunk size `chunk` (HF uses 64), for prefill.
// Per chunk of c ≤ chunk tokens, γ = within-chunk cumsum of g, D_ij = exp(γ_i − γ_j) for j ≤ i:
//   A = strict_lower(β_i k_i·k_j D_ij)    T = (I + A)⁻¹
//   U = T(β ⊙ V)    W = T(β ⊙ e^γ ⊙ K)    U' = U − W S
//   O = (e^γ ⊙ Q) S + lower(Q Kᵀ ⊙ D) U'    S ← e^{γ_last} S + (e^{γ_last − γ} ⊙ K)ᵀ U'
// Exact (up to fp32 round-off) for any T (ragged last chunk, no padding) and any incoming S. The chunk size only
// changes round-off: on an AVX2 CPU, dk = dv = 128, chunk = 16 is ~20% faster than 64 (fewer c²-sized terms).
void gated_delta_rule_chunked(const GdnShape& shape, int64_t T, const float* q, const float* k, const float* v,
                              const float* g, const float* beta, float* S, float* o, int64_t chunk = 64);

// Reference: the recurrent rule in plain loops, state and sums in fp64 (gated_delta_rule_ref.cpp).
void gated_delta_rule_ref(const GdnShape& shape, int64_t T, const float* q, const float* k, const float* v,
                          const float* g, const float* beta, float* S, float* o);

// Reference gates in fp64 (same contract as gdn_gates).
void gdn_gates_ref(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t T, int64_t nv,
                   float* g, float* beta);

}  // namespace ember
