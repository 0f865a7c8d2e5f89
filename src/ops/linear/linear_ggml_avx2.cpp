// ops/linear/linear_ggml_avx2.cpp: AVX2+FMA row kernels of linear() for llama.cpp blocks (Q4_0, Q4_1, Q5_0,
// Q8_0, Q4_K, Q5_K, Q6_K; layouts in quant/ggml_blocks.h), and AVX-512 twins of the tiles (function-level
// target attribute, used when the CPU has AVX-512F/VL/BW/DQ and the ISA limit allows). Built with -mavx2 -mfma
// -mf16c and called only after linear.cpp checked the CPU; internal linkage except rows_ggml_avx2 (the block
// decoders come from linear_ggml_decode_avx2.h, internal linkage too; see linear_avx2.cpp for why).
//
// Activations stay fp32 (x is not quantized to Q8 as llama.cpp does; linear_ggml_q8_avx2.cpp does that when
// Weight::act_q8 asks for it). Per block and row the decoder gives int8 codes and sub-block scales (see the
// header). Per (row, token), W columns at a time (W = 8 AVX2, 16 AVX-512;
// sign-extend, convert — exact — FMA), one W-lane accumulator:
//     a = Σ_sub-block c·x,   acc += scale_s · a
// plus the offsets of the types with a min in Σx form: Q4_1 m·Σx_block as a scalar chain, Q4_K/Q5_K
// (−dmin·mn_s)·Σx_s for the 8 sub-blocks as one 8-lane FMA (into lanes 0..7 with AVX-512); Σx per 32
// columns is precomputed by linear() (Args::xsum). y = hsum(acc) (+ the scalar chain). The rounding error is
// that of fp32 accumulation of the terms scale·c·x (and offset·Σx), as in the affine path.
//
// Tiles (R rows × T tokens; each block is decoded once per tile): single token → 4 rows × 1 (software
// prefetch of the next tile's rows), else 1 row × up to 4 tokens (AVX-512: 2 rows). The block after the one
// being consumed is decoded first (two stages), so the consumer's loads of the codes do not wait on the
// decoder's stores (store forwarding). Every (row, token) sees the same operation sequence whatever R and T
// are, so at a given ISA level results do not depend on n or the thread count (the AVX2 and AVX-512 levels
// sum in different orders: each level is deterministic, they differ in the last bits).
//
// GCC 12.2 note: a variant of this file with the sub-block loop unrolled by `#pragma GCC unroll` and the
// stages in a separate function was miscompiled at -O2 for Q6_K (-fivopts merged the code and scale pointers
// of the two stages wrongly; -O0 / -fno-ivopts / a compiler barrier fixed it, ASan/UBSan were silent). The
// present shape is not; linear_test covers every type at every ISA level.
#include "ops/linear/linear_ggml_decode_avx2.h"
#include "ops/linear/linear_kernels.h"

namespace ember::linear_detail {
namespace {

// ---------------------------------------------------------------- AVX2 tile
template <class D, int R, int T>
void tile_avx2(const Args& a, int64_t r, int64_t t0) {
    const int64_t K = a.W->cols, ldw = K / D::BE * D::BB;
    tile_frame<D, R, T>(a, r, t0, [&](int64_t blk, const uint8_t* w, const Stage<D, R>& g, __m256 (&acc)[R][T]) {
        const float* x = a.x + t0 * K + blk * D::BE;
        for (int s = 0; s < D::NS; ++s) {
            __m256 sub[R][T] = {};  // (each is set at v == 0; the initialisation only quiets -Wmaybe-uninitialized)
            for (int v = 0; v < D::SL; v += 8) {
                __m256 q[R];
                for (int i = 0; i < R; ++i) q[i] = codes8(D::codes(w + i * ldw, g.buf[i], s) + v);
                for (int j = 0; j < T; ++j) {
                    const __m256 xv = _mm256_loadu_ps(x + j * K + s * D::SL + v);
                    for (int i = 0; i < R; ++i)
                        sub[i][j] = v == 0 ? _mm256_mul_ps(q[i], xv) : _mm256_fmadd_ps(q[i], xv, sub[i][j]);
                }
            }
            for (int i = 0; i < R; ++i) {
                const __m256 sc = _mm256_broadcast_ss(g.st[i].sc + s);
                for (int j = 0; j < T; ++j) acc[i][j] = _mm256_fmadd_ps(sub[i][j], sc, acc[i][j]);
            }
        }
    });
}

// ---------------------------------------------------------------- AVX-512 tile (tile_avx2 with 16 lanes)
#define EMBER_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512dq")))

template <class D, int R, int T>
EMBER_AVX512 void tile_avx512(const Args& a, int64_t r, int64_t t0) {
    const Weight& W = *a.W;
    const int64_t K = W.cols, nb = K / D::BE, ldw = nb * D::BB, ns = K / 32;
    const uint8_t* w0 = static_cast<const uint8_t*>(W.data) + r * ldw;
    __m512 acc[R][T];
    float macc[R][T];  // MIN == 1
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < T; ++j) acc[i][j] = _mm512_setzero_ps(), macc[i][j] = 0.0f;
    struct Stage {
        alignas(32) int8_t buf[R][D::BE];
        typename D::St st[R];
    };
    auto prep = [&](int64_t blk, Stage& g) EMBER_AVX512 {
        const uint8_t* w = w0 + blk * D::BB;
        if constexpr (T == 1)
            for (int i = 0; i < R; ++i)
                for (int o = 0; o < D::BB; o += 64) prefetch(w, (R + i) * ldw + o);
        for (int i = 0; i < R; ++i) D::prep(w + i * ldw, g.buf[i], g.st[i]);
    };
    auto consume = [&](int64_t blk, const Stage& g) EMBER_AVX512 {
        const uint8_t* w = w0 + blk * D::BB;
        const float* x = a.x + t0 * K + blk * D::BE;
        for (int s = 0; s < D::NS; ++s) {
            __m512 sub[R][T] = {};  // (set at v == 0)
            for (int v = 0; v < D::SL; v += 16) {
                __m512 q[R];
                for (int i = 0; i < R; ++i)
                    q[i] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(D::codes(w + i * ldw, g.buf[i], s) + v))));
                for (int j = 0; j < T; ++j) {
                    const __m512 xv = _mm512_loadu_ps(x + j * K + s * D::SL + v);
                    for (int i = 0; i < R; ++i)
                        sub[i][j] = v == 0 ? _mm512_mul_ps(q[i], xv) : _mm512_fmadd_ps(q[i], xv, sub[i][j]);
                }
            }
            for (int i = 0; i < R; ++i) {
                const __m512 sc = _mm512_set1_ps(g.st[i].sc[s]);
                for (int j = 0; j < T; ++j) acc[i][j] = _mm512_fmadd_ps(sub[i][j], sc, acc[i][j]);
            }
        }
        if constexpr (D::MIN == 1) {
            for (int j = 0; j < T; ++j) {
                const float xs = a.xsum[(t0 + j) * ns + blk];
                for (int i = 0; i < R; ++i) macc[i][j] = fmadd1(g.st[i].m, xs, macc[i][j]);
            }
        } else if constexpr (D::MIN == 2) {  // into lanes 0..7 only
            for (int j = 0; j < T; ++j) {
                const __m512 xs = _mm512_castps256_ps512(_mm256_loadu_ps(a.xsum + (t0 + j) * ns + blk * 8));
                for (int i = 0; i < R; ++i)
                    acc[i][j] = _mm512_mask3_fmadd_ps(_mm512_castps256_ps512(g.st[i].mn), xs, acc[i][j], 0x00ff);
            }
        }
    };
    Stage A, B;
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
        for (int j = 0; j < T; ++j)
            a.y[(t0 + j) * W.rows + r + i] =
                hsum(_mm256_add_ps(_mm512_castps512_ps256(acc[i][j]), _mm512_extractf32x8_ps(acc[i][j], 1))) + macc[i][j];
}

