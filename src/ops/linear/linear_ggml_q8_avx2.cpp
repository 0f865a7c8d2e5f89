// ops/linear/linear_ggml_q8_avx2.cpp: AVX2 row kernels of linear() for llama.cpp blocks with 8-bit activations
// (Weight::act_q8: x rounded per block by quant/ggml_act.h as llama.cpp's CPU backend does; Args::xq, xd, xsum).
// Built with -mavx2 -mfma -mf16c, called only after linear.cpp checked the CPU; internal linkage except
// rows_ggml_q8_avx2 (decoders from linear_ggml_decode_avx2.h).
//
// Per (row, token) and 32 columns: the exact integer products of the signed codes c and the activations q,
// _mm256_maddubs_epi16(|c|, sign(q, c)) (|c| ≤ 128, so each 16-bit pair sum is ≤ 2·128·127 — no saturation),
// then _mm256_madd_epi16 with ones → 8 int32 partial sums, converted (exact) and accumulated in fp32:
//     acc += (scale_s · d32) · P          (Q6_K: lanes 0..3 hold sub-block 2k, lanes 4..7 sub-block 2k + 1)
// plus the offset terms as in the fp32 kernels with Σx replaced by the activation blocks' s32 (Q4_1: m·s32 as
// a scalar chain, Q4_K/Q5_K: (−dmin·mn_s)·s32_s as one 8-lane FMA). y = hsum(acc) (+ the chain). The integer
// products are exact; the rounding is the fp32 accumulation of per-32-column terms, as in llama.cpp (whose
// order differs: results agree with it to fp32 rounding, not bit for bit).
//
// Tiles as linear_ggml_avx2.cpp (single token → 4 rows × 1, else 1 row × up to 4 tokens; two decode stages);
// every (row, token) sees the same operation sequence, so results do not depend on n or the thread count.
#include "ops/linear/linear_ggml_decode_avx2.h"
#include "ops/linear/linear_kernels.h"

namespace ember::linear_detail {
namespace {

inline __m256i load32s(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// 8 int32 lanes: lane k = Σ_{4 bytes} c·q over bytes 4k .. 4k + 3.
inline __m256i dot32(__m256i c, __m256i q) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(c, c), _mm256_sign_epi8(q, c));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

template <class D, int R, int T>
void tile_q8(const Args& a, int64_t r, int64_t t0) {
    const int64_t K = a.W->cols, ldw = K / D::BE * D::BB, ns = K / 32;
    tile_frame<D, R, T>(a, r, t0, [&](int64_t blk, const uint8_t* w, const Stage<D, R>& g, __m256 (&acc)[R][T]) {
        for (int c = 0; c < D::BE / 32; ++c) {  // 32-column chunk c of the block
            const int64_t c32 = blk * (D::BE / 32) + c;
            __m256i qv[T];
            __m256 dx[T];
            for (int j = 0; j < T; ++j) {
                qv[j] = load32s(a.xq + (t0 + j) * K + 32 * c32);
                dx[j] = _mm256_set1_ps(a.xd[(t0 + j) * ns + c32]);
            }
            for (int i = 0; i < R; ++i) {
                const __m256i cv = load32s(D::codes(w + i * ldw, g.buf[i], 32 * c / D::SL));
                __m256 sc;
                if constexpr (D::SL == 32) sc = _mm256_broadcast_ss(g.st[i].sc + c);
                else sc = _mm256_setr_m128(_mm_set1_ps(g.st[i].sc[2 * c]), _mm_set1_ps(g.st[i].sc[2 * c + 1]));
                for (int j = 0; j < T; ++j)
                    acc[i][j] = _mm256_fmadd_ps(_mm256_mul_ps(sc, dx[j]), _mm256_cvtepi32_ps(dot32(cv, qv[j])), acc[i][j]);
            }
        }
    });
}

template <class D>
void rows(const Args& a, int64_t r0, int64_t r1) {
    const int64_t tb_len = token_block(a.W->cols);
    for (int64_t tb = 0; tb < a.n; tb += tb_len)
        for (int64_t rb = r0; rb < r1; rb += kRowBlock) {
            const int64_t re = imin(rb + kRowBlock, r1), te = imin(tb + tb_len, a.n);
            for (int64_t t0 = tb; t0 < te; t0 += kTokenTile) {
                const int64_t tn = imin(kTokenTile, te - t0);
                int64_t r = rb;
                if (tn == 1)
                    for (; r + 4 <= re; r += 4) tile_q8<D, 4, 1>(a, r, t0);
                for (; r < re; ++r) {
                    if (tn == 4) tile_q8<D, 1, 4>(a, r, t0);
                    else if (tn == 3) tile_q8<D, 1, 3>(a, r, t0);
                    else if (tn == 2) tile_q8<D, 1, 2>(a, r, t0);
                    else tile_q8<D, 1, 1>(a, r, t0);
                }
            }
        }
}

}  // namespace

void rows_ggml_q8_avx2(const Args& a, int64_t r0, int64_t r1) {
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
