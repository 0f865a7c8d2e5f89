// CUDA SwiGLU (spec: activation_cuda.h): grid-stride elementwise kernels, float4 body; programmatic dependent
// launches (pdl.cuh).
#include "ops/activation/activation_cuda.h"

#include <cstdint>

#include "backend/cuda/pdl.cuh"
#include "core/check.h"

namespace ember::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // grid-stride beyond this (≈ 30 blocks per SM on an H200)

// silu(g) · u with torch's CPU formula g / (1 + e^−g): expf then IEEE division; the product is not fused.
__device__ __forceinline__ float swiglu1(float g, float u) { return __fmul_rn(g / (1.0f + expf(-g)), u); }

__device__ __forceinline__ float4 swiglu4(float4 g, float4 u) {
    return make_float4(swiglu1(g.x, u.x), swiglu1(g.y, u.y), swiglu1(g.z, u.z), swiglu1(g.w, u.w));
}

__global__ void swiglu_vec4(const float4* gate, const float4* up, float4* out, int64_t n4) {
    pdl_trigger();
    pdl_wait();
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n4; i += int64_t(gridDim.x) * blockDim.x)
        out[i] = swiglu4(gate[i], up[i]);
}

__global__ void swiglu_scalar(const float* gate, const float* up, float* out, int64_t n) {
    pdl_trigger();
    pdl_wait();
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
        out[i] = swiglu1(gate[i], up[i]);
}

// gu [rows, 2·I4] in float4 units → out [rows, I4]
__global__ void swiglu_fused_vec4(const float4* gu, float4* out, int64_t rows, int64_t I4) {
    pdl_trigger();
    pdl_wait();
    const int64_t total = rows * I4;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / I4, j = i - r * I4;
        const float4* row = gu + r * 2 * I4;
        out[i] = swiglu4(row[j], row[I4 + j]);
    }
}

__global__ void swiglu_fused_scalar(const float* gu, float* out, int64_t rows, int64_t I) {
    pdl_trigger();
    pdl_wait();
    const int64_t total = rows * I;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
         i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / I, j = i - r * I;
        const float* row = gu + r * 2 * I;
        out[i] = swiglu1(row[j], row[I + j]);
    }
}

unsigned blocks_for(int64_t items) {
    int64_t b = (items + kThreads - 1) / kThreads;
    return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

void swiglu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
    EMBER_CHECK(n >= 0, "swiglu: n=%lld", (long long)n);
    if (n == 0) return;
    if (aligned16(gate) && aligned16(up) && aligned16(out)) {
        const int64_t n4 = n / 4;
        if (n4 > 0)
            launch_pdl(swiglu_vec4, dim3(blocks_for(n4)), dim3(kThreads), 0, stream, 0,
                       reinterpret_cast<const float4*>(gate), reinterpret_cast<const float4*>(up),
                       reinterpret_cast<float4*>(out), n4);
        if (n % 4)
            launch_pdl(swiglu_scalar, dim3(1), dim3(32), 0, stream, 0, gate + 4 * n4, up + 4 * n4, out + 4 * n4,
                       n % 4);
    } else {
        launch_pdl(swiglu_scalar, dim3(blocks_for(n)), dim3(kThreads), 0, stream, 0, gate, up, out, n);
    }
}

void swiglu_fused(const float* gu, float* out, int64_t rows, int64_t I, cudaStream_t stream) {
    EMBER_CHECK(rows >= 0 && I > 0, "swiglu_fused: rows=%lld I=%lld", (long long)rows, (long long)I);
    if (rows == 0) return;
    if (I % 4 == 0 && aligned16(gu) && aligned16(out)) {
        const int64_t I4 = I / 4;
        launch_pdl(swiglu_fused_vec4, dim3(blocks_for(rows * I4)), dim3(kThreads), 0, stream, 0,
                   reinterpret_cast<const float4*>(gu), reinterpret_cast<float4*>(out), rows, I4);
    } else {
        launch_pdl(swiglu_fused_scalar, dim3(blocks_for(rows * I)), dim3(kThreads), 0, stream, 0, gu, out, rows, I);
    }
}

}  // namespace ember::cuda