// ---------------------------------------------------------------- driver
// Rows [rb, re) × tokens [tb, te): token tiles of kTokenTile; 4-row tiles for one token, else 1 row (AVX2) or
// 2 rows (AVX-512) per tile.
template <class D>
void block_avx2(const Args& a, int64_t rb, int64_t re, int64_t tb, int64_t te) {
    for (int64_t t0 = tb; t0 < te; t0 += kTokenTile) {
        const int64_t tn = imin(kTokenTile, te - t0);
        int64_t r = rb;
        if (tn == 1)
            for (; r + 4 <= re; r += 4) tile_avx2<D, 4, 1>(a, r, t0);
        for (; r < re; ++r) {
            if (tn == 4) tile_avx2<D, 1, 4>(a, r, t0);
            else if (tn == 3) tile_avx2<D, 1, 3>(a, r, t0);
            else if (tn == 2) tile_avx2<D, 1, 2>(a, r, t0);
            else tile_avx2<D, 1, 1>(a, r, t0);
        }
    }
}

template <class D>
EMBER_AVX512 void block_avx512(const Args& a, int64_t rb, int64_t re, int64_t tb, int64_t te) {
    for (int64_t t0 = tb; t0 < te; t0 += kTokenTile) {
        const int64_t tn = imin(kTokenTile, te - t0);
        int64_t r = rb;
        if (tn == 1)
            for (; r + 4 <= re; r += 4) tile_avx512<D, 4, 1>(a, r, t0);
        else
            for (; r + 2 <= re; r += 2) {
                if (tn == 4) tile_avx512<D, 2, 4>(a, r, t0);
                else if (tn == 3) tile_avx512<D, 2, 3>(a, r, t0);
                else tile_avx512<D, 2, 2>(a, r, t0);
            }
        for (; r < re; ++r) {
            if (tn == 4) tile_avx512<D, 1, 4>(a, r, t0);
            else if (tn == 3) tile_avx512<D, 1, 3>(a, r, t0);
            else if (tn == 2) tile_avx512<D, 1, 2>(a, r, t0);
            else tile_avx512<D, 1, 1>(a, r, t0);
        }
    }
}

template <class D>
void rows(const Args& a, int64_t r0, int64_t r1) {
    const int64_t tb_len = token_block(a.W->cols);
    for (int64_t tb = 0; tb < a.n; tb += tb_len)
        for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
            const int64_t re = imin(rb + kRowBlock, r1), te = imin(tb + tb_len, a.n);
            if (a.avx512) block_avx512<D>(a, rb, re, tb, te);
            else block_avx2<D>(a, rb, re, tb, te);
        }
}

}  // namespace

void rows_ggml_avx2(const Args& a, int64_t r0, int64_t r1) {
    switch (a.W->ggml_type) {
        case GgmlType::Q4_0: rows<Q4_0>(a, r0, r1); break;
        case GgmlType::Q4_1: rows<Q4_1>(a, r0, r1); break;
        case GgmlType::Q5_0: rows<Q5_0>(a, r0, r1); break;
        case GgmlType::Q8_0: rows<Q8_0>(a, r0, r1); break;
        case GgmlType::Q4_K: rows<Q4_K>(a, r0, r1); break;
        case GgmlType::Q5_K: rows<Q5_K>(a, r0, r1); break;
        case GgmlType::Q6_K: rows<Q6_K>(a, r0, r1); break;
        default: break;  // linear() only calls with the types above (ggml_avx2_type)
    }
}

}  // namespace ember::linear_detail
