// ops/linear/linear_kernels.h: internal interface between linear.cpp (dispatch, threads, x preparation)
// and the row kernels (portable in linear.cpp, AVX2+FMA in linear_avx2.cpp and linear_ggml_avx2.cpp).
// Not part of the op API.
#pragma once
#include <cstdint>

#include "ops/linear/weight.h"

namespace ember::linear_detail {

// Tiling shared by all kernels. Rows are processed in blocks of kRowBlock (weights of a block stay in L2
// while every token tile streams over them); tokens in tiles of up to kTokenTile.
constexpr int64_t kRowBlock = 16;
constexpr int64_t kTokenTile = 4;

// Outermost, tokens are processed in blocks whose x slab (tokens × cols f32) stays within ~512 KiB (L2), so a
// long prefill does not stream all of x from DRAM for every row block. A multiple of kTokenTile.
inline int64_t token_block(int64_t cols) {
    const int64_t tb = (int64_t{1} << 17) / (cols > 0 ? cols : 1) / kTokenTile * kTokenTile;
    return tb < kTokenTile ? kTokenTile : tb;
}

// Prepared per call by linear() and read-only in the kernels.
struct Args {
    const Weight* W = nullptr;
    const float* x = nullptr;     // [n, cols] as given
    const float* xp = nullptr;    // AVX2 affine: x with each full 256-bit block permuted (see below), else x
    const float* xsum = nullptr;  // AFFINE: [n, cols/group_size], Σ x over each group;
                                  // GGML Q4_1/Q4_K/Q5_K (SIMD kernels): [n, cols/32], Σ x over each 32 columns;
                                  // GGML with act_q8: [n, cols/32], the activation blocks' s32 (quant/ggml_act.h)
    const int8_t* xq = nullptr;   // GGML with act_q8: [n, cols] the 8-bit activations
    const float* xd = nullptr;    // GGML with act_q8: [n, cols/32] their scale d32
    int64_t n = 0;
    float* y = nullptr;           // [n, rows]
    bool avx512 = false;          // rows_avx2 may use its AVX-512 single-token affine tile, rows_ggml_avx2
                                  // its AVX-512 tiles
};

// Instruction-set levels of the kernels. The best one the CPU supports is used, capped by set_isa_limit
// (a testing knob; default: no cap, or the level named by EMBER_CPU_ISA=portable|avx2).
enum class Isa : int { Portable = 0, Avx2 = 1, Avx512 = 2 };
Isa cpu_isa();
void set_isa_limit(Isa limit);

// AVX2 affine layout for bits ∈ {2, 4, 8}: one 256-bit load holds E = 32/bits codes in each of its 8 lanes,
// a block of 8E columns; code k of lane j is column j·E + k. Shifting by bits·k and masking gives columns
// {j·E + k : j < 8}, so x is pre-permuted per block: xp[blk·8E + k·8 + j] = x[blk·8E + j·E + k].
// Columns after the last full block (only when group_size < 8E) keep their natural order.
inline int64_t avx2_block_cols(int bits) { return 8 * (32 / bits); }

// Floats of per-thread scratch the kernels need (scales and biases of one row block as f32).
inline int64_t scratch_floats(const Weight& W) {
    return W.format == WeightFormat::AFFINE ? 2 * kRowBlock * (W.cols / W.group_size) + 16 : 0;
}

// Compute y[:, r0:r1). `scratch` holds scratch_floats(W) floats.
void rows_portable(const Args& a, int64_t r0, int64_t r1, float* scratch);
void rows_avx2(const Args& a, int64_t r0, int64_t r1, float* scratch);  // only if the CPU has AVX2+FMA

// GGML weights (block-quantized types only: linear() turns F32/F16/BF16 into DENSE views). Kernels of
// linear_ggml_avx2.cpp exist for Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K; linear() calls it directly
// (only if the CPU has AVX2+FMA).
void rows_ggml_avx2(const Args& a, int64_t r0, int64_t r1);
// The same types with 8-bit activations (Weight::act_q8; Args::xq, xd, xsum): integer products per sub-block
// (linear_ggml_q8_avx2.cpp; only if the CPU has AVX2+FMA).
void rows_ggml_q8_avx2(const Args& a, int64_t r0, int64_t r1);

}  // namespace ember::linear_detail
