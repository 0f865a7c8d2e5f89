// quant/ggml_act.h: activations rounded to 8 bits the way llama.cpp's CPU backend rounds them before a product
// with a block-quantized weight (its "vec_dot_type"), so that ember can reproduce llama.cpp's numerics on GGUF
// models (ember's default keeps activations fp32; see ops/linear/weight.h, Weight::act_q8).
//
// The pairing (llama.cpp CPU): Q4_0, Q5_0, Q8_0 weights → Q8_0 activations; Q4_1 → Q8_1; Q4_K, Q5_K, Q6_K → Q8_K.
// Per block of B activations (B = 32 for Q8_0 / Q8_1, 256 for Q8_K), all arithmetic fp32:
//   Q8_0 / Q8_1:  a = max |x|;  d = a / 127;  id = (a ≠ 0 ? 127 / a : 0);  q = round_half_even(x · id)
//                 the block's scale is d rounded to fp16 (what the block stores);
//                 Q8_1 also stores s = fp16(d · Σq) (d unrounded), used for a Q4_1 weight's offset term.
//   Q8_K:         m = the first x of largest |x|;  iscale = −127 / m;  q = min(127, round_half_even(iscale·x));
//                 scale d = 1 / iscale (fp32, not rounded); all zero when m = 0.
// (These are the AVX2 rounding of quantize_row_q8_0 / q8_1 — _mm256_round_ps to nearest even — and the
// reference rounding of quantize_row_q8_K, which is what an x86-64 build of llama.cpp runs.)
//
// Output, one token row of K columns (K a multiple of B): q[K] int8; per 32 columns c32 = c / 32:
//   d32[c32] = the enclosing block's scale;  s32[c32] = Q8_1: that block's s; Q8_0 / Q8_K: d · Σq over the 32
//   columns (fp32) — the "Σx" a weight's offset term multiplies.
#pragma once
#include <cstdint>

#include "quant/ggml_type.h"

namespace ember {

enum class ActBlocks : uint8_t { Q8_0, Q8_1, Q8_K };

// llama.cpp's activation type for a block-quantized weight type (aborts on others; callers check first).
ActBlocks ggml_act_blocks(GgmlType weight);
int ggml_act_block_elems(ActBlocks t);  // 32 or 256

void ggml_quantize_act(ActBlocks t, const float* x, int64_t K, int8_t* q, float* d32, float* s32);

}  // namespace ember
