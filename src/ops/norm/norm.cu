// CUDA fused residual add + RMSNorm (spec: norm_cuda.h): one block per row, the row held in registers; a
// programmatic dependent launch (pdl.cuh).
#include "ops/norm/norm_cuda.h"

#include <cstdint>

#include "backend/cuda/pdl.cuh"
#include "core/check.h"

namespace ember::cuda {

namespace {

template <int VEC>
struct alignas(4 * VEC) Vec {
    float v[VEC];
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Sum over the block; every thread gets the total. s[32] carries the result so a later call cannot overwrite
// it before all threads have read it.
__device__ float block_sum(float v) {
    __shared__ float s[33];
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    v = warp_sum(v);
    if (l == 0) s[w] = v;
    __syncthreads();
    if (w == 0) {
        const int nw = (blockDim.x + 31) >> 5;
        v = warp_sum(l < nw ? s[l] : 0.f);
        if (l == 0) s[32] = v;
    }
    __syncthreads();
    return s[32];
}

// Row r = blockIdx.x. Thread t owns vectors t + k·blockDim (k < K), kept in registers between the sum and the
// scaling. K == 0: any row length, the row is re-read (L1/L2) in the second pass.
template <int VEC, int K>
__global__ void __launch_bounds__(1024) add_rmsnorm_kernel(float* x, const float* y, const float* w, float* out,
                                                           int64_t H, float eps) {
    pdl_trigger();
    pdl_wait();  // x, y are earlier kernels' outputs
    using V = Vec<VEC>;
    const int64_t nv = H / VEC;
    V* xr = reinterpret_cast<V*>(x + blockIdx.x * H);
    const V* yr = y ? reinterpret_cast<const V*>(y + blockIdx.x * H) : nullptr;
    const V* wr = reinterpret_cast<const V*>(w);
    V* outr = reinterpret_cast<V*>(out + blockIdx.x * H);

    float ss = 0.f;
    if constexpr (K > 0) {
        V cache[K];
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
            if (i < nv) {
                V a = xr[i];
                if (yr) {
                    const V b = yr[i];
#pragma unroll
                    for (int j = 0; j < VEC; ++j) a.v[j] = a.v[j] + b.v[j];
                    xr[i] = a;
                }
#pragma unroll
                for (int j = 0; j < VEC; ++j) ss += a.v[j] * a.v[j];
                cache[k] = a;
            }
        }
        const float inv = 1.0f / sqrtf(block_sum(ss) / static_cast<float>(H) + eps);
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int64_t i = threadIdx.x + int64_t(k) * blockDim.x;
            if (i < nv) {
                const V wv = wr[i];
                V o;
#pragma unroll
                for (int j = 0; j < VEC; ++j) o.v[j] = cache[k].v[j] * inv * wv.v[j];
                outr[i] = o;
            }
        }
    } else {
        for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
            V a = xr[i];
            if (yr) {
                const V b = yr[i];
#pragma unroll
                for (int j = 0; j < VEC; ++j) a.v[j] = a.v[j] + b.v[j];
                xr[i] = a;
            }
#pragma unroll
            for (int j = 0; j < VEC; ++j) ss += a.v[j] * a.v[j];
        }
        const float inv = 1.0f / sqrtf(block_sum(ss) / static_cast<float>(H) + eps);
        for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
            const V a = xr[i], wv = wr[i];  // this thread's own write above (or the input when y is null)
            V o;
#pragma unroll
            for (int j = 0; j < VEC; ++j) o.v[j] = a.v[j] * inv * wv.v[j];
            outr[i] = o;
        }
    }
}

template <int VEC>
void launch(float* x, const float* y, const float* w, float* out, int64_t n, int64_t H, float eps, cudaStream_t st) {
    const int64_t nv = H / VEC;
    // Smallest K that keeps the block at ≤ 256 threads; rows longer than 16 · 256 vectors use the re-read path.
    int K = 1;
    while (K < 16 && (nv + K - 1) / K > 256) K *= 2;
    if ((nv + K - 1) / K > 256) K = 0;
    const int threads = K == 0 ? 1024 : static_cast<int>(((nv + K - 1) / K + 31) / 32 * 32);
    const dim3 grid(static_cast<unsigned>(n));
    auto* kernel = K == 1    ? add_rmsnorm_kernel<VEC, 1>
                   : K == 2  ? add_rmsnorm_kernel<VEC, 2>
                   : K == 4  ? add_rmsnorm_kernel<VEC, 4>
                   : K == 8  ? add_rmsnorm_kernel<VEC, 8>
                   : K == 16 ? add_rmsnorm_kernel<VEC, 16>
                             : add_rmsnorm_kernel<VEC, 0>;
    launch_pdl(kernel, grid, dim3(threads), 0, st, 0, x, y, w, out, H, eps);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

void add_rmsnorm(float* x, const float* y, const float* w, float* out, int64_t n, int64_t H, float eps,
                 cudaStream_t stream) {
    EMBER_CHECK(n >= 0 && n <= INT32_MAX && H > 0, "add_rmsnorm: n=%lld H=%lld", (long long)n, (long long)H);
    EMBER_CHECK(!(y && out == x), "add_rmsnorm: out must not alias x when y is given");
    if (n == 0) return;
    const bool vec4 = H % 4 == 0 && aligned16(x) && aligned16(w) && aligned16(out) && (!y || aligned16(y));
    if (vec4)
        launch<4>(x, y, w, out, n, H, eps, stream);
    else
        launch<1>(x, y, w, out, n, H, eps, stream);
}

void rmsnorm(const float* x, const float* w, float* out, int64_t n, int64_t H, float eps, cudaStream_t stream) {
    // With y == null the kernel never writes x; out == x (in place) is fine: each thread reads its elements
    // before writing them.
    add_rmsnorm(const_cast<float*>(x), nullptr, w, out, n, H, eps, stream);
}

}  // namespace ember::cuda
