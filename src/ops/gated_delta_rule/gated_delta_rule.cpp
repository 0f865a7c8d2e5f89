// Gated delta rule drivers (recurrent and chunked WY form, qwen35.md §2.6), gates, portable kernels, dispatch.
#include "ops/gated_delta_rule/gated_delta_rule.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/gated_delta_rule/gated_delta_rule_impl.h"
#include "ops/gated_delta_rule/gated_delta_rule_kernels.h"

namespace ember {

void gdn_gates(const float* a, const float* b, const float* A_log, const float* dt_bias, int64_t T, int64_t nv,
               float* g, float* beta) {
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < nv; ++h) {
            const float x = a[t * nv + h] + dt_bias[h];
            const float sp = x > 20.0f ? x : std::log1p(std::exp(x));  // torch softplus, threshold 20
            g[t * nv + h] = -std::exp(A_log[h]) * sp;
            beta[t * nv + h] = 1.0f / (1.0f + std::exp(-b[t * nv + h]));
        }
}

namespace gdn {
namespace {

// ---- portable kernels (plain loops; the compiler vectorises the inner j loops) ----

void gemm_portable(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb,
                   float* C, int64_t ldc, float beta, bool a_lower, bool c_lower) {
    for (int64_t i = 0; i < m; ++i) {
        float* __restrict c = C + i * ldc;
        const int64_t kend = a_lower ? std::min(k, i + 1) : k;
        const int64_t nend = c_lower ? std::min(n, i + 1) : n;
        if (beta == 0.0f)
            for (int64_t j = 0; j < nend; ++j) c[j] = 0.0f;
        else if (beta != 1.0f)
            for (int64_t j = 0; j < nend; ++j) c[j] *= beta;
        for (int64_t p = 0; p < kend; ++p) {
            const float a = A[i * lda + p];
            const float* __restrict b = B + p * ldb;
            for (int64_t j = 0; j < nend; ++j) c[j] += a * b[j];
        }
    }
}

// Columns of S evolve independently (q, k, g, β are shared by all columns), so S is processed in blocks of
// kCols columns: pass 1 reads S_old for u = Sᵀk and Sᵀq, pass 2 writes S = αS + kδᵀ, and
// o = Sᵀ_new q = α·S_oldᵀq + (k·q)·δ needs no third pass.
constexpr int64_t kCols = 32;

void recurrent_head_portable(int64_t T, int64_t dk, int64_t dv, const float* q, const float* k, int64_t qk_stride,
                             const float* v, int64_t v_stride, const float* g, const float* beta,
                             int64_t gb_stride, float* S, float* o, int64_t o_stride) {
    float u[kCols], sq[kCols], d[kCols];
    for (int64_t t = 0; t < T; ++t) {
        const float* qt = q + t * qk_stride;
        const float* kt = k + t * qk_stride;
        const float alpha = std::exp(g[t * gb_stride]), bt = beta[t * gb_stride];
        float kq = 0.0f;
        for (int64_t i = 0; i < dk; ++i) kq += kt[i] * qt[i];
        for (int64_t j0 = 0; j0 < dv; j0 += kCols) {
            const int64_t nc = std::min(kCols, dv - j0);
            for (int64_t j = 0; j < nc; ++j) u[j] = sq[j] = 0.0f;
            for (int64_t i = 0; i < dk; ++i) {
                const float* s = S + i * dv + j0;
                for (int64_t j = 0; j < nc; ++j) {
                    u[j] += kt[i] * s[j];
                    sq[j] += qt[i] * s[j];
                }
            }
            const float* vt = v + t * v_stride + j0;
            for (int64_t j = 0; j < nc; ++j) d[j] = bt * (vt[j] - alpha * u[j]);
            for (int64_t i = 0; i < dk; ++i) {
                float* s = S + i * dv + j0;
                for (int64_t j = 0; j < nc; ++j) s[j] = alpha * s[j] + kt[i] * d[j];
            }
            float* ot = o + t * o_stride + j0;
            for (int64_t j = 0; j < nc; ++j) ot[j] = alpha * sq[j] + kq * d[j];
        }
    }
}

struct PortableOps {
    static void gemm(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb,
                     float* C, int64_t ldc, float beta, bool a_lower, bool c_lower) {
        gemm_portable(m, n, k, A, lda, B, ldb, C, ldc, beta, a_lower, c_lower);
    }
    static void exp_nonpos(const float* x, float* y, int64_t n) {
        for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
    }
};

void chunked_head_portable(const GdnShape& s, int64_t h, int64_t kh, int64_t T, const float* q, const float* k,
                           const float* v, const float* g, const float* beta, float* Sh, float* o, int64_t C,
                           float* scratch, double* gam) {
    chunked_head<PortableOps>(s, h, kh, T, q, k, v, g, beta, Sh, o, C, scratch, gam);
}

const Kernels kPortable = {"portable", gemm_portable, recurrent_head_portable, chunked_head_portable};

void check_shape(const GdnShape& s, int64_t T) {
    EMBER_CHECK(s.nk > 0 && s.nv > 0 && s.dk > 0 && s.dv > 0 && s.nv % s.nk == 0 && T >= 0,
                "bad GDN shape nk=%lld nv=%lld dk=%lld dv=%lld T=%lld", (long long)s.nk, (long long)s.nv,
                (long long)s.dk, (long long)s.dv, (long long)T);
}

int64_t key_head(const GdnShape& s, int64_t h) {
    return s.map == KeyHeadMap::GROUPED ? h / (s.nv / s.nk) : h % s.nk;
}

}  // namespace

const Kernels& kernels_portable() { return kPortable; }

const Kernels& kernels_best() {
    static const Kernels* best = kernels_avx2() ? kernels_avx2() : &kPortable;
    return *best;
}

void recurrent_with(const Kernels& kern, const GdnShape& s, int64_t T, const float* q, const float* k,
                    const float* v, const float* g, const float* beta, float* S, float* o) {
    check_shape(s, T);
    if (T == 0) return;
    parallel_for(s.nv, 1, [&](int64_t h0, int64_t h1) {
        for (int64_t h = h0; h < h1; ++h) {
            const int64_t kh = key_head(s, h);
            kern.recurrent_head(T, s.dk, s.dv, q + kh * s.dk, k + kh * s.dk, s.nk * s.dk, v + h * s.dv, s.nv * s.dv,
                                g + h, beta + h, s.nv, S + h * s.dk * s.dv, o + h * s.dv, s.nv * s.dv);
        }
    });
}

void chunked_with(const Kernels& kern, const GdnShape& s, int64_t T, const float* q, const float* k,
                  const float* v, const float* g, const float* beta, float* S, float* o, int64_t chunk) {
    check_shape(s, T);
    EMBER_CHECK(chunk >= 1, "chunk=%lld", (long long)chunk);
    if (T == 0) return;
    const int64_t C = std::min(chunk, T);
    parallel_for(s.nv, 1, [&](int64_t h0, int64_t h1) {
        std::vector<float> scratch(chunk_scratch_floats(C, s.dk, s.dv));
        std::vector<double> gam(C);
        for (int64_t h = h0; h < h1; ++h)
            kern.chunked_head(s, h, key_head(s, h), T, q, k, v, g, beta, S + h * s.dk * s.dv, o, C, scratch.data(),
                              gam.data());
    });
}

}  // namespace gdn

void gated_delta_rule_recurrent(const GdnShape& shape, int64_t T, const float* q, const float* k, const float* v,
                                const float* g, const float* beta, float* S, float* o) {
    gdn::recurrent_with(gdn::kernels_best(), shape, T, q, k, v, g, beta, S, o);
}

void gated_delta_rule_chunked(const GdnShape& shape, int64_t T, const float* q, const float* k, const float* v,
                              const float* g, const float* beta, float* S, float* o, int64_t chunk) {
    gdn::chunked_with(gdn::kernels_best(), shape, T, q, k, v, g, beta, S, o, chunk);
}

}  // namespace ember
