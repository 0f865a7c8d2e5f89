// ops/linear/linear_avx2.cpp: AVX2+FMA row kernels for linear(): dense F32/F16/BF16 and MLX affine bits 2/4/8,
// plus an AVX-512 variant of the single-token affine tile (function-level target attribute, used when the CPU
// has AVX-512F/VL/BW/DQ). Built with -mavx2 -mfma -mf16c and called only after linear.cpp checked the CPU.
// Everything except rows_avx2 has internal linkage and no inline function from a shared header is called, so
// no AVX2 code can be picked by the linker for a portable caller.
//
// Tile = R rows × T tokens, vectorized along the columns, one fp32 accumulator vector per (row, token):
//   dense : acc[r][t] += w[r, c:c+8] · x[t, c:c+8]
//   affine: per group g:  a[r][t] = Σ_blocks q[r, ·] · xp[t, ·]   (codes → f32 once per tile, FMA into T tokens)
//           tot[r][t] += s[r, g] · a[r][t];  finally y = hsum(tot) + Σ_g b[r, g] · xsum[t, g]
// Tiles: single token → 4 rows × 1 token (affine: the AVX-512 tile when available), else 1 row × 4 tokens
// (affine) / 2 rows × 4 tokens (dense); single-token tiles software-prefetch the next tile's rows.
// Every (row, token) sees the same operation sequence whatever R and T are, so results do not depend on
// the tiling (n, thread count).
// GCC 12's AVX-512 intrinsics use self-initialized "undefined" vectors that trip -Wuninitialized once inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstring>
#include <utility>

#include "ops/linear/linear_kernels.h"

namespace ember::linear_detail {
namespace {

// Local helpers instead of std::fma / std::min: an un-inlined (-O0) copy of a shared inline function compiled
// here would carry AVX2/FMA instructions and could be picked by the linker for portable callers.
inline float fmadd1(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}
inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
// Prefetch base + bytes; the address may lie past the end of the array (prefetches never fault), so it is
// formed with integer arithmetic.
inline void prefetch(const void* base, int64_t bytes) {
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(bytes)),
                 _MM_HINT_T0);
}

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline float bf16_f32(uint16_t h) {
    uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline float f16_f32(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }

// dst[i] = float(src[off + i]) for i < count.
void to_f32(const void* src, DType t, int64_t off, int64_t count, float* dst) {
    if (t == DType::F32) {
        std::memcpy(dst, static_cast<const float*>(src) + off, static_cast<size_t>(count) * sizeof(float));
        return;
    }
    const uint16_t* p = static_cast<const uint16_t*>(src) + off;
    int64_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
        __m256 f = t == DType::BF16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
                                    : _mm256_cvtph_ps(h);
        _mm256_storeu_ps(dst + i, f);
    }
    for (; i < count; ++i) dst[i] = t == DType::BF16 ? bf16_f32(p[i]) : f16_f32(p[i]);
}

// Σ a[i]·b[i], fixed order (8 lanes, then hsum, then the scalar tail).
inline float dot(const float* a, const float* b, int64_t len) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    float s = hsum(acc);
    for (; i < len; ++i) s = fmadd1(a[i], b[i], s);
    return s;
}

// ---------------------------------------------------------------- dense
template <DType DT>
inline __m256 load8(const void* base, int64_t i) {
    if constexpr (DT == DType::F32) {
        return _mm256_loadu_ps(static_cast<const float*>(base) + i);
    } else {
        __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + i));
        if constexpr (DT == DType::BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
        else return _mm256_cvtph_ps(h);
    }
}
template <DType DT>
inline float load1(const void* base, int64_t i) {
    if constexpr (DT == DType::F32) return static_cast<const float*>(base)[i];
    else if constexpr (DT == DType::BF16) return bf16_f32(static_cast<const uint16_t*>(base)[i]);
    else return f16_f32(static_cast<const uint16_t*>(base)[i]);
}

