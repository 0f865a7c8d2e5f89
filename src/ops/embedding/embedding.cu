// CUDA embedding gather (spec: embedding_cuda.h): one block per token; dense rows in 16-byte chunks,
// affine rows decoded code by code from the LSB-first bit stream (quant/affine.h), GGML rows element by element
// from their blocks (quant/ggml_blocks.h: the same fp32 operations in the same order, no FMA).
#include "ops/embedding/embedding_cuda.h"

#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "core/check.h"
#include "quant/affine.h"
#include "quant/ggml_type.h"

namespace ember::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float bf16_bits_to_f32(uint32_t h) { return __uint_as_float(h << 16); }
__device__ __forceinline__ float f16_bits_to_f32(uint32_t h) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
}

// Element i of a float tensor of type t (F32 / F16 / BF16), as ember::load_float.
__device__ __forceinline__ float load_any(const void* p, DType t, int64_t i) {
    switch (t) {
        case DType::F32: return static_cast<const float*>(p)[i];
        case DType::BF16: return bf16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
        default: return f16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    }
}

__device__ __forceinline__ bool bad_id(int32_t id, int64_t rows) { return id < 0 || int64_t(id) >= rows; }

// Any dense float type, element by element.
__global__ void embed_dense_scalar(const void* W, DType t, const int32_t* ids, int64_t rows, int64_t cols,
                                   float* out) {
    pdl_trigger();  // the first GEMV may prefetch its weights
    const int32_t id = ids[blockIdx.x];
    float* o = out + int64_t(blockIdx.x) * cols;
    const bool bad = bad_id(id, rows);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) o[c] = bad ? __int_as_float(0x7fc00000) : load_any(W, t, int64_t(id) * cols + c);
}

// 16-byte chunks: F32 → 4 values, F16/BF16 → 8 values per chunk. Rows are a whole number of chunks and both
// W and out are 16-byte aligned (checked by the launcher).
template <int kEl>  // bytes per element: 4 (F32) or 2 (F16/BF16)
__global__ void embed_dense_vec(const uint4* W, bool is_bf16, const int32_t* ids, int64_t rows, int64_t chunks,
                                float4* out) {
    pdl_trigger();
    constexpr int kPer = 16 / kEl;  // values per chunk
    const int32_t id = ids[blockIdx.x];
    float4* o = out + int64_t(blockIdx.x) * chunks * (kPer / 4);
    if (bad_id(id, rows)) {
        const float nan = __int_as_float(0x7fc00000);
        for (int64_t c = threadIdx.x; c < chunks * (kPer / 4); c += blockDim.x) o[c] = make_float4(nan, nan, nan, nan);
        return;
    }
    const uint4* row = W + int64_t(id) * chunks;
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
        const uint4 u = row[c];
        if constexpr (kEl == 4) {
            o[c] = make_float4(__uint_as_float(u.x), __uint_as_float(u.y), __uint_as_float(u.z), __uint_as_float(u.w));
        } else {
            const uint32_t w[4] = {u.x, u.y, u.z, u.w};
            float f[8];
#pragma unroll
            for (int j = 0; j < 4; ++j) {  // little-endian: element 2j in the low half
                f[2 * j] = is_bf16 ? bf16_bits_to_f32(w[j] & 0xffffu) : f16_bits_to_f32(w[j] & 0xffffu);
                f[2 * j + 1] = is_bf16 ? bf16_bits_to_f32(w[j] >> 16) : f16_bits_to_f32(w[j] >> 16);
            }
            o[2 * c] = make_float4(f[0], f[1], f[2], f[3]);
            o[2 * c + 1] = make_float4(f[4], f[5], f[6], f[7]);
        }
    }
}

// MLX affine: w[c] = s_g · q[c] + b_g in fp32, product rounded before the add (no FMA), as the CPU reference.
__global__ void embed_affine(const uint32_t* W, const void* scales, const void* biases, DType sbt, int bits,
                             int group_size, const int32_t* ids, int64_t rows, int64_t cols, float* out) {
    pdl_trigger();
    const int32_t id = ids[blockIdx.x];
    float* o = out + int64_t(blockIdx.x) * cols;
    if (bad_id(id, rows)) {
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) o[c] = __int_as_float(0x7fc00000);
        return;
    }
    const int64_t ng = cols / group_size;
    const uint32_t* row = W + int64_t(id) * (cols * bits / 32);
    const uint32_t mask = (1u << bits) - 1u;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
        const int64_t bit = c * bits;
        const int sh = static_cast<int>(bit & 31);
        uint32_t v = row[bit >> 5] >> sh;
        if (sh + bits > 32) v |= row[(bit >> 5) + 1] << (32 - sh);  // code straddles two words (bits 3, 5, 6)
        const int64_t g = int64_t(id) * ng + c / group_size;
        const float s = load_any(scales, sbt, g), b = load_any(biases, sbt, g);
        o[c] = __fadd_rn(__fmul_rn(s, static_cast<float>(v & mask)), b);
    }
}

__device__ __forceinline__ float f16_at(const uint8_t* p) { return f16_bits_to_f32(uint32_t(p[0]) | uint32_t(p[1]) << 8); }

