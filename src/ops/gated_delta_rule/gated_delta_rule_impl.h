// Internal to ops/gated_delta_rule: the chunked (WY) form for one value head, written once and compiled into both
// the portable and the AVX2 translation units (each includes this header and supplies its own GEMM and exp).
// Everything here has internal linkage and uses no library templates, so the two ISA builds cannot be mixed up
// by the linker.
#pragma once
#include <cmath>
#include <cstdint>

#include "ops/gated_delta_rule/gated_delta_rule.h"

namespace ember::gdn {
namespace {

inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

// Scratch for one chunk of ≤ C tokens, carved from one float buffer (chunk_scratch_floats) and one double buffer
// (C doubles).
inline int64_t chunk_scratch_floats(int64_t C, int64_t dk, int64_t dv) {
    return dk * C + 3 * C * C + 2 * C * dv + 3 * C;
}

// Ops: static gemm(...) with the Kernels::gemm contract, and static exp_nonpos(const float* x, float* y, n)
// computing y = exp(x) for x ≤ 0.
//
// All chunks of value head h (formulas in gated_delta_rule.h). Sh [dk, dv] in/out; o [T, nv, dv].
template <class Ops>
void chunked_head(const GdnShape& s, int64_t h, int64_t kh, int64_t T, const float* q, const float* k,
                  const float* v, const float* g, const float* beta, float* Sh, float* o, int64_t C, float* scratch,
                  double* gam) {
    const int64_t dk = s.dk, dv = s.dv, ldqk = s.nk * dk, ldo = s.nv * dv;
    for (int64_t t0 = 0; t0 < T; t0 += C) {
        const int64_t c = imin(C, T - t0);
        float* Kt = scratch;           // [dk, c]  K̂ᵀ, later (e^{γ_last − γ} ⊙ K̂)ᵀ
        float* G = Kt + dk * C;        // [c, c]   K̂K̂ᵀ, then −A (strict lower)
        float* P = G + C * C;          // [c, c]   Q̂K̂ᵀ, then P = lower(Q̂K̂ᵀ ⊙ D)
        float* Tinv = P + C * C;       // [c, c]   (I + A)⁻¹: unit lower triangular, zeros above
        float* R = Tinv + C * C;       // [c, dv]  K̂S, then β ⊙ (V − e^γ ⊙ K̂S)
        float* U = R + C * dv;         // [c, dv]  U' = Tinv R
        float* eg = U + C * dv;        // [c] e^γ
        float* bt = eg + C;            // [c] β
        float* tmp = bt + C;           // [c] exponents / exps of one row
        const float* Q = q + (t0 * s.nk + kh) * dk;  // rows of q̂ / k̂ for this chunk and key head, stride ldqk
        const float* K = k + (t0 * s.nk + kh) * dk;

        // γ = within-chunk cumsum of g in fp64, so that γ_i − γ_j keeps its digits even after a large early g
        // (an fp32 cumsum would lose ~|γ|·ε to cancellation). Every exponent below is ≤ 0.
        double acc = 0.0;
        for (int64_t i = 0; i < c; ++i) {
            acc += g[(t0 + i) * s.nv + h];
            gam[i] = acc;
            tmp[i] = static_cast<float>(acc);
            bt[i] = beta[(t0 + i) * s.nv + h];
        }
        Ops::exp_nonpos(tmp, eg, c);
        for (int64_t i0 = 0; i0 < c; i0 += 8)  // transpose in 8 × 8 tiles
            for (int64_t p0 = 0; p0 < dk; p0 += 8)
                for (int64_t i = i0; i < imin(i0 + 8, c); ++i)
                    for (int64_t p = p0; p < imin(p0 + 8, dk); ++p) Kt[p * c + i] = K[i * ldqk + p];

        // Gram matrices, lower triangles only: P ← Q̂K̂ᵀ, G ← K̂K̂ᵀ.
        Ops::gemm(c, c, dk, Q, ldqk, Kt, c, P, c, 0.0f, false, true);
        Ops::gemm(c, c, dk, K, ldqk, Kt, c, G, c, 0.0f, false, true);
        // D_ij = exp(γ_i − γ_j) ≤ 1 (j < i).  P_ij = (q̂_i·k̂_j) D_ij (D_ii = 1),
        // G_ij = −A_ij = −β_i (k̂_i·k̂_j) D_ij.
        for (int64_t i = 0; i < c; ++i) {
            float* Pi = P + i * c;
            float* Gi = G + i * c;
            for (int64_t j = 0; j < i; ++j) tmp[j] = static_cast<float>(gam[i] - gam[j]);
            Ops::exp_nonpos(tmp, tmp, i);
            const float nb = -bt[i];
            for (int64_t j = 0; j < i; ++j) {
                Pi[j] *= tmp[j];
                Gi[j] *= nb * tmp[j];
            }
            for (int64_t j = i + 1; j < c; ++j) Pi[j] = 0.0f;
        }
        // Tinv = (I + A)⁻¹ by forward substitution: row i = e_i + Σ_{m<i} (−A_im) · (row m of Tinv).
        for (int64_t i = 0; i < c; ++i) {
            float* __restrict ti = Tinv + i * c;
            for (int64_t j = 0; j < c; ++j) ti[j] = 0.0f;
            for (int64_t m = 0; m < i; ++m) {
                const float a = G[i * c + m];
                const float* __restrict tm = Tinv + m * c;
                for (int64_t j = 0; j <= m; ++j) ti[j] += a * tm[j];
            }
            ti[i] = 1.0f;
        }
        // U' = U − W S with U = Tinv(β ⊙ V), W = Tinv(β ⊙ e^γ ⊙ K̂), taken as U' = Tinv(β ⊙ (V − e^γ ⊙ K̂S)):
        // one triangular product of width dv instead of dv + dk.
        Ops::gemm(c, dv, dk, K, ldqk, Sh, dv, R, dv, 0.0f, false, false);          // R = K̂ S
        for (int64_t i = 0; i < c; ++i) {
            const float* vi = v + ((t0 + i) * s.nv + h) * dv;
            float* r = R + i * dv;
            for (int64_t j = 0; j < dv; ++j) r[j] = bt[i] * (vi[j] - eg[i] * r[j]);
        }
        Ops::gemm(c, dv, c, Tinv, c, R, dv, U, dv, 0.0f, true, false);            // U' = Tinv R
        float* oc = o + (t0 * s.nv + h) * dv;
        Ops::gemm(c, dv, dk, Q, ldqk, Sh, dv, oc, ldo, 0.0f, false, false);       // O = Q̂ S ...
        for (int64_t i = 0; i < c; ++i)                                           // ... = (e^γ ⊙ Q̂) S
            for (int64_t j = 0; j < dv; ++j) oc[i * ldo + j] *= eg[i];
        Ops::gemm(c, dv, c, P, c, U, dv, oc, ldo, 1.0f, true, false);              // O += P U'
        for (int64_t j = 0; j < c; ++j) tmp[j] = static_cast<float>(gam[c - 1] - gam[j]);
        Ops::exp_nonpos(tmp, tmp, c);
        for (int64_t p = 0; p < dk; ++p)
            for (int64_t j = 0; j < c; ++j) Kt[p * c + j] *= tmp[j];               // (e^{γ_last − γ} ⊙ K̂)ᵀ
        Ops::gemm(dk, dv, c, Kt, c, U, dv, Sh, dv, eg[c - 1], false, false);       // S = e^{γ_last} S + Kdᵀ U'
    }
}

}  // namespace
}  // namespace ember::gdn
