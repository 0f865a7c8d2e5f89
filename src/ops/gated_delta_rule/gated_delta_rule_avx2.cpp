// AVX2+FMA kernels for the gated delta rule (table in gated_delta_rule_kernels.h): a small-matrix GEMM for the
// chunked form and the column-blocked recurrent step. Compiled with -mavx2 -mfma; selected at run time.
#include <immintrin.h>

#include <cmath>

#include "ops/gated_delta_rule/gated_delta_rule_impl.h"
#include "ops/gated_delta_rule/gated_delta_rule_kernels.h"

namespace ember::gdn {
namespace {

// Lane mask for the first n (0..8) lanes.
inline __m256i lane_mask(int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), idx);
}

// ---- GEMM: C = beta·C + A·B.  Micro-kernel MR rows × (NV vectors of 8 columns), the last vector masked when
// MASK.  Accumulators stay in registers over the whole k loop (MR = 6, NV = 2: 12 accumulators, 2 B loads and
// one broadcast live); A, B are read in place (the operands here are ≤ 256 × 256 and already cache resident).
template <int MR, int NV, bool MASK>
inline void micro(int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
                  float beta, __m256i mask) {
    __m256 acc[MR][NV];
    _Pragma("GCC unroll 8")
    for (int r = 0; r < MR; ++r)
        _Pragma("GCC unroll 8")
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
    for (int64_t p = 0; p < k; ++p) {
        __m256 b[NV];
        _Pragma("GCC unroll 8")
        for (int v = 0; v < NV; ++v)
            b[v] = (MASK && v == NV - 1) ? _mm256_maskload_ps(B + p * ldb + 8 * v, mask)
                                         : _mm256_loadu_ps(B + p * ldb + 8 * v);
        _Pragma("GCC unroll 8")
        for (int r = 0; r < MR; ++r) {
            const __m256 a = _mm256_broadcast_ss(A + r * lda + p);
            _Pragma("GCC unroll 8")
            for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(a, b[v], acc[r][v]);
        }
    }
    const __m256 vb = _mm256_set1_ps(beta);
    _Pragma("GCC unroll 8")
    for (int r = 0; r < MR; ++r)
        _Pragma("GCC unroll 8")
        for (int v = 0; v < NV; ++v) {
            float* c = C + r * ldc + 8 * v;
            const bool m = MASK && v == NV - 1;
            __m256 x = acc[r][v];
            if (beta != 0.0f) x = _mm256_fmadd_ps(vb, m ? _mm256_maskload_ps(c, mask) : _mm256_loadu_ps(c), x);
            if (m)
                _mm256_maskstore_ps(c, mask, x);
            else
                _mm256_storeu_ps(c, x);
        }
}

constexpr int kMR = 6;

// Rows [i0, i0 + MR) × columns [j, j + nc), nc ≤ 16.
template <int MR>
inline void block(int64_t i0, int64_t j, int64_t nc, int64_t k, const float* A, int64_t lda, const float* B,
                  int64_t ldb, float* C, int64_t ldc, float beta, bool a_lower) {
    const int64_t kend = a_lower ? imin(k, i0 + MR) : k;  // A[i, p] = 0 for p > i: stop at the block's end
    const float* a = A + i0 * lda;
    const float* b = B + j;
    float* c = C + i0 * ldc + j;
    const __m256i all = _mm256_set1_epi32(-1);
    if (nc == 16)
        micro<MR, 2, false>(kend, a, lda, b, ldb, c, ldc, beta, all);
    else if (nc > 8)
        micro<MR, 2, true>(kend, a, lda, b, ldb, c, ldc, beta, lane_mask(nc - 8));
    else if (nc == 8)
        micro<MR, 1, false>(kend, a, lda, b, ldb, c, ldc, beta, all);
    else
        micro<MR, 1, true>(kend, a, lda, b, ldb, c, ldc, beta, lane_mask(nc));
}