template <DType DT, int R, int T>
void dense_tile(const Args& a, int64_t r, int64_t t0) {
    const Weight& W = *a.W;
    const int64_t K = W.cols;
    const float* x = a.x + t0 * K;
    __m256 acc[R][T];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) acc[i][j] = _mm256_setzero_ps();
    int64_t c = 0;
    constexpr int64_t esz = DT == DType::F32 ? 4 : 2;
    for (; c + 8 <= K; c += 8) {
        if constexpr (T == 1)  // single token is memory-bound: fetch the next tile's rows one tile ahead
            if ((c * esz) % 64 == 0)
                for (int i = 0; i < R; ++i) prefetch(W.data, ((r + R + i) * K + c) * esz);
        __m256 wv[R];
        for (int i = 0; i < R; ++i) wv[i] = load8<DT>(W.data, (r + i) * K + c);
        for (int j = 0; j < T; ++j) {
            const __m256 xv = _mm256_loadu_ps(x + j * K + c);
            for (int i = 0; i < R; ++i) acc[i][j] = _mm256_fmadd_ps(wv[i], xv, acc[i][j]);
        }
    }
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) {
            float s = hsum(acc[i][j]);
            for (int64_t cc = c; cc < K; ++cc) s = fmadd1(load1<DT>(W.data, (r + i) * K + cc), x[j * K + cc], s);
            a.y[(t0 + j) * W.rows + r + i] = s;
        }
}

// Rows [rb, re) × tokens [tb, te): token tiles of 4, row tiles of 4 (single token) or 2.
template <DType DT>
void dense_block(const Args& a, int64_t rb, int64_t re, int64_t tb, int64_t te) {
    for (int64_t t0 = tb; t0 < te; t0 += kTokenTile) {
        const int64_t tn = imin(kTokenTile, te - t0);
        int64_t r = rb;
        if (tn == 1) {
            for (; r + 4 <= re; r += 4) dense_tile<DT, 4, 1>(a, r, t0);
        } else {
            for (; r + 2 <= re; r += 2) {
                if (tn == 4) dense_tile<DT, 2, 4>(a, r, t0);
                else if (tn == 3) dense_tile<DT, 2, 3>(a, r, t0);
                else dense_tile<DT, 2, 2>(a, r, t0);
            }
        }
        for (; r < re; ++r) {
            if (tn == 4) dense_tile<DT, 1, 4>(a, r, t0);
            else if (tn == 3) dense_tile<DT, 1, 3>(a, r, t0);
            else if (tn == 2) dense_tile<DT, 1, 2>(a, r, t0);
            else dense_tile<DT, 1, 1>(a, r, t0);
        }
    }
}

template <DType DT>
void rows_dense(const Args& a, int64_t r0, int64_t r1) {
    const int64_t tb_len = token_block(a.W->cols);
    for (int64_t tb = 0; tb < a.n; tb += tb_len)
        for (int64_t rb = r0; rb < r1; rb += kRowBlock)
            dense_block<DT>(a, rb, imin(rb + kRowBlock, r1), tb, imin(tb + tb_len, a.n));
}

// ---------------------------------------------------------------- affine
// Step k of a 256-bit block: codes {j·E + k} of each row → f32, FMA with xt[t][k·8 : k·8+8] into every token.
template <int BITS, int R, int T, int k>
inline void block_step(const __m256i (&v)[R], const float* const (&xt)[T], __m256i mask, __m256 (&acc)[R][T]) {
    constexpr int E = 32 / BITS;
    __m256 q[R];
    for (int i = 0; i < R; ++i) {
        __m256i u = v[i];
        if constexpr (k > 0) u = _mm256_srli_epi32(u, BITS * k);
        if constexpr (k < E - 1) u = _mm256_and_si256(u, mask);
        q[i] = _mm256_cvtepi32_ps(u);
    }
    for (int j = 0; j < T; ++j) {
        const __m256 xv = _mm256_loadu_ps(xt[j] + k * 8);
        for (int i = 0; i < R; ++i) acc[i][j] = _mm256_fmadd_ps(q[i], xv, acc[i][j]);
    }
}

template <int BITS, int R, int T, int... Ks>
inline void block_fma(const uint32_t* w, int64_t ldw, const float* const (&xt)[T], __m256i mask,
                      __m256 (&acc)[R][T], std::integer_sequence<int, Ks...>) {
    if constexpr (T == 1)  // single token is memory-bound: fetch the next tile's rows one tile ahead
        for (int i = 0; i < R; ++i) prefetch(w, (R + i) * ldw * 4);
    __m256i v[R];
    for (int i = 0; i < R; ++i) v[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i * ldw));
    (block_step<BITS, R, T, Ks>(v, xt, mask, acc), ...);
}

// tot[i][j] += acc[i][j] · s_i, then clear acc.
template <int R, int T>
inline void fold(__m256 (&acc)[R][T], const __m256 (&s)[R], __m256 (&tot)[R][T]) {
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) {
            tot[i][j] = _mm256_fmadd_ps(acc[i][j], s[i], tot[i][j]);
            acc[i][j] = _mm256_setzero_ps();
        }
}

// One (row, token) output: (hsum(tot) + tail) + Σ_g b_g·xsum_g. The tail is columns [c0, K) — present only
// when group_size < block — with codes at w_tail and x at x_tail in natural order. Shared by all tiles.
template <int BITS>
inline float affine_finish(__m256 tot, const uint32_t* w_tail, const float* x_tail, const float* sc, const float* bs,
                           const float* xsum, int64_t c0, int64_t K, int64_t gs) {
    float tail = 0.0f;
    for (int64_t c = c0; c < K; ++c) {
        const int64_t o = c - c0;
        const uint32_t q = (w_tail[o * BITS / 32] >> (o * BITS % 32)) & ((1u << BITS) - 1u);
        tail = fmadd1(static_cast<float>(q) * sc[c / gs], x_tail[o], tail);
    }
    return (hsum(tot) + tail) + dot(bs, xsum, K / gs);
}

// Scale vector for block blk when several groups share a block: lane l gets sc[blk·gpb + l·E/gs].
inline __m256 lane_scales(const float* sc, int64_t blk, int64_t gpb, __m256i idx) {
    // gpb ≤ 4 scales; the scratch holding sc is padded for the 4-float load
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(sc + blk * gpb)), idx);
}
inline __m256i lane_index(int E, int64_t gs) {
    return _mm256_setr_epi32(0, static_cast<int>(E / gs), static_cast<int>(2 * E / gs), static_cast<int>(3 * E / gs),
                             static_cast<int>(4 * E / gs), static_cast<int>(5 * E / gs), static_cast<int>(6 * E / gs),
                             static_cast<int>(7 * E / gs));
}

// sc, bs: f32 scales/biases of rows r .. r+R-1 (row stride ng).
template <int BITS, int R, int T>
void affine_tile(const Args& a, int64_t r, int64_t t0, const float* sc, const float* bs) {
    constexpr int E = 32 / BITS, B = 8 * E;
    using Steps = std::make_integer_sequence<int, E>;
    const Weight& W = *a.W;
    const int64_t K = W.cols, gs = W.group_size, ng = K / gs, ldw = K * BITS / 32, nblk = K / B;
    const uint32_t* w = static_cast<const uint32_t*>(W.data) + r * ldw;
    const __m256i mask = _mm256_set1_epi32((1 << BITS) - 1);
    const float* xt[T];
    for (int j = 0; j < T; ++j) xt[j] = a.xp + (t0 + j) * K;
    __m256 tot[R][T], acc[R][T], s[R];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) tot[i][j] = acc[i][j] = _mm256_setzero_ps();
    if (gs >= B) {  // whole blocks per group: one broadcast scale per group
        const int64_t pb = gs / B;
        for (int64_t g = 0; g < ng; ++g) {
            for (int64_t b = 0; b < pb; ++b) {
                block_fma<BITS, R, T>(w, ldw, xt, mask, acc, Steps{});
                w += 8;
                for (int j = 0; j < T; ++j) xt[j] += B;
            }
            for (int i = 0; i < R; ++i) s[i] = _mm256_broadcast_ss(sc + i * ng + g);
            fold<R, T>(acc, s, tot);
        }
    } else {  // several groups per block: lane l belongs to group blk·B/gs + l·E/gs
        const int64_t gpb = B / gs;
        const __m256i idx = lane_index(E, gs);
        for (int64_t blk = 0; blk < nblk; ++blk) {
            block_fma<BITS, R, T>(w, ldw, xt, mask, acc, Steps{});
            w += 8;
            for (int j = 0; j < T; ++j) xt[j] += B;
            for (int i = 0; i < R; ++i) s[i] = lane_scales(sc + i * ng, blk, gpb, idx);
            fold<R, T>(acc, s, tot);
        }
    }
    // w and xt[j] now point at the columns after the last full block (natural order).
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j)
            a.y[(t0 + j) * W.rows + r + i] = affine_finish<BITS>(tot[i][j], w + i * ldw, xt[j], sc + i * ng,
                                                                 bs + i * ng, a.xsum + (t0 + j) * ng, nblk * B, K, gs);
}

// ---------------------------------------------------------------- affine, AVX-512 single-token tile
// 2P rows × 1 token with 512-bit vectors: rows (2p, 2p+1) share a zmm (low half = even row) and x is broadcast
// to both halves. Each half performs exactly the 256-bit tile's lane operations (same fold, same
// affine_finish), so the result is bitwise identical to affine_tile<BITS, R, 1> at up to twice the decode rate.
constexpr int kPairs = 2;  // row pairs per AVX-512 tile (4, 8 measured no faster)
#define EMBER_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512dq")))

template <int BITS, int P, int k>
EMBER_AVX512 inline void step512(const __m512i (&v)[P], const float* x, __m512i mask, __m512 (&acc)[P]) {
    constexpr int E = 32 / BITS;
    const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + k * 8));
    for (int i = 0; i < P; ++i) {
        __m512i u = v[i];
        if constexpr (k > 0) u = _mm512_srli_epi32(u, BITS * k);
        if constexpr (k < E - 1) u = _mm512_and_si512(u, mask);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(u), xv, acc[i]);
    }
}

template <int BITS, int P, int... Ks>
EMBER_AVX512 inline void block512(const uint32_t* w, int64_t ldw, const float* x, __m512i mask, __m512 (&acc)[P],
                                  std::integer_sequence<int, Ks...>) {
    for (int i = 0; i < 2 * P; ++i) prefetch(w, (2 * P + i) * ldw * 4);
    __m512i v[P];
    for (int i = 0; i < P; ++i) {
        const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * i * ldw));
        const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + (2 * i + 1) * ldw));
        v[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    (step512<BITS, P, Ks>(v, x, mask, acc), ...);
}

