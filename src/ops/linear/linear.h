// ops/linear/linear.h: y = x · Wᵀ for a dense, MLX-affine or GGML Weight (CPU), its fp64 reference, row gather.
//
//   y[t, r] = Σ_c W[r, c] · x[t, c]        t < n, r < W.rows, c < W.cols
//   x: [n, cols] f32 row-major,  y: [n, rows] f32 row-major,  W: see ops/linear/weight.h.
//   AFFINE: W[r, c] = s·q + b per group (quant/affine.h); computed per group as s·Σ q·x + b·Σ x.
//   GGML:   W[r, c] = the llama.cpp block's value (quant/ggml_blocks.h); the integer codes are decoded in
//           registers and multiplied with fp32 x (x is NOT quantized to Q8 as llama.cpp does): per sub-block
//           scale·Σ c·x, plus offset·Σx for the types with a min (Q4_1, Q4_K, Q5_K) — fp32-accumulation error.
//           With W.act_q8, x is first rounded to llama.cpp's 8-bit activation blocks (quant/ggml_act.h: q, d32,
//           s32 per token row) and y = Σ_sub-block scale·d32·Σ c·q (exact integers) + offset·s32 — llama.cpp's
//           CPU numerics up to fp32 summation order. F32/F16/BF16 GGML weights run as DENSE.
//
// linear(): fp32 accumulation, AVX2+FMA kernels (dense F32/F16/BF16, affine bits 2/4/8, GGML Q4_0/Q4_1/
// Q5_0/Q8_0/Q4_K/Q5_K/Q6_K, with fp32 or 8-bit activations; AVX-512 variants of the single-token affine tile and
// of the fp32-activation GGML tiles) when the CPU has them, a portable path otherwise (and for affine bits 3/5/6).
// Threads over rows; for n > 1 tokens are processed in tiles so each weight group / block is decoded once per
// tile. The whole matrix is never expanded. Results are bitwise independent of the thread count and of n:
// row t of linear(x, n) equals linear(x + t·cols, 1) exactly (same per-(row, token) operation order in every
// tile shape; for GGML weights at a given ISA level — its AVX2 and AVX-512 kernels differ in the last bits).
// linear_ref(): the definition, one row at a time in fp64 (GGML: from the ggml_dequantize fp32 row). For tests.
#pragma once
#include <cstdint>

#include "ops/linear/weight.h"

namespace ember {

void linear(const Weight& W, const float* x, int64_t n, float* y);      // fast: SIMD + threads
void linear_ref(const Weight& W, const float* x, int64_t n, float* y);  // scalar, fp64 accumulate
void weight_row(const Weight& W, int64_t r, float* out);               // row r as f32 (embedding gather)

}  // namespace ember