// Column panels of 16 outside, row blocks of 6 inside: the B panel [k, 16] (≤ 16 KiB) stays in L1 while A is
// swept, which matters once B itself outgrows L1 (k = dk = 128, n = dv = 128: 64 KiB).
void gemm_avx2(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb,
               float* C, int64_t ldc, float beta, bool a_lower, bool c_lower) {
    for (int64_t j = 0; j < n; j += 16) {
        const int64_t nc = imin(16, n - j);
        // c_lower: rows i < j lie entirely above the diagonal for this panel; start at the block holding row j.
        int64_t i = c_lower ? (j / kMR) * kMR : 0;
        for (; i + kMR <= m; i += kMR) block<kMR>(i, j, nc, k, A, lda, B, ldb, C, ldc, beta, a_lower);
        switch (m - i) {
            case 5: block<5>(i, j, nc, k, A, lda, B, ldb, C, ldc, beta, a_lower); break;
            case 4: block<4>(i, j, nc, k, A, lda, B, ldb, C, ldc, beta, a_lower); break;
            case 3: block<3>(i, j, nc, k, A, lda, B, ldb, C, ldc, beta, a_lower); break;
            case 2: block<2>(i, j, nc, k, A, lda, B, ldb, C, ldc, beta, a_lower); break;
            case 1: block<1>(i, j, nc, k, A, lda, B, ldb, C, ldc, beta, a_lower); break;
            default: break;
        }
    }
}

inline float hsum(__m256 x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline float dot(const float* x, const float* y, int64_t n) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
    }
    if (i + 8 <= n) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        i += 8;
    }
    float s = hsum(_mm256_add_ps(a0, a1));
    for (; i < n; ++i) s += x[i] * y[i];
    return s;
}

// ---- Recurrent step on NV·8 columns of S (the last vector masked when MASK).  Columns of S evolve
// independently, so per column block: pass 1 reads S_old for u = S_oldᵀk and S_oldᵀq (two FMA chains per
// vector); δ = β(v − α u); pass 2 writes S = αS + kδᵀ; o = α·S_oldᵀq + (k·q)·δ (= S_newᵀq) needs no third pass.
template <int NV, bool MASK>
inline void rec_cols(int64_t dk, int64_t dv, const float* qt, const float* kt, const float* vt, float alpha, float bt,
                     float kq, float* S, float* ot, __m256i mask) {
    __m256 u[NV], sq[NV];
    _Pragma("GCC unroll 8")
    for (int v = 0; v < NV; ++v) u[v] = sq[v] = _mm256_setzero_ps();
    auto load = [&](const float* p, int v) {
        return (MASK && v == NV - 1) ? _mm256_maskload_ps(p + 8 * v, mask) : _mm256_loadu_ps(p + 8 * v);
    };
    auto store = [&](float* p, int v, __m256 x) {
        if (MASK && v == NV - 1)
            _mm256_maskstore_ps(p + 8 * v, mask, x);
        else
            _mm256_storeu_ps(p + 8 * v, x);
    };
    for (int64_t i = 0; i < dk; ++i) {
        const __m256 ki = _mm256_broadcast_ss(kt + i), qi = _mm256_broadcast_ss(qt + i);
        _Pragma("GCC unroll 8")
        for (int v = 0; v < NV; ++v) {
            const __m256 s = load(S + i * dv, v);
            u[v] = _mm256_fmadd_ps(ki, s, u[v]);
            sq[v] = _mm256_fmadd_ps(qi, s, sq[v]);
        }
    }
    const __m256 va = _mm256_set1_ps(alpha), vbt = _mm256_set1_ps(bt), vkq = _mm256_set1_ps(kq);
    __m256 d[NV];
    _Pragma("GCC unroll 8")
    for (int v = 0; v < NV; ++v) {
        d[v] = _mm256_mul_ps(vbt, _mm256_fnmadd_ps(va, u[v], load(vt, v)));  // β(v − αu)
        store(ot, v, _mm256_fmadd_ps(va, sq[v], _mm256_mul_ps(vkq, d[v])));  // α S_oldᵀq + (k·q) δ
    }
    for (int64_t i = 0; i < dk; ++i) {
        const __m256 ki = _mm256_broadcast_ss(kt + i);
        _Pragma("GCC unroll 8")
        for (int v = 0; v < NV; ++v)
            store(S + i * dv, v, _mm256_fmadd_ps(ki, d[v], _mm256_mul_ps(va, load(S + i * dv, v))));  // αS + kδᵀ
    }
}

