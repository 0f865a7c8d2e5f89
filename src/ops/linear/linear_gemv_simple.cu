// ops/linear/linear_gemv_simple.cu: fp32 CUDA-core GEMV (n ≤ 8 tokens) for dense f32/f16/bf16 weights, and a
// plain any-bit-width affine fallback (bits 2/3/5/6, or pointers the tensor-core kernel cannot take).
//
// Dense: one warp per 4 rows (x is read from L1/L2 once per 4 rows), 16-byte weight loads when the rows are
// 16-byte aligned (else scalar), fp32 FMAs, warp-shuffle reduction. Dense weights are 2-4 bytes per element,
// so even n = 8 FMAs per element stay below the issue limit: memory-bound like the quantized kernel.
// Generic affine: one warp per row, one code per lane per step (affine_get on the device), w = s·q + b in fp32
// as in quant/affine.h. Correct for every format; not tuned.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "ops/linear/linear_cuda.h"

namespace ember::cuda::detail {
namespace {

constexpr int kWarps = 8, kThreads = 32 * kWarps;

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }

// 16 bytes of weights → V floats.
template <class WT, int V>
__device__ __forceinline__ void load_w(const WT* p, float (&w)[V]) {
    if constexpr (V == 1) {
        w[0] = to_f(p[0]);
    } else {
        const uint4 q = __ldg(reinterpret_cast<const uint4*>(p));
        const WT* e = reinterpret_cast<const WT*>(&q);
#pragma unroll
        for (int v = 0; v < V; ++v) w[v] = to_f(e[v]);
    }
}

template <int V>
__device__ __forceinline__ void load_x(const float* p, float (&x)[V]) {
    if constexpr (V == 1) {
        x[0] = __ldg(p);
    } else {
#pragma unroll
        for (int v = 0; v < V; v += 4) {
            const float4 q = __ldg(reinterpret_cast<const float4*>(p + v));
            x[v] = q.x, x[v + 1] = q.y, x[v + 2] = q.z, x[v + 3] = q.w;
        }
    }
}

// W [rows, K] (WT), x [NT, K], y [NT, rows]. Warp w of block b: rows (b·8 + w)·RW .. +RW.
template <class WT, int NT, bool VEC>
__global__ void __launch_bounds__(kThreads) gemv_dense_kernel(const WT* __restrict__ W, const float* __restrict__ x,
                                                              float* __restrict__ y, int64_t rows, int64_t K) {
    constexpr int RW = 4;
    constexpr int V = VEC ? 16 / int(sizeof(WT)) : 1;
    const int lane = threadIdx.x & 31;
    const int64_t r0 = (int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * RW;
    if (r0 >= rows) return;
    float acc[RW][NT] = {};
    for (int64_t c = int64_t(lane) * V; c < K; c += 32 * V) {
        float w[RW][V];
#pragma unroll
        for (int rr = 0; rr < RW; ++rr) load_w<WT, V>(W + min(r0 + rr, rows - 1) * K + c, w[rr]);
#pragma unroll
        for (int k = 0; k < NT; ++k) {
            float xv[V];
            load_x<V>(x + k * K + c, xv);
#pragma unroll
            for (int rr = 0; rr < RW; ++rr)
#pragma unroll
                for (int v = 0; v < V; ++v) acc[rr][k] = fmaf(w[rr][v], xv[v], acc[rr][k]);
        }
    }
#pragma unroll
    for (int rr = 0; rr < RW; ++rr)
#pragma unroll
        for (int k = 0; k < NT; ++k) {
            float s = acc[rr][k];
#pragma unroll
            for (int m = 16; m > 0; m >>= 1) s += __shfl_xor_sync(0xffffffffu, s, m);
            if (lane == (rr * NT + k) % 32 && r0 + rr < rows) y[k * rows + r0 + rr] = s;
        }
}

// Any bit width 2..8, any group size, any alignment: w = s·q + b (fp32, two roundings), fp32 accumulation.
template <class ST>
__global__ void __launch_bounds__(kThreads) gemv_affine_generic_kernel(const uint32_t* __restrict__ Wq,
                                                                       const ST* __restrict__ S,
                                                                       const ST* __restrict__ B,
                                                                       const float* __restrict__ x,
                                                                       float* __restrict__ y, int64_t rows,
                                                                       int64_t K, int bits, int gs, int n) {
    const int lane = threadIdx.x & 31;
    const int64_t r = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
    if (r >= rows) return;
    const int64_t words = K * bits / 32, ng = K / gs;
    const uint32_t* row = Wq + r * words;
    const uint32_t mask = (1u << bits) - 1u;
    float acc[8] = {};
    for (int64_t c = lane; c < K; c += 32) {
        const int64_t bit = c * bits;
        const int sh = int(bit & 31);
        uint32_t v = row[bit >> 5] >> sh;
        if (sh + bits > 32) v |= row[(bit >> 5) + 1] << (32 - sh);
        const float q = float(v & mask);
        const int64_t gi = r * ng + c / gs;
        const float w = __fadd_rn(__fmul_rn(to_f(S[gi]), q), to_f(B[gi]));
#pragma unroll
        for (int k = 0; k < 8; ++k)
            if (k < n) acc[k] = fmaf(w, x[k * K + c], acc[k]);
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        if (k >= n) break;
        float s = acc[k];
#pragma unroll
        for (int m = 16; m > 0; m >>= 1) s += __shfl_xor_sync(0xffffffffu, s, m);
        if (lane == 0) y[k * rows + r] = s;
    }
}

template <class WT, bool VEC>
void dense_n(const Weight& W, const float* x, int n, float* y, cudaStream_t st) {
    const unsigned blocks = unsigned((W.rows + kWarps * 4 - 1) / (kWarps * 4));
    const WT* w = static_cast<const WT*>(W.data);
    switch (n) {
#define EMBER_DENSE_CASE(N) \
    case N: gemv_dense_kernel<WT, N, VEC><<<blocks, kThreads, 0, st>>>(w, x, y, W.rows, W.cols); break;
        EMBER_DENSE_CASE(1) EMBER_DENSE_CASE(2) EMBER_DENSE_CASE(3) EMBER_DENSE_CASE(4)
        EMBER_DENSE_CASE(5) EMBER_DENSE_CASE(6) EMBER_DENSE_CASE(7) EMBER_DENSE_CASE(8)
#undef EMBER_DENSE_CASE
        default: EMBER_ABORT("gemv_dense: n=%d", n);
    }
}

template <class WT>
void dense_t(const Weight& W, const float* x, int n, float* y, cudaStream_t st) {
    const bool vec = (reinterpret_cast<uintptr_t>(W.data) & 15u) == 0 && (reinterpret_cast<uintptr_t>(x) & 15u) == 0 &&
                     (W.cols * int64_t(sizeof(WT))) % 16 == 0;
    if (vec) dense_n<WT, true>(W, x, n, y, st);
    else dense_n<WT, false>(W, x, n, y, st);
}

}  // namespace

void gemv_dense(const Weight& W, const float* x, int n, float* y, cudaStream_t stream) {
    EMBER_CHECK(W.format == WeightFormat::DENSE && n >= 1 && n <= 8, "gemv_dense: n=%d", n);
    switch (W.dtype) {
        case DType::F32: dense_t<float>(W, x, n, y, stream); break;
        case DType::F16: dense_t<__half>(W, x, n, y, stream); break;
        case DType::BF16: dense_t<__nv_bfloat16>(W, x, n, y, stream); break;
        default: EMBER_ABORT("gemv_dense: dtype %s", dtype_name(W.dtype));
    }
    CUDA_CHECK(cudaGetLastError());
}

void gemv_affine_generic(const Weight& W, const float* x, int n, float* y, cudaStream_t stream) {
    EMBER_CHECK(W.format == WeightFormat::AFFINE && n >= 1 && n <= 8, "gemv_affine_generic: n=%d", n);
    const unsigned blocks = unsigned((W.rows + kWarps - 1) / kWarps);
    const auto* q = static_cast<const uint32_t*>(W.data);
    switch (W.sb_dtype) {
        case DType::F32:
            gemv_affine_generic_kernel<float><<<blocks, kThreads, 0, stream>>>(
                q, static_cast<const float*>(W.scales), static_cast<const float*>(W.biases), x, y, W.rows, W.cols,
                W.bits, W.group_size, n);
            break;
        case DType::F16:
            gemv_affine_generic_kernel<__half><<<blocks, kThreads, 0, stream>>>(
                q, static_cast<const __half*>(W.scales), static_cast<const __half*>(W.biases), x, y, W.rows, W.cols,
                W.bits, W.group_size, n);
            break;
        case DType::BF16:
            gemv_affine_generic_kernel<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(
                q, static_cast<const __nv_bfloat16*>(W.scales), static_cast<const __nv_bfloat16*>(W.biases), x, y,
                W.rows, W.cols, W.bits, W.group_size, n);
            break;
        default: EMBER_ABORT("gemv_affine_generic: scale dtype %s", dtype_name(W.sb_dtype));
    }
    CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::detail
