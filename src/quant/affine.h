// quant/affine.h: MLX affine quantization (mx.quantize mode="affine") — format definition and scalar reference.
//
// A quantized row of `cols` weights is split into groups of `group_size` consecutive columns; each group g has
// a scale s_g and a bias b_g, and each weight an unsigned code q in [0, 2^bits − 1]:
//
//     w[c] = s_g · q[c] + b_g          g = c / group_size       (evaluated in fp32: s*q rounded, then + b)
//
// Packing (checked against mlx 0.32 for bits 2,3,4,5,6,8): the codes of one row form ONE contiguous
// little-endian bit stream stored in uint32 words; code c occupies stream bits [c·bits, (c+1)·bits),
// i.e. bit i of the stream is bit (i % 32) of word i / 32. For bits 3, 5, 6 codes straddle word
// boundaries (e.g. 3-bit code 10 = bits 30..32). A row is cols·bits/32 words (cols is a multiple of 32).
//
// Quantization (mlx/backend/cpu/quantized.cpp `quantize`, fp32 math), per group:
//     n     = 2^bits − 1,  scale = max((w_max − w_min) / n, 1e-7)
//     edge  = |w_min| > |w_max| ? w_min : w_max;  scale = (edge == w_min) ? scale : −scale
//     q0    = rint(edge / scale);  if q0 ≠ 0: scale = edge / q0, bias = edge  else bias = 0
//     q[c]  = clamp(rint((w[c] − bias) / scale), 0, n)
// so scales are often NEGATIVE (whenever |w_max| ≥ |w_min|), and the edge value is exactly representable.
// Round-trip error is ≤ |s|/2 for unclamped codes but can reach |s| for a clamped code at the far end.
// Scales/biases are produced in fp32; MLX then casts them to the model dtype (RNE), as ember convert must.
#pragma once
#include <cstdint>

#include "ops/linear/weight.h"

namespace ember {

// True for the (bits, group_size) pairs MLX supports: bits 2,3,4,5,6,8 and group_size 32,64,128.
bool affine_params_valid(int bits, int group_size);

// uint32 words in one packed row of `cols` codes.
inline int64_t affine_row_words(int64_t cols, int bits) { return cols * bits / 32; }

// Code c of a packed row (LSB-first bit stream across words). Reads word c·bits/32 and, only when the
// code straddles a boundary, the next one.
inline int affine_get(const uint32_t* row_packed, int64_t c, int bits) {
    int64_t bit = c * bits;
    int64_t w = bit >> 5;
    int sh = static_cast<int>(bit & 31);
    uint32_t v = row_packed[w] >> sh;
    if (sh + bits > 32) v |= row_packed[w + 1] << (32 - sh);
    return static_cast<int>(v & ((1u << bits) - 1u));
}

// Write code q (0 ≤ q < 2^bits) at position c of a packed row whose bits there are still zero.
inline void affine_put(uint32_t* row_packed, int64_t c, int bits, uint32_t q) {
    int64_t bit = c * bits;
    int64_t w = bit >> 5;
    int sh = static_cast<int>(bit & 31);
    row_packed[w] |= q << sh;
    if (sh + bits > 32) row_packed[w + 1] |= q >> (32 - sh);
}

// Row r of an AFFINE weight as f32: out[c] = s·q + b (fp32, two roundings), c < W.cols.
void affine_dequantize_row(const Weight& W, int64_t r, float* out);

// Quantize one row like mlx.core.quantize(w, group_size, bits) (affine): packed gets
// affine_row_words(cols, bits) words, scales/biases get cols/group_size fp32 values each.
// cols must be a multiple of group_size.
void affine_quantize_row(const float* w, int64_t cols, int bits, int group_size, uint32_t* packed,
                         float* scales, float* biases);

}  // namespace ember