void recurrent_head_avx2(int64_t T, int64_t dk, int64_t dv, const float* q, const float* k, int64_t qk_stride,
                         const float* v, int64_t v_stride, const float* g, const float* beta, int64_t gb_stride,
                         float* S, float* o, int64_t o_stride) {
    const __m256i all = _mm256_set1_epi32(-1);
    for (int64_t t = 0; t < T; ++t) {
        const float *qt = q + t * qk_stride, *kt = k + t * qk_stride, *vt = v + t * v_stride;
        float* ot = o + t * o_stride;
        const float alpha = std::exp(g[t * gb_stride]), bt = beta[t * gb_stride];
        const float kq = dot(kt, qt, dk);
        int64_t j = 0;
        for (; j + 32 <= dv; j += 32) rec_cols<4, false>(dk, dv, qt, kt, vt + j, alpha, bt, kq, S + j, ot + j, all);
        for (; j + 8 <= dv; j += 8) rec_cols<1, false>(dk, dv, qt, kt, vt + j, alpha, bt, kq, S + j, ot + j, all);
        if (j < dv) rec_cols<1, true>(dk, dv, qt, kt, vt + j, alpha, bt, kq, S + j, ot + j, lane_mask(dv - j));
    }
}

// y = exp(x), 8 lanes: Cephes expf (x = n·ln2 + r, |r| ≤ ln2/2, polynomial; ≤ 1.3 ulp measured on [−87, 88]).
// Meant for x ≤ 0 (all exponents of the chunked form); x < ln(FLT_MIN) gives 0 (the exact value is denormal or
// 0), x > 88 is taken as 88 (no inf), NaN stays NaN (max/min return their second operand when one is NaN).
inline __m256 exp_nonpos8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.33654f);
    const __m256 zero_mask = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), _mm256_max_ps(lo, x));
    const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(zero_mask, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}

struct Avx2Ops {
    static void gemm(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb,
                     float* C, int64_t ldc, float beta, bool a_lower, bool c_lower) {
        gemm_avx2(m, n, k, A, lda, B, ldb, C, ldc, beta, a_lower, c_lower);
    }
    static void exp_nonpos(const float* x, float* y, int64_t n) {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp_nonpos8(_mm256_loadu_ps(x + i)));
        if (i < n) {
            const __m256i m = lane_mask(n - i);
            _mm256_maskstore_ps(y + i, m, exp_nonpos8(_mm256_maskload_ps(x + i, m)));
        }
    }
};

void chunked_head_avx2(const GdnShape& s, int64_t h, int64_t kh, int64_t T, const float* q, const float* k,
                       const float* v, const float* g, const float* beta, float* Sh, float* o, int64_t C,
                       float* scratch, double* gam) {
    chunked_head<Avx2Ops>(s, h, kh, T, q, k, v, g, beta, Sh, o, C, scratch, gam);
}

bool cpu_has_avx2_fma() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

const Kernels kAvx2 = {"avx2", gemm_avx2, recurrent_head_avx2, chunked_head_avx2};

}  // namespace

const Kernels* kernels_avx2() {
    static const bool ok = cpu_has_avx2_fma();
    return ok ? &kAvx2 : nullptr;
}

}  // namespace ember::gdn
