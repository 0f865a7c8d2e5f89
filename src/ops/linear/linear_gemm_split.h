// ops/linear/linear_gemm_split.h: y = x·Wᵀ for many tokens (prefill, n > 8) on cuBLAS bf16 tensor cores, for the
// weights the 4-bit GEMM (linear_gemm_q.h) does not take: GGML blocks that have no exact affine form (Q5_0, Q5_K,
// Q6_K — the tensors of the Q4_K_M / Q5_K_M files people download — and any block type when the upload did not
// repack it) and DENSE f32 / f16 / bf16 weights (HF checkpoints). Kernel: linear_gemm_split.cu; tests:
// linear_gemm_split_cuda_test.cpp; benchmark: bench/gpu/gemm_bench.cu (`--split`). Plain C++ header.
//
//   y[t, r] = Σ_c W[r, c] · x[t, c]     (spec: ops/linear/linear.h)
//
// Numerics. A row panel of W is dequantized exactly to fp32 (the formulas of quant/ggml_blocks.h, each product
// rounded as ggml_dequantize does, so the panel equals the CPU dequantization bit for bit) and split into two
// bf16 planes w = wh + wl (|w − wh − wl| ≤ 2⁻¹⁶|w|); x likewise x = xh + xl. GemmPrecision::FP32 (default):
//   y = [wh | wl]·[xh | xh]ᵀ  (one cuBLAS call over 2K, fp32 accumulation)  +  wh·xlᵀ  (a second call, β = 1)
// — three bf16 products, the dropped wl·xl is ≤ 2⁻¹⁶·|w||x| — so |error| ≤ ~2⁻¹⁵·Σ|w||x| + fp32 rounding, the
// class of the GEMVs (2⁻¹⁶). Where w is exactly a bf16 (DENSE bf16) wl = 0 and the first call runs over K only.
// GemmPrecision::BF16: wh·xhᵀ only (error ≈ 2⁻⁸·Σ|w||x|). Deterministic for a fixed GPU and cuBLAS version (fixed
// summation order, no atomics; cuBLAS runs on the handle's workspace carved from ours).
//
// Workspace (gemm_split_workspace_bytes): [cuBLAS 32 MiB][x planes: n·3K bf16][W panel: P·2K bf16], P rows per
// panel (a multiple of 128, the panel ≤ 64 MiB). Graph-capturable: no allocation, no synchronisation, no host
// reads (the cuBLAS handle is per host thread, stream and workspace set on every call).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ops/linear/linear_gemm_q.h"
#include "ops/linear/weight.h"

namespace ember::cuda {

// GGML of a supported block type (Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K), or DENSE f32 / f16 / bf16;
// cols % 8 == 0, rows and cols < 2³¹.
bool gemm_split_supported(const Weight& W);
size_t gemm_split_workspace_bytes(const Weight& W, int64_t n);
// y [n, W.rows] = x [n, W.cols] · Wᵀ (n ≥ 1; x, y device fp32) with a workspace of gemm_split_workspace_bytes.
void gemm_split(const Weight& W, const float* x, int64_t n, float* y, cudaStream_t stream, void* workspace,
                size_t workspace_bytes, GemmPrecision prec = GemmPrecision::FP32);

// The dequantization alone, for tests: rows [r0, r0 + rows) of W as fp32 [rows, W.cols] into `out` (device).
void gemm_split_dequant_rows(const Weight& W, int64_t r0, int64_t rows, float* out, cudaStream_t stream);

}  // namespace ember::cuda
