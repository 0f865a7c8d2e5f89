// The head-per-block kernel of batched GDN decode (gated_delta_net_step_rows, gdn_cuda.h): one 256-thread block
// per (row, value head) holding the head's whole state [dk, dv] in registers, for heads with dk ≤ 128 and
// dv ≤ 128 (every Qwen3.5 shape). Kernel and design notes: gdn_rows_cuda.cu; tests: gdn_cuda_test.cpp
// (GdnCuda.Rows*). Plain C++ header (no nvcc needed).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/gated_delta_rule/gdn_cuda.h"

namespace ember::cuda {

// The shape fits the head kernel (dk ≤ 128, dv ≤ 128, nv / nk ≤ 8, 2 ≤ K ≤ 4).
bool gdn_rows_head_supported(const GdnDecodeArgs& args);
// gated_delta_net_step_rows through the head kernel (arguments checked by the caller; n_rows ≥ 1).
void gdn_rows_head(const GdnDecodeArgs& args, const int32_t* rows_dev, int64_t conv_stride, int64_t S_stride,
                   int64_t n_rows, cudaStream_t stream);

}  // namespace ember::cuda
