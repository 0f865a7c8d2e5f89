// bench/gpu/bench_fill.cuh: random device data for the GPU benchmarks (hashed bits, never zeros): bytes, bf16 / f16 /
// f32 values uniform in [-amp, amp], finite fp16 d fields of GGML blocks, and a checked cudaMalloc.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_check.h"

namespace ember::bench {

__device__ __forceinline__ uint32_t hash32(uint64_t i, uint64_t seed) {
    uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return uint32_t(z ^ (z >> 31));
}
__global__ void fill_bytes(uint8_t* p, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        p[i] = uint8_t(hash32(i, seed));
}
// Uniform in [-amp, amp], stored as bf16 (u16) or f32.
__global__ void fill_bf16(uint16_t* p, size_t n, uint64_t seed, float amp) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const float v = amp * (float(hash32(i, seed) >> 8) * (2.0f / 16777216.0f) - 1.0f);
        p[i] = uint16_t(__float_as_uint(v) >> 16);
    }
}
__global__ void fill_f16(__half* p, size_t n, uint64_t seed, float amp) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        p[i] = __float2half(amp * (float(hash32(i, seed) >> 8) * (2.0f / 16777216.0f) - 1.0f));
}
__global__ void fill_f32(float* p, size_t n, uint64_t seed, float amp) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        p[i] = amp * (float(hash32(i, seed) >> 8) * (2.0f / 16777216.0f) - 1.0f);
}
// GGML blocks: the fp16 d / dmin fields at offsets o0, o1 (−1: none) of every block get finite random values.
__global__ void fix_halves(uint8_t* p, size_t nblocks, int block_bytes, int o0, int o1, uint64_t seed) {
    for (size_t b = blockIdx.x * size_t(blockDim.x) + threadIdx.x; b < nblocks; b += size_t(gridDim.x) * blockDim.x)
        for (int k = 0; k < 2; ++k) {
            const int o = k ? o1 : o0;
            if (o < 0) continue;
            const float v = 0.01f * (float(hash32(2 * b + k, seed) >> 8) * (2.0f / 16777216.0f) - 1.0f);
            const __half h = __float2half(v);
            uint8_t* q = p + b * size_t(block_bytes) + o;
            const unsigned short u = __half_as_ushort(h);
            q[0] = uint8_t(u & 0xff), q[1] = uint8_t(u >> 8);
        }
}

inline void* dmalloc(size_t b) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(b, 256)));
    return p;
}

}  // namespace ember::bench
