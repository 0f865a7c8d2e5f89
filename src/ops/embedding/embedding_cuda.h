// CUDA embedding gather (qwen35.md §2.3: h0 = Embed(ids), no scaling): rows of a Weight as fp32.
// Reference: ops/linear/linear.h weight_row (bit-exact: dense rows are exact conversions; AFFINE rows are
// s·q + b in fp32 with the product rounded before the add, as quant/affine.h affine_dequantize_row).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/linear/weight.h"

namespace ember::cuda {

// W: a Weight whose data / scales / biases are DEVICE pointers: DENSE F32, F16 or BF16, AFFINE with bits in
// {2, 3, 4, 5, 6, 8} and group_size in {32, 64, 128} (scales/biases F32, F16 or BF16), or GGML Q4_0, Q4_1, Q5_0,
// Q8_0, Q4_K, Q5_K or Q6_K blocks as stored in the file (rows equal weight_row's bit for bit).
// ids [n] device int32 (read by the kernel, so a captured graph can be replayed with new ids);
// out [n, W.cols] fp32. An id outside [0, W.rows) yields a row of NaN (never an out-of-bounds read).
// One block per token. Graph-capturable: no allocation, no synchronisation.
void embed_rows(const Weight& W, const int32_t* ids, int64_t n, float* out, cudaStream_t stream);

}  // namespace ember::cuda
