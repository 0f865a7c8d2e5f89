// ops/linear/linear_gemm_q.h: y = x·Wᵀ for many tokens (prefill, batched decode > 8 rows) on Hopper tensor cores,
// for MLX affine 4-/8-bit weights (group 32/64/128, bf16/f16/f32 scales) — which also covers the GGUF Q4_0 / Q4_1 /
// Q8_0 / Q4_K matrices the CUDA upload repacks exactly to affine (weight_repack.h). Kernel: linear_gemm_q.cu;
// tests: linear_gemm_q_cuda_test.cpp; benchmark: bench/gpu/gemm_bench.cu. Plain C++ header (no nvcc needed).
//
//   y[t, r] = Σ_c W[r, c] · x[t, c]     t < n tokens, r < W.rows, c < W.cols     (spec: ops/linear/linear.h)
//
// Numerics. The codes enter the tensor cores exactly (bf16 16 + q for 4-bit, q for 8-bit); per group of columns
// the kernel forms C = Σ code·x' with fp32 accumulation (mma.sync m16n8k16, or wgmma m64nNk16 on the larger tiles) and adds s·C + (b − off·s)·Σx' in
// fp32, as the CPU does per group (s·Σq·x + b·Σx). x' is x as the sum of two bf16 terms hi + lo
// (|x − x'| ≤ 2⁻¹⁶|x|) in the default precision (GemmPrecision::FP32: two products per code, error
// ≤ 2⁻¹⁶·Σ|w||x| + fp32 rounding, as the decode GEMVs), or x rounded to one bf16 (GemmPrecision::BF16: one
// product, error ≈ 2⁻⁹·Σ|w||x|, `--prefill-precision bf16`). Deterministic: fixed reduction order, no atomics.
//
// Tiling: a written rule (gemm_q_plan) picks the block tile (W rows × tokens) and a K split from (n, rows, cols,
// bits) by estimated time (waves of blocks over the SMs × block time, plus the split's reduction); no autotuning.
// Workspace: x split into hi / lo planes in the kernel's column order + per-group sums of x', and the partial
// sums of a K split (gemm_q_workspace_bytes). Graph-capturable: no allocation, no synchronisation, no host reads.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ops/linear/weight.h"

namespace ember::cuda {

enum class GemmPrecision : uint8_t { FP32, BF16 };

struct GemmPlan {
    int config = -1;  // block tile (index into the kernel's table; -1: choose by the rule)
    int split = 0;    // K slices (0: choose by the rule)
};

// The output split by W's rows into up to four arrays (a stacked weight [W_0; W_1; …] feeding separate consumers,
// e.g. Qwen3.5's [qkv | z | b | a]): rows [end_{k−1}, end_k) of token t go to y_k[t · (end_k − end_{k−1}) + r − end_{k−1}].
// parts = 0: the single y of gemm_q. Ends increase; the last one equals W.rows.
struct GemmOutSplit {
    int parts = 0;
    int64_t end[4] = {};
    float* y[4] = {};
};

// AFFINE, 4 or 8 bits, group 32/64/128, cols % 32 == 0, codes 16-byte aligned with 16-byte multiple rows.
bool gemm_q_supported(const Weight& W);
// The rule's choice for W and n tokens (or `force`'s fields where set).
GemmPlan gemm_q_plan(const Weight& W, int64_t n, const GemmPlan& force = {});
size_t gemm_q_workspace_bytes(const Weight& W, int64_t n, const GemmPlan& force = {});
// y [n, W.rows] = x [n, W.cols] · Wᵀ, n ≥ 1; requires gemm_q_supported(W) and a workspace of
// gemm_q_workspace_bytes(W, n, force) bytes (any alignment). x, y device fp32, 16-byte aligned rows not required.
void gemm_q(const Weight& W, const float* x, int64_t n, float* y, cudaStream_t stream, void* workspace,
            size_t workspace_bytes, GemmPrecision prec = GemmPrecision::FP32, const GemmPlan& force = {});
// The same product with the output split by rows (`out`; y of gemm_q unused): one call for a stacked weight.
void gemm_q_split_out(const Weight& W, const float* x, int64_t n, const GemmOutSplit& out, cudaStream_t stream,
                      void* workspace, size_t workspace_bytes, GemmPrecision prec = GemmPrecision::FP32,
                      const GemmPlan& force = {});
// The {s, b − off·s} pairs a weight can bring (Weight::gemm_pairs / gemm_pairs_ld), so that no call re-derives them
// from the scales and biases (one kernel and ≈ 12 bytes of traffic per row and group per call): bytes (0 when
// !gemm_q_supported(W)), the layout's row count, and the kernel that writes them into `dst` (16-byte aligned,
// gemm_q_pairs_bytes(W) bytes) on `stream`.
size_t gemm_q_pairs_bytes(const Weight& W);
int64_t gemm_q_pairs_ld(const Weight& W);
void gemm_q_make_pairs(const Weight& W, void* dst, cudaStream_t stream);
// "gemm q4 256x64 split2 stages4" for benchmark tables.
const char* gemm_q_describe(const Weight& W, int64_t n, char* buf, size_t buf_bytes, const GemmPlan& force = {});
// Number of block-tile configurations (tests force each one).
int gemm_q_configs();

}  // namespace ember::cuda
