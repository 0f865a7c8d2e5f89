// ops/linear/linear_gemv_prologue.cuh: the decode fusions' x prologue shared by the streaming GEMVs
// (linear_gemv_q.cu, linear_gemv_stream.cu; semantics: linear_cuda.h LinearFusion): x' = x · inv · norm_w
// (RMSNorm, inv per token from rms_factors) or x' = silu(gate) · up (SwiGLU, x rows [gate K | up K]).
#pragma once
#include <cstdint>

namespace ember::cuda::detail {

enum { PRE_NONE = 0, PRE_RMSNORM = 1, PRE_SWIGLU = 2 };

struct XPrologue {
    const float* x;       // [n, xstride]
    const float* norm_w;  // PRE_RMSNORM
    float eps;
    int n, K, xstride, pre;
    int aligned;          // x (and norm_w) 16-byte aligned: vector loads
};

// silu(g)·u exactly as ops/activation/activation.cu computes it (expf, IEEE division, unfused product).
__device__ __forceinline__ float swiglu1(float g, float u) { return __fmul_rn(g / (1.0f + expf(-g)), u); }

// CPW consecutive raw values of token row xt from column col0.
template <int CPW>
__device__ __forceinline__ void load_raw(const XPrologue& p, const float* xt, int col0, float* v) {
    if (p.aligned) {
#pragma unroll
        for (int i = 0; i < CPW; i += 4) {
            const float4 q = __ldg(reinterpret_cast<const float4*>(xt + col0 + i));
            v[i] = q.x, v[i + 1] = q.y, v[i + 2] = q.z, v[i + 3] = q.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < CPW; ++i) v[i] = __ldg(xt + col0 + i);
    }
}

// The RMSNorm prologue without its factor (x · norm_w; the caller scales the sums by inv afterwards, so the x it
// stages needs no norm pass before): CPW values, and Σx² of the raw values added to ss.
template <int CPW>
__device__ __forceinline__ void load_x_normw(const XPrologue& p, const float* xt, int col0, float* v, float& ss) {
    load_raw<CPW>(p, xt, col0, v);
#pragma unroll
    for (int i = 0; i < CPW; ++i) ss = fmaf(v[i], v[i], ss);
#pragma unroll
    for (int i = 0; i < CPW; ++i) v[i] = v[i] * __ldg(p.norm_w + col0 + i);
}

// CPW consecutive values of x' for token row xt (of p.xstride floats) from column col0, with the prologue.
template <int CPW>
__device__ __forceinline__ void load_x(const XPrologue& p, const float* xt, int col0, float inv, float* v) {
    load_raw<CPW>(p, xt, col0, v);
    if (p.pre == PRE_RMSNORM) {
#pragma unroll
        for (int i = 0; i < CPW; ++i) v[i] = v[i] * inv * __ldg(p.norm_w + col0 + i);  // add_rmsnorm's op order
    } else if (p.pre == PRE_SWIGLU) {
#pragma unroll
        for (int i = 0; i < CPW; ++i) v[i] = swiglu1(v[i], __ldg(xt + p.K + col0 + i));
    }
}

// RMSNorm factors 1/sqrt(mean(x²) + eps) of the n ≤ 8 token rows into inv[0..n), by the whole block: every
// thread loads its few columns of every token at once (one round trip to L2, not K/32 dependent ones per warp),
// then per-token sums over the warps through shared memory (red: warps × 8 floats). Ends with a barrier.
__device__ __forceinline__ void rms_factors(const XPrologue& p, float* inv, float* red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nthr = int(blockDim.x), nw = nthr / 32;
    const bool vec = p.aligned && p.K % 4 == 0;
    for (int tok = 0; tok < p.n; ++tok) {
        const float* xt = p.x + int64_t(tok) * p.xstride;
        float ss = 0.f;
        if (vec) {
            for (int c = 4 * int(threadIdx.x); c < p.K; c += 4 * nthr) {
                const float4 v = *reinterpret_cast<const float4*>(xt + c);
                ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
            }
        } else {
            for (int c = int(threadIdx.x); c < p.K; c += nthr) ss += xt[c] * xt[c];
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (lane == 0) red[warp * 8 + tok] = ss;
    }
    __syncthreads();
    if (warp == 0 && lane < p.n) {
        float ss = 0.f;
        for (int w = 0; w < nw; ++w) ss += red[w * 8 + lane];  // fixed order: deterministic
        inv[lane] = 1.0f / sqrtf(ss / static_cast<float>(p.K) + p.eps);
    }
    __syncthreads();
}

}  // namespace ember::cuda::detail
