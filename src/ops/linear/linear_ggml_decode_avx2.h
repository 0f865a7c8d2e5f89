// ops/linear/linear_ggml_decode_avx2.h: the AVX2 block decoders of the GGML row kernels (Q4_0, Q4_1, Q5_0,
// Q8_0, Q4_K, Q5_K, Q6_K) and small SIMD helpers, shared by linear_ggml_avx2.cpp (fp32 activations) and
// linear_ggml_q8_avx2.cpp (8-bit activations). Include ONLY from files compiled with -mavx2 -mfma -mf16c
// (*_avx2.cpp): everything here has internal linkage (an anonymous namespace), so no AVX2 copy of an inline
// function can be picked by the linker for a portable caller (see linear_avx2.cpp).
//
// Per block and row, prep() turns the packed bits into int8 codes in column order with 32-byte SIMD byte
// operations (Q8_0's codes are used in place): c = q − 8 (Q4_0), q (Q4_1, Q4_K, Q5_K), q − 16 (Q5_0), q (Q8_0),
// q − 32 (Q6_K); and reads the sub-block scales (d; d·sc_s for the K-quants, rounded as ggml_dequantize rounds
// them). A block is NS sub-blocks of SL columns (32; Q6_K 16).
#pragma once
// GCC 12's AVX-512 intrinsics use self-initialized "undefined" vectors that trip -Wuninitialized once inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>
#include <cstring>

#include "ops/linear/linear_kernels.h"

namespace ember::linear_detail {
namespace {

inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
inline float fmadd1(float a, float b, float c) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}
inline void prefetch(const uint8_t* base, int64_t bytes) {  // address may lie past the end: integer arithmetic
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(bytes)),
                 _MM_HINT_T0);
}
inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
inline float f16_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}
inline __m256 codes8(const int8_t* p) {  // 8 int8 codes → 8 floats
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline void store32(int8_t* p, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(p), v); }
inline __m256i bytes(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }
// Low / high nibbles of 32 bytes.
inline __m256i lo4(__m256i v) { return _mm256_and_si256(v, bytes(15)); }
inline __m256i hi4(__m256i v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), bytes(15)); }
// The 16 bytes qs of a 32-column block as 32 nibbles in column order: low nibbles are columns 0..15, high 16..31.
inline __m256i nibbles32(const uint8_t* qs) {
    const __m128i v = load16(qs), m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}
// Bit k of each byte → bit 4 (value 16) of the same byte.
template <int k>
inline __m256i bit_to_16(__m256i v) {
    if constexpr (k < 4) v = _mm256_slli_epi16(v, 4 - k);
    else if constexpr (k > 4) v = _mm256_srli_epi16(v, k - 4);
    return _mm256_and_si256(v, bytes(16));
}

// ---------------------------------------------------------------- decoders
// BE columns in BB bytes per block; NS sub-blocks of SL columns. prep(b, buf, st) reads the scales into st
// (st.sc[s]; MIN 1: st.m, one min per block; MIN 2: st.mn, lane s = offset of sub-block s) and decodes the
// codes into buf (32-byte aligned, BE bytes); codes(b, buf, s) points at the SL codes of sub-block s.

struct Q4_0 {
    static constexpr int BE = 32, BB = 18, NS = 1, SL = 32, MIN = 0;
    struct St { float sc[1]; };
    static void prep(const uint8_t* b, int8_t* buf, St& st) {
        st.sc[0] = f16_at(b);
        store32(buf, _mm256_sub_epi8(nibbles32(b + 2), bytes(8)));
    }
    static const int8_t* codes(const uint8_t*, const int8_t* buf, int) { return buf; }
};

struct Q4_1 {
    static constexpr int BE = 32, BB = 20, NS = 1, SL = 32, MIN = 1;
    struct St { float sc[1], m; };
    static void prep(const uint8_t* b, int8_t* buf, St& st) {
        st.sc[0] = f16_at(b), st.m = f16_at(b + 2);
        store32(buf, nibbles32(b + 4));
    }
    static const int8_t* codes(const uint8_t*, const int8_t* buf, int) { return buf; }
};

// 5th bits: byte j of h = 16 if bit j of qh is set (byte j/8 of qh spread over 8 bytes by a shuffle, then
// tested against the masks 1, 2, 4, ..., 128).
struct Q5_0 {
    static constexpr int BE = 32, BB = 22, NS = 1, SL = 32, MIN = 0;
    struct St { float sc[1]; };
    static void prep(const uint8_t* b, int8_t* buf, St& st) {
        st.sc[0] = f16_at(b);
        uint32_t qh;
        std::memcpy(&qh, b + 2, 4);
        const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)),
                                                   _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                                                      0x0303030303030303));
        const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
        const __m256i h = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), bytes(16));
        store32(buf, _mm256_sub_epi8(_mm256_or_si256(nibbles32(b + 6), h), bytes(16)));
    }
    static const int8_t* codes(const uint8_t*, const int8_t* buf, int) { return buf; }
};

struct Q8_0 {
    static constexpr int BE = 32, BB = 34, NS = 1, SL = 32, MIN = 0;
    struct St { float sc[1]; };
    static void prep(const uint8_t* b, int8_t*, St& st) { st.sc[0] = f16_at(b); }
    static const int8_t* codes(const uint8_t* b, const int8_t*, int) { return reinterpret_cast<const int8_t*>(b + 2); }
};

// Q4_K / Q5_K scales: sc[s] = d·sc_s, mn lane s = −(dmin·mn_s). The 6-bit values are unpacked with 32-bit word
// operations: bytes 0..3 are sub-blocks 0..3, bytes 4..7 sub-blocks 4..7.
struct KScales { alignas(32) float sc[8]; __m256 mn; };
inline void k_scales(const uint8_t* b, KScales& st) {
    uint32_t w0, w1, w2;
    std::memcpy(&w0, b + 4, 4), std::memcpy(&w1, b + 8, 4), std::memcpy(&w2, b + 12, 4);
    const uint32_t sc_lo = w0 & 0x3f3f3f3fu, mn_lo = w1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u);
    const uint32_t mn_hi = ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u);
    auto f8 = [](uint32_t lo, uint32_t hi) {
        return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_setr_epi32(static_cast<int>(lo), static_cast<int>(hi), 0, 0)));
    };
    _mm256_store_ps(st.sc, _mm256_mul_ps(_mm256_set1_ps(f16_at(b)), f8(sc_lo, sc_hi)));
    st.mn = _mm256_xor_ps(_mm256_mul_ps(_mm256_set1_ps(f16_at(b + 2)), f8(mn_lo, mn_hi)), _mm256_set1_ps(-0.0f));
}

// 32-byte chunk c of qs: low nibbles are sub-block 2c, high nibbles sub-block 2c + 1.
struct Q4_K {
    static constexpr int BE = 256, BB = 144, NS = 8, SL = 32, MIN = 2;
    using St = KScales;
    static void prep(const uint8_t* b, int8_t* buf, St& st) {
        k_scales(b, st);
        for (int c = 0; c < 4; ++c) {
            const __m256i v = load32(b + 16 + 32 * c);
            store32(buf + 64 * c, lo4(v));
            store32(buf + 64 * c + 32, hi4(v));
        }
    }
    static const int8_t* codes(const uint8_t*, const int8_t* buf, int s) { return buf + 32 * s; }
};

// As Q4_K (qs at byte 48); the 5th bit of sub-block s, column l is bit s of qh[l] (qh at byte 16).
struct Q5_K {
    static constexpr int BE = 256, BB = 176, NS = 8, SL = 32, MIN = 2;
    using St = KScales;
    template <int c>
    static void chunk(const uint8_t* b, __m256i qh, int8_t* buf) {
        const __m256i v = load32(b + 48 + 32 * c);
        store32(buf + 64 * c, _mm256_or_si256(lo4(v), bit_to_16<2 * c>(qh)));
        store32(buf + 64 * c + 32, _mm256_or_si256(hi4(v), bit_to_16<2 * c + 1>(qh)));
    }
    static void prep(const uint8_t* b, int8_t* buf, St& st) {
        k_scales(b, st);
        const __m256i qh = load32(b + 16);
        chunk<0>(b, qh, buf), chunk<1>(b, qh, buf), chunk<2>(b, qh, buf), chunk<3>(b, qh, buf);
    }
    static const int8_t* codes(const uint8_t*, const int8_t* buf, int s) { return buf + 32 * s; }
};

// Q6_K: half h (128 columns) from ql[64h .. 64h+64] and qh[32h .. 32h+32]; quarter k (32 columns) takes the
// low (k < 2) or high nibbles of ql[64h + 32(k & 1) ..] and bits 2k, 2k+1 of qh. Sub-blocks of 16 columns.
struct Q6_K {
    static constexpr int BE = 256, BB = 210, NS = 16, SL = 16, MIN = 0;
    struct St { alignas(32) float sc[16]; };
    static void prep(const uint8_t* b, int8_t* buf, St& st) {
        const __m256 d = _mm256_set1_ps(f16_at(b + 208));
        const __m128i s8 = load16(b + 192);
        _mm256_store_ps(st.sc, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8))));
        _mm256_store_ps(st.sc + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8)))));
        const __m256i k48 = bytes(0x30), k32 = bytes(32);
        for (int h = 0; h < 2; ++h) {
            const __m256i l0 = load32(b + 64 * h), l1 = load32(b + 64 * h + 32), qh = load32(b + 128 + 32 * h);
            int8_t* o = buf + 128 * h;
            store32(o, _mm256_sub_epi8(_mm256_or_si256(lo4(l0), _mm256_and_si256(_mm256_slli_epi16(qh, 4), k48)), k32));
            store32(o + 32, _mm256_sub_epi8(_mm256_or_si256(lo4(l1), _mm256_and_si256(_mm256_slli_epi16(qh, 2), k48)), k32));
            store32(o + 64, _mm256_sub_epi8(_mm256_or_si256(hi4(l0), _mm256_and_si256(qh, k48)), k32));
            store32(o + 96, _mm256_sub_epi8(_mm256_or_si256(hi4(l1), _mm256_and_si256(_mm256_srli_epi16(qh, 2), k48)), k32));
        }
    }
    static const int8_t* codes(const uint8_t*, const int8_t* buf, int s) { return buf + 16 * s; }
};


// ---------------------------------------------------------------- the tile frame
// Shared by the AVX2 tiles of both files: y for R rows × T tokens from fp32 accumulators. Each block is decoded
// once per tile; the block after the one being consumed is decoded first (two stages), so the consumer's loads of
// the codes do not wait on the decoder's stores. product(blk, w, g, acc) adds the block's scale·Σ code·x terms
// (w: the block in the tile's first row, g: its decoded stage); the frame adds the offsets of the types with a
// min in Σx form from Args::xsum (Q4_1 m·Σx_block as a scalar chain, Q4_K/Q5_K (−dmin·mn_s)·Σx_s as one 8-lane
// FMA) and stores hsum(acc) (+ the chain). Every (row, token) sees the same operation sequence whatever R and T.
template <class D, int R>
struct Stage {
    alignas(32) int8_t buf[R][D::BE];
    typename D::St st[R];
};

template <class D, int R, int T, class Product>
inline void tile_frame(const Args& a, int64_t r, int64_t t0, Product&& product) {
    const Weight& W = *a.W;
    const int64_t K = W.cols, nb = K / D::BE, ldw = nb * D::BB, ns = K / 32;
    const uint8_t* w0 = static_cast<const uint8_t*>(W.data) + r * ldw;
    __m256 acc[R][T];
    float macc[R][T];  // MIN == 1
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) acc[i][j] = _mm256_setzero_ps(), macc[i][j] = 0.0f;
    auto prep = [&](int64_t blk, Stage<D, R>& g) {
        const uint8_t* w = w0 + blk * D::BB;
        if constexpr (T == 1)  // single token is memory-bound: fetch the next tile's rows one tile ahead
            for (int i = 0; i < R; ++i)
                for (int o = 0; o < D::BB; o += 64) prefetch(w, (R + i) * ldw + o);
        for (int i = 0; i < R; ++i) D::prep(w + i * ldw, g.buf[i], g.st[i]);
    };
    auto consume = [&](int64_t blk, const Stage<D, R>& g) {
        product(blk, w0 + blk * D::BB, g, acc);
        if constexpr (D::MIN == 1) {  // + m·Σx over the block
            for (int j = 0; j < T; ++j) {
                const float xs = a.xsum[(t0 + j) * ns + blk];
                for (int i = 0; i < R; ++i) macc[i][j] = fmadd1(g.st[i].m, xs, macc[i][j]);
            }
        } else if constexpr (D::MIN == 2) {  // + Σ_s (−dmin·mn_s)·Σx_s, lane s = sub-block s
            for (int j = 0; j < T; ++j) {
                const __m256 xs = _mm256_loadu_ps(a.xsum + (t0 + j) * ns + blk * 8);
                for (int i = 0; i < R; ++i) acc[i][j] = _mm256_fmadd_ps(g.st[i].mn, xs, acc[i][j]);
            }
        }
    };
    Stage<D, R> A, B;
    prep(0, A);
    for (int64_t blk = 0; blk < nb; blk += 2) {
        if (blk + 1 < nb) prep(blk + 1, B);
        consume(blk, A);
        if (blk + 1 < nb) {
            if (blk + 2 < nb) prep(blk + 2, A);
            consume(blk + 1, B);
        }
    }
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) a.y[(t0 + j) * W.rows + r + i] = hsum(acc[i][j]) + macc[i][j];
}

}  // namespace
}  // namespace ember::linear_detail