// Element e of one GGML block b (quant/ggml_blocks.h; blocks are only 2-byte aligned: bytes are read singly).
__device__ float ggml_element(GgmlType t, const uint8_t* b, int e) {
    switch (t) {
        case GgmlType::Q4_0: {
            const int q = e < 16 ? (b[2 + e] & 15) : (b[2 + e - 16] >> 4);
            return __fmul_rn(f16_at(b), static_cast<float>(q - 8));
        }
        case GgmlType::Q4_1: {
            const int q = e < 16 ? (b[4 + e] & 15) : (b[4 + e - 16] >> 4);
            return __fadd_rn(__fmul_rn(f16_at(b), static_cast<float>(q)), f16_at(b + 2));
        }
        case GgmlType::Q5_0: {
            const int nib = e < 16 ? (b[6 + e] & 15) : (b[6 + e - 16] >> 4);
            const int q = nib | ((b[2 + e / 8] >> (e % 8)) & 1) << 4;  // bit e of the little-endian u32 qh
            return __fmul_rn(f16_at(b), static_cast<float>(q - 16));
        }
        case GgmlType::Q8_0: return __fmul_rn(f16_at(b), static_cast<float>(static_cast<int8_t>(b[2 + e])));
        case GgmlType::Q4_K:
        case GgmlType::Q5_K: {
            const bool k5 = t == GgmlType::Q5_K;
            const int s = e / 32, l = e % 32;
            const uint8_t* sc12 = b + 4;
            const int sc = s < 4 ? (sc12[s] & 63) : ((sc12[s + 4] & 15) | (sc12[s - 4] >> 6) << 4);
            const int mn = s < 4 ? (sc12[s + 4] & 63) : ((sc12[s + 4] >> 4) | (sc12[s] >> 6) << 4);
            int q = (b[(k5 ? 48 : 16) + 32 * (s / 2) + l] >> ((s & 1) * 4)) & 15;
            if (k5) q |= ((b[16 + l] >> s) & 1) << 4;
            const float ds = __fmul_rn(f16_at(b), static_cast<float>(sc));
            const float dm = __fmul_rn(f16_at(b + 2), static_cast<float>(mn));
            return __fsub_rn(__fmul_rn(ds, static_cast<float>(q)), dm);
        }
        case GgmlType::Q6_K: {
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            const uint8_t byte = b[64 * h + 32 * (k & 1) + l];
            const int q = (k >= 2 ? byte >> 4 : byte & 15) | ((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4;
            const float ds = __fmul_rn(f16_at(b + 208), static_cast<float>(static_cast<int8_t>(b[192 + e / 16])));
            return __fmul_rn(ds, static_cast<float>(q - 32));
        }
        default: return __int_as_float(0x7fc00000);  // (the launcher admits only the types above)
    }
}

// GGML block rows: element c of row id from block c / be (be elements, bb bytes per block).
__global__ void embed_ggml(const uint8_t* W, GgmlType t, int be, int bb, const int32_t* ids, int64_t rows,
                           int64_t cols, float* out) {
    pdl_trigger();
    const int32_t id = ids[blockIdx.x];
    float* o = out + int64_t(blockIdx.x) * cols;
    const bool bad = bad_id(id, rows);
    const uint8_t* row = W + (bad ? 0 : int64_t(id)) * (cols / be) * bb;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
        o[c] = bad ? __int_as_float(0x7fc00000) : ggml_element(t, row + (c / be) * bb, static_cast<int>(c % be));
}

bool ggml_gather_type(GgmlType t) {
    return t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_0 || t == GgmlType::Q8_0 ||
           t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

void embed_rows(const Weight& W, const int32_t* ids, int64_t n, float* out, cudaStream_t stream) {
    EMBER_CHECK(!W.empty() && W.rows > 0 && W.cols > 0, "embed_rows: empty weight");
    EMBER_CHECK(n >= 0 && n <= INT32_MAX, "embed_rows: n=%lld", (long long)n);
    if (n == 0) return;
    const dim3 grid(static_cast<unsigned>(n));
    if (W.format == WeightFormat::AFFINE) {
        EMBER_CHECK(affine_params_valid(W.bits, W.group_size) && W.cols % W.group_size == 0 && W.scales &&
                        W.biases && dtype_is_float(W.sb_dtype),
                    "embed_rows: bad affine weight (bits %d, group %d, cols %lld)", W.bits, W.group_size,
                    (long long)W.cols);
        embed_affine<<<grid, kThreads, 0, stream>>>(static_cast<const uint32_t*>(W.data), W.scales, W.biases,
                                                    W.sb_dtype, W.bits, W.group_size, ids, W.rows, W.cols, out);
    } else if (W.format == WeightFormat::GGML) {
        const GgmlTypeTraits tr = ggml_type_traits(W.ggml_type);
        EMBER_CHECK(ggml_gather_type(W.ggml_type) && W.cols % tr.block_elems == 0,
                    "embed_rows: GGML type %s is not gathered on the GPU (cols %lld)", tr.name ? tr.name : "(unknown)",
                    (long long)W.cols);
        embed_ggml<<<grid, kThreads, 0, stream>>>(static_cast<const uint8_t*>(W.data), W.ggml_type, tr.block_elems,
                                                  tr.block_bytes, ids, W.rows, W.cols, out);
    } else {
        EMBER_CHECK(dtype_is_float(W.dtype), "embed_rows: dense dtype %s", dtype_name(W.dtype));
        const int64_t el = static_cast<int64_t>(dtype_size(W.dtype));
        const bool vec = (W.cols * el) % 16 == 0 && W.cols % 4 == 0 && aligned16(W.data) && aligned16(out);
        if (vec && el == 4)
            embed_dense_vec<4><<<grid, kThreads, 0, stream>>>(static_cast<const uint4*>(W.data), false, ids, W.rows,
                                                              W.cols / 4, reinterpret_cast<float4*>(out));
        else if (vec)
            embed_dense_vec<2><<<grid, kThreads, 0, stream>>>(static_cast<const uint4*>(W.data),
                                                              W.dtype == DType::BF16, ids, W.rows, W.cols / 8,
                                                              reinterpret_cast<float4*>(out));
        else
            embed_dense_scalar<<<grid, kThreads, 0, stream>>>(W.data, W.dtype, ids, W.rows, W.cols, out);
    }
    CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda
