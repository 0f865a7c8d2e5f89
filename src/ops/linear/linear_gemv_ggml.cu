// ops/linear/linear_gemv_ggml.cu: y = x·Wᵀ for llama.cpp block-quantized weights (WeightFormat::GGML: Q4_0,
// Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K; layouts in quant/ggml_blocks.h) and n ≤ 8 tokens, on CUDA cores. The per-type
// decoders and their exactness argument: linear_gemv_ggml.cuh. Tests: linear_ggml_cuda_test.cpp.
//
// Work split: a warp owns RW = 2 rows (x loaded once for both); lane ℓ takes units ℓ, ℓ + 32, ... of the row
// (a unit = one 32-element block, or 64 elements of a 256-element K-quant block), with the next unit's bytes
// prefetched into registers. Blocks are 18..210 bytes and only 2-byte aligned: a unit's fields are read as
// aligned 32-bit words (16-byte vectors for Q4_K / Q5_K when the data is 16-byte aligned) and funnel-shifted;
// no load reaches past the matrix. x: for one token, staged once per block in shared memory with 4 pad floats after
// every 2^PAD_SHIFT columns (per type, so that the 8 lanes of a quarter warp — 8 different units — read their
// float4 from distinct banks: 4 wavefronts per warp load instead of one L1 line per lane pair, which made the
// L1 the limit: Llama-8B Q6_K 40 → 28 µs, Q8_0 50 → 23 µs, Q4_0 45 → 19 µs on the H200); the grid is then capped
// at the resident blocks and warps walk row groups. The same for n ≤ 8 tokens while n·K padded floats fit in
// 200 KiB (then one block per SM, still far ahead of L1 reads); beyond, x is read through L1 (float4).
// Warp-shuffle reduction, fixed order.
// Grid: one warp per RW rows, 8 warps per block. No workspace, no allocation: capturable in a CUDA graph.
// Cost: ~3 instructions per code to decode + n FMAs. One token reaches 37–65 % of copy bandwidth on Llama-8B
// shapes (Q6_K 41 %, Q8_0 63 %). Nsight Compute now shows few eligible warps (occupancy 22–25 %: registers, x in
// shared memory) waiting mostly on the shared-memory x reads; coalesced weight loads, deeper prefetch, split K and
// x read ahead into registers were tried and did not pay (bench/results/2026-12-01-h200-ggml-smem-x.md). Larger n
// is compute-bound (a tensor-core path like linear_gemv_q.cu would be the next step).
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "core/env.h"
#include "ops/linear/linear_cuda.h"
#include "ops/linear/linear_gemv_ggml.cuh"
#include "quant/ggml_type.h"

namespace ember::cuda::detail {
namespace {

using namespace ggml;
constexpr int kWarps = 8, kThreads = 32 * kWarps;

template <class T, int NT, bool SX>
__global__ void __launch_bounds__(kThreads) gemv_ggml_kernel(const GArgs a0) {
    extern __shared__ float4 xs4[];  // SX: x padded (GArgs::xs)
    GArgs a = a0;
    if constexpr (SX) {  // stage x once per block, 4 pad floats after every 2^PAD_SHIFT columns
        float* xs = reinterpret_cast<float*>(xs4);
        const int stride = a.K + ((a.K >> T::PAD_SHIFT) << 2);
        for (int t = 0; t < a.n; ++t)
            for (int c = 4 * int(threadIdx.x); c < a.K; c += 4 * kThreads)
                *reinterpret_cast<float4*>(xs + t * stride + c + ((c >> T::PAD_SHIFT) << 2)) =
                    ldx4(a.x + int64_t(t) * a.K + c, a.x_aligned);
        __syncthreads();
        a.xs = xs, a.pad_shift = T::PAD_SHIFT, a.xs_stride = stride;
    }
    const int lane = threadIdx.x & 31;
    // Row groups of RW rows, one per warp; a block's warps walk the groups with the grid's stride (SX grids are
    // capped at the resident blocks so that x is staged once per resident block).
    for (int64_t r0 = (int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * RW; r0 < a.rows;
         r0 += int64_t(gridDim.x) * kWarps * RW) {
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
            T::template unit<NT, SX>(a, u / T::UPB, u % T::UPB, cur, acc);
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
}

// x in shared memory when it fits in kMaxSmemX bytes (padded); EMBER_GGML_SMEM_X=0 turns it off.
constexpr int kMaxSmemX = 200 * 1024;
bool smem_x_enabled() {
    static const bool on = !env_off("EMBER_GGML_SMEM_X");
    return on;
}

template <class T, int NT>
void launch_sx(const GArgs& a, size_t smem, unsigned blocks, cudaStream_t st) {
    auto k = gemv_ggml_kernel<T, NT, true>;
    static int sms = 0;
    if (sms == 0) {
        int dev = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmemX));
    }
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, kThreads, smem));
    const unsigned cap = unsigned(std::max(1, per_sm) * sms);
    k<<<std::min(blocks, cap), kThreads, smem, st>>>(a);
}

template <class T>
void launch_n(const GArgs& a, cudaStream_t st) {
    const unsigned blocks = unsigned((a.rows + kWarps * RW - 1) / (kWarps * RW));
    const size_t smem = size_t(a.n) * size_t(a.K + ((a.K >> T::PAD_SHIFT) << 2)) * sizeof(float);
    if (smem <= size_t(kMaxSmemX) && smem_x_enabled()) {
        if (a.n <= 1) launch_sx<T, 1>(a, smem, blocks, st);
        else if (a.n <= 2) launch_sx<T, 2>(a, smem, blocks, st);
        else if (a.n <= 4) launch_sx<T, 4>(a, smem, blocks, st);
        else launch_sx<T, 8>(a, smem, blocks, st);
        return;
    }
    if (a.n <= 1) gemv_ggml_kernel<T, 1, false><<<blocks, kThreads, 0, st>>>(a);
    else if (a.n <= 2) gemv_ggml_kernel<T, 2, false><<<blocks, kThreads, 0, st>>>(a);
    else if (a.n <= 4) gemv_ggml_kernel<T, 4, false><<<blocks, kThreads, 0, st>>>(a);
    else gemv_ggml_kernel<T, 8, false><<<blocks, kThreads, 0, st>>>(a);
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