EMBER_AVX512 inline __m512 pair512(__m256 lo, __m256 hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

template <int BITS, int P>
EMBER_AVX512 void affine_tile_avx512(const Args& a, int64_t r, int64_t t0, const float* sc, const float* bs) {
    constexpr int E = 32 / BITS, B = 8 * E;
    using Steps = std::make_integer_sequence<int, E>;
    const Weight& W = *a.W;
    const int64_t K = W.cols, gs = W.group_size, ng = K / gs, ldw = K * BITS / 32, nblk = K / B;
    const uint32_t* w = static_cast<const uint32_t*>(W.data) + r * ldw;
    const float* x = a.xp + t0 * K;
    const __m512i mask = _mm512_set1_epi32((1 << BITS) - 1);
    __m512 tot[P], acc[P], s[P];
    for (int i = 0; i < P; ++i) tot[i] = acc[i] = _mm512_setzero_ps();
    auto fold512 = [&]() EMBER_AVX512 {
        for (int i = 0; i < P; ++i) {
            tot[i] = _mm512_fmadd_ps(acc[i], s[i], tot[i]);
            acc[i] = _mm512_setzero_ps();
        }
    };
    if (gs >= B) {
        const int64_t pb = gs / B;
        for (int64_t g = 0; g < ng; ++g) {
            for (int64_t b = 0; b < pb; ++b, w += 8, x += B) block512<BITS, P>(w, ldw, x, mask, acc, Steps{});
            for (int i = 0; i < P; ++i)
                s[i] = pair512(_mm256_broadcast_ss(sc + 2 * i * ng + g), _mm256_broadcast_ss(sc + (2 * i + 1) * ng + g));
            fold512();
        }
    } else {
        const int64_t gpb = B / gs;
        const __m256i idx = lane_index(E, gs);
        for (int64_t blk = 0; blk < nblk; ++blk, w += 8, x += B) {
            block512<BITS, P>(w, ldw, x, mask, acc, Steps{});
            for (int i = 0; i < P; ++i)
                s[i] = pair512(lane_scales(sc + 2 * i * ng, blk, gpb, idx), lane_scales(sc + (2 * i + 1) * ng, blk, gpb, idx));
            fold512();
        }
    }
    for (int i = 0; i < 2 * P; ++i) {
        const __m256 t = i & 1 ? _mm512_extractf32x8_ps(tot[i / 2], 1) : _mm512_castps512_ps256(tot[i / 2]);
        a.y[t0 * W.rows + r + i] = affine_finish<BITS>(t, w + i * ldw, x, sc + i * ng, bs + i * ng,
                                                       a.xsum + t0 * ng, nblk * B, K, gs);
    }
}

// Rows [rb, re) × tokens [tb, te); sc/bs hold the block's f32 scales/biases (row stride ng).
template <int BITS>
void affine_block(const Args& a, int64_t rb, int64_t re, int64_t tb, int64_t te, const float* sc, const float* bs) {
    const int64_t ng = a.W->cols / a.W->group_size;
    for (int64_t t0 = tb; t0 < te; t0 += kTokenTile) {
        const int64_t tn = imin(kTokenTile, te - t0);
        int64_t r = rb;
        if (tn == 1 && a.avx512)
            for (; r + 2 * kPairs <= re; r += 2 * kPairs)
                affine_tile_avx512<BITS, kPairs>(a, r, t0, sc + (r - rb) * ng, bs + (r - rb) * ng);
        if (tn == 1)
            for (; r + 4 <= re; r += 4) affine_tile<BITS, 4, 1>(a, r, t0, sc + (r - rb) * ng, bs + (r - rb) * ng);
        for (; r < re; ++r) {
            const float* s = sc + (r - rb) * ng;
            const float* b = bs + (r - rb) * ng;
            if (tn == 4) affine_tile<BITS, 1, 4>(a, r, t0, s, b);
            else if (tn == 3) affine_tile<BITS, 1, 3>(a, r, t0, s, b);
            else if (tn == 2) affine_tile<BITS, 1, 2>(a, r, t0, s, b);
            else affine_tile<BITS, 1, 1>(a, r, t0, s, b);
        }
    }
}

template <int BITS>
void rows_affine(const Args& a, int64_t r0, int64_t r1, float* scratch) {
    const Weight& W = *a.W;
    const int64_t ng = W.cols / W.group_size, tb_len = token_block(W.cols);
    float* sc = scratch;
    float* bs = scratch + kRowBlock * ng + 8;
    for (int64_t tb = 0; tb < a.n; tb += tb_len) {
        for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
            const int64_t re = imin(rb + kRowBlock, r1);
            to_f32(W.scales, W.sb_dtype, rb * ng, (re - rb) * ng, sc);
            to_f32(W.biases, W.sb_dtype, rb * ng, (re - rb) * ng, bs);
            affine_block<BITS>(a, rb, re, tb, imin(tb + tb_len, a.n), sc, bs);
        }
    }
}

}  // namespace

void rows_avx2(const Args& a, int64_t r0, int64_t r1, float* scratch) {
    const Weight& W = *a.W;
    if (W.format == WeightFormat::AFFINE) {
        if (W.bits == 4) rows_affine<4>(a, r0, r1, scratch);
        else if (W.bits == 8) rows_affine<8>(a, r0, r1, scratch);
        else rows_affine<2>(a, r0, r1, scratch);
    } else if (W.dtype == DType::BF16) {
        rows_dense<DType::BF16>(a, r0, r1);
    } else if (W.dtype == DType::F16) {
        rows_dense<DType::F16>(a, r0, r1);
    } else {
        rows_dense<DType::F32>(a, r0, r1);
    }
}

}  // namespace ember::linear_detail
