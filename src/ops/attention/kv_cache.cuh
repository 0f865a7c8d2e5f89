// ops/attention/kv_cache.cuh: element access of the attention KV cache, fp32 or bf16 (GatedAttentionDims::kv_bf16).
// The kernels are templated on the element type KvT (float or __nv_bfloat16): a row is written element by
// element (bf16: round to nearest even, as f32_to_bf16 in core/dtype.h) and read four elements at a time
// (16 bytes of fp32 or 8 bytes of bf16, widened to a float4 exactly).
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace ember::cuda {

__device__ __forceinline__ void kv_store(float* p, float x) { *p = x; }
__device__ __forceinline__ void kv_store(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

// Elements [4·i4, 4·i4 + 4) of p (p 16-byte aligned for fp32, 8-byte for bf16).
__device__ __forceinline__ float4 kv_load4(const float* p, int64_t i4) { return reinterpret_cast<const float4*>(p)[i4]; }
// bf16: the raw 8 bytes (to keep loads in flight across other work) and their exact widening.
__device__ __forceinline__ uint2 kv_raw4(const __nv_bfloat16* p, int64_t i4) { return reinterpret_cast<const uint2*>(p)[i4]; }
__device__ __forceinline__ float4 kv_widen4(uint2 u) {
    return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
                       __uint_as_float(u.y & 0xffff0000u));
}
__device__ __forceinline__ float4 kv_load4(const __nv_bfloat16* p, int64_t i4) { return kv_widen4(kv_raw4(p, i4)); }

}  // namespace ember::cuda
