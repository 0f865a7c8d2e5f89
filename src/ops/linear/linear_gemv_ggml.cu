// ops/linear/linear_gemv_ggml.cu: y = x·Wᵀ for llama.cpp block-quantized weights (WeightFormat::GGML: Q4_0,
// Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K; layouts in quant/ggml_blocks.h) and n ≤ 8 tokens, on CUDA cores. The per-type
// decoders and their exactness argument: linear_gemv_ggml.cuh. Tests: linear_ggml_cuda_test.cpp.
//
// Work split: a warp owns RW = 2 rows (x loaded once for both); lane ℓ takes units ℓ, ℓ + 32, ... of the row
// (a unit = one 32-element block, or 64 elements of a 256-element K-quant block), with the next unit's bytes
// prefetched into registers. Blocks are 18..210 bytes and only 2-byte aligned: a unit's fields are read as
// aligned 32-bit words (16-byte vectors for Q4_K / Q5_K when the data is 16-byte aligned) and funnel-shifted;
// no load reaches past the matrix. x is read through L1 (float4). Warp-shuffle reduction, fixed order.
// Grid: one warp per RW rows, 8 warps per block. No workspace, no allocation: capturable in a CUDA graph.
// Cost: ~3 instructions per code to decode + n FMAs, so n = 1 runs near the issue limit at HBM speed and larger
// n is compute-bound (a tensor-core path like linear_gemv_q.cu would be the next step).
#include <cuda_fp16.h>

#include <cstdio>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "ops/linear/linear_cuda.h"
#include "ops/linear/linear_gemv_ggml.cuh"
#include "quant/ggml_type.h"

namespace ember::cuda::detail {
namespace {

using namespace ggml;
constexpr int kWarps = 8, kThreads = 32 * kWarps;

template <class T, int NT>
__global__ void __launch_bounds__(kThreads) gemv_ggml_kernel(const GArgs a) {
    const int lane = threadIdx.x & 31;
    const int64_t r0 = (int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * RW;
    if (r0 >= a.rows) return;  // whole warp
    const uint8_t* rowp[RW];
#pragma unroll
    for (int r = 0; r < RW; ++r) rowp[r] = a.w + (r0 + r < a.rows ? r0 + r : a.rows - 1) * a.row_bytes;
    float acc[RW][NT] = {};
    typename T::Raw cur[RW] = {}, nxt[RW] = {};
    int u = lane;
    if (u < a.upr) {
#pragma unroll
        for (int r = 0; r < RW; ++r) T::load(a, rowp[r] + (u / T::UPB) * T::BB, u % T::UPB, cur[r]);
    }
    while (u < a.upr) {
        const int un = u + 32;
        if (un < a.upr) {
#pragma unroll
            for (int r = 0; r < RW; ++r) T::load(a, rowp[r] + (un / T::UPB) * T::BB, un % T::UPB, nxt[r]);
        }
        T::template unit<NT>(a, u / T::UPB, u % T::UPB, cur, acc);
#pragma unroll
        for (int r = 0; r < RW; ++r) cur[r] = nxt[r];
        u = un;
    }
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) {
            float s = acc[r][t];
#pragma unroll
            for (int m = 16; m > 0; m >>= 1) s += __shfl_xor_sync(0xffffffffu, s, m);
            if (lane == 0 && t < a.n && r0 + r < a.rows) a.y[t * a.rows + r0 + r] = s;
        }
}

template <class T>
void launch_n(const GArgs& a, cudaStream_t st) {
    const unsigned blocks = unsigned((a.rows + kWarps * RW - 1) / (kWarps * RW));
    if (a.n <= 1) gemv_ggml_kernel<T, 1><<<blocks, kThreads, 0, st>>>(a);
    else if (a.n <= 2) gemv_ggml_kernel<T, 2><<<blocks, kThreads, 0, st>>>(a);
    else if (a.n <= 4) gemv_ggml_kernel<T, 4><<<blocks, kThreads, 0, st>>>(a);
    else gemv_ggml_kernel<T, 8><<<blocks, kThreads, 0, st>>>(a);
}

}  // namespace

bool gemv_ggml_supported(GgmlType t) {
    switch (t) {
        case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q8_0:
        case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K: return true;
        default: return false;
    }
}

void gemv_ggml(const Weight& W, const float* x, int n, float* y, cudaStream_t stream) {
    EMBER_CHECK(W.format == WeightFormat::GGML && gemv_ggml_supported(W.ggml_type) && n >= 1 && n <= 8,
                "gemv_ggml: type %u, n=%d", unsigned(W.ggml_type), n);
    const GgmlTypeTraits tr = ggml_type_traits(W.ggml_type);
    EMBER_CHECK(W.cols % tr.block_elems == 0 && W.cols < (int64_t(1) << 30), "gemv_ggml: %s with %lld columns",
                tr.name, (long long)W.cols);
    EMBER_CHECK((reinterpret_cast<uintptr_t>(W.data) & 1u) == 0, "gemv_ggml: data not 2-byte aligned");
    if (W.rows == 0) return;
    GArgs a{};
    a.w = static_cast<const uint8_t*>(W.data);
    a.row_bytes = W.row_bytes();
    a.end = a.w + W.rows * a.row_bytes;
    a.x = x, a.y = y, a.rows = W.rows, a.K = int(W.cols), a.n = n;
    a.x_aligned = (reinterpret_cast<uintptr_t>(x) & 15u) == 0;
    const bool a16 = (reinterpret_cast<uintptr_t>(W.data) & 15u) == 0 && a.row_bytes % 16 == 0;
    const int blocks_per_row = int(W.cols / tr.block_elems);
    switch (W.ggml_type) {
        case GgmlType::Q4_0: a.upr = blocks_per_row; launch_n<TQ4_0>(a, stream); break;
        case GgmlType::Q4_1: a.upr = blocks_per_row; launch_n<TQ4_1>(a, stream); break;
        case GgmlType::Q5_0: a.upr = blocks_per_row; launch_n<TQ5_0>(a, stream); break;
        case GgmlType::Q8_0: a.upr = blocks_per_row; launch_n<TQ8_0>(a, stream); break;
        case GgmlType::Q4_K:
            a.upr = 4 * blocks_per_row;
            if (a16) launch_n<TQ4_K<true>>(a, stream);
            else launch_n<TQ4_K<false>>(a, stream);
            break;
        case GgmlType::Q5_K:
            a.upr = 4 * blocks_per_row;
            if (a16) launch_n<TQ5_K<true>>(a, stream);
            else launch_n<TQ5_K<false>>(a, stream);
            break;
        default: a.upr = 4 * blocks_per_row; launch_n<TQ6_K>(a, stream); break;
    }
    CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::detail
