// ops/linear/linear_gemm_split.cu: GGML-block / dense weights × many tokens through cuBLAS bf16 with the weights and
// x split into hi + lo bf16 planes (spec, numerics and workspace: linear_gemm_split.h).
//
// Dequantization: one thread per 8 consecutive elements of a row (8 divides every block and sub-block, so the 8
// share their block, sub-block scale and code field positions); block bytes are read one at a time (GGUF blocks
// are only 2-byte aligned). Products and sums use the _rn intrinsics in the order of quant/ggml_blocks.cpp, so no
// FMA contraction changes a value: the fp32 panel equals ggml_dequantize bit for bit.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "ops/linear/cublas_thread.h"
#include "ops/linear/linear_gemm_split.h"

namespace ember::cuda {
namespace {

constexpr size_t kCublasWs = detail::kCublasWorkspace;
constexpr size_t kPanelMax = size_t(64) << 20;

size_t align256(size_t v) { return (v + 255) & ~size_t(255); }

__device__ __forceinline__ float f16_at(const uint8_t* p) {
    return __half2float(__ushort_as_half((unsigned short)(p[0] | (p[1] << 8))));
}

// The 8 values w[j0 .. j0 + 8) of the block at b (j0 % 8 == 0).
template <GgmlType T>
__device__ __forceinline__ void dq8(const uint8_t* b, int j0, float (&w)[8]) {
    if constexpr (T == GgmlType::Q4_0 || T == GgmlType::Q4_1 || T == GgmlType::Q5_0) {
        const float d = f16_at(b);
        const float m = T == GgmlType::Q4_1 ? f16_at(b + 2) : 0.f;
        const uint8_t* qs = b + (T == GgmlType::Q4_0 ? 2 : T == GgmlType::Q4_1 ? 4 : 6);
        const uint32_t qh = T == GgmlType::Q5_0 ? (uint32_t(b[2]) | uint32_t(b[3]) << 8 | uint32_t(b[4]) << 16 |
                                                   uint32_t(b[5]) << 24)
                                                : 0u;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int j = j0 + e, i = j & 15;
            int q = j < 16 ? (qs[i] & 15) : (qs[i] >> 4);
            if constexpr (T == GgmlType::Q4_0) w[e] = __fmul_rn(d, float(q - 8));
            if constexpr (T == GgmlType::Q4_1) w[e] = __fadd_rn(__fmul_rn(d, float(q)), m);
            if constexpr (T == GgmlType::Q5_0) {
                q |= int((qh >> j) & 1u) << 4;
                w[e] = __fmul_rn(d, float(q - 16));
            }
        }
    } else if constexpr (T == GgmlType::Q8_0) {
        const float d = f16_at(b);
#pragma unroll
        for (int e = 0; e < 8; ++e) w[e] = __fmul_rn(d, float(int8_t(b[2 + j0 + e])));
    } else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
        const float d = f16_at(b), dmin = f16_at(b + 2);
        const uint8_t* sc12 = b + 4;
        const uint8_t* qh = b + 16;
        const uint8_t* qs = b + (T == GgmlType::Q5_K ? 48 : 16);
        const int s = j0 / 32, c = s / 2, shift = (s & 1) * 4;
        int sc, mn;
        if (s < 4) {
            sc = sc12[s] & 63, mn = sc12[s + 4] & 63;
        } else {
            sc = (sc12[s + 4] & 15) | (sc12[s - 4] >> 6) << 4;
            mn = (sc12[s + 4] >> 4) | (sc12[s] >> 6) << 4;
        }
        const float ds = __fmul_rn(d, float(sc)), dm = __fmul_rn(dmin, float(mn));
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int l = (j0 + e) & 31;
            int q = (qs[32 * c + l] >> shift) & 15;
            if constexpr (T == GgmlType::Q5_K) q |= ((qh[l] >> s) & 1) << 4;
            w[e] = __fsub_rn(__fmul_rn(ds, float(q)), dm);
        }
    } else if constexpr (T == GgmlType::Q6_K) {
        const uint8_t* ql = b;
        const uint8_t* qh = b + 128;
        const float d = f16_at(b + 208);
        const int h = j0 / 128, k = (j0 % 128) / 32;
        const float ds = __fmul_rn(d, float(int8_t(b[192 + j0 / 16])));
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const int l = (j0 + e) & 31;
            const uint8_t byte = ql[64 * h + 32 * (k & 1) + l];
            const int q = (k >= 2 ? byte >> 4 : byte & 15) | ((qh[32 * h + l] >> (2 * k)) & 3) << 4;
            w[e] = __fmul_rn(ds, float(q - 32));
        }
    }
}

__device__ __forceinline__ float dense_at(const void* p, DType t, int64_t i) {
    if (t == DType::F32) return static_cast<const float*>(p)[i];
    if (t == DType::F16) return __half2float(static_cast<const __half*>(p)[i]);
    return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

enum Src { kDense, kAffine, kGgml };

// Rows [r0, r0 + prow) of W. SPLIT: bf16 planes [prow, 2K] (wh at [0, K), wl at [K, 2K)); else fp32 [prow, K].
// DENSE: element type W.dtype. AFFINE: w = s·q + b per group (quant/affine.h; 8 codes = `bits` whole bytes).
// GGML: block type T of BE elements in BB bytes.
template <int SRC, GgmlType T, bool SPLIT>
__global__ void dequant_rows_kernel(Weight W, int BE, int BB, int64_t r0, int64_t prow, void* __restrict__ out) {
    const int64_t K = W.cols, upr = K / 8, total = prow * upr;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t rl = i / upr, c0 = (i % upr) * 8, r = r0 + rl;
        float w[8];
        if constexpr (SRC == kDense) {
#pragma unroll
            for (int e = 0; e < 8; ++e) w[e] = dense_at(W.data, W.dtype, r * K + c0 + e);
        } else if constexpr (SRC == kAffine) {
            const uint8_t* p = static_cast<const uint8_t*>(W.data) + (r * K + c0) * W.bits / 8;
            uint64_t v = 0;
            for (int b = 0; b < W.bits; ++b) v |= uint64_t(p[b]) << (8 * b);
            const int64_t gi = r * (K / W.group_size) + c0 / W.group_size;
            const float sc = dense_at(W.scales, W.sb_dtype, gi), bi = dense_at(W.biases, W.sb_dtype, gi);
            const uint64_t mask = (uint64_t(1) << W.bits) - 1;
#pragma unroll
            for (int e = 0; e < 8; ++e) w[e] = __fadd_rn(__fmul_rn(sc, float((v >> (e * W.bits)) & mask)), bi);
        } else {
            const uint8_t* blk = static_cast<const uint8_t*>(W.data) + (r * (K / BE) + c0 / BE) * BB;
            dq8<T>(blk, int(c0 % BE), w);
        }
        if constexpr (SPLIT) {
            __align__(16) __nv_bfloat16 hi[8], lo[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                hi[e] = __float2bfloat16_rn(w[e]);
                lo[e] = __float2bfloat16_rn(w[e] - __bfloat162float(hi[e]));
            }
            auto* o = static_cast<__nv_bfloat16*>(out) + rl * 2 * K + c0;
            *reinterpret_cast<uint4*>(o) = *reinterpret_cast<const uint4*>(hi);
            *reinterpret_cast<uint4*>(o + K) = *reinterpret_cast<const uint4*>(lo);
        } else {
            float* o = static_cast<float*>(out) + rl * K + c0;
#pragma unroll
            for (int e = 0; e < 8; ++e) o[e] = w[e];
        }
    }
}

// x [n, K] fp32 → [n, 3K] bf16: xh | xh | xl (xh, xl: hi and lo of x).
__global__ void split_x_kernel(const float* __restrict__ x, __nv_bfloat16* __restrict__ o, int64_t n, int64_t K) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * K; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t t = i / K, c = i % K;
        const float v = x[i];
        const __nv_bfloat16 hi = __float2bfloat16_rn(v);
        __nv_bfloat16* row = o + t * 3 * K;
        row[c] = hi, row[K + c] = hi;
        row[2 * K + c] = __float2bfloat16_rn(v - __bfloat162float(hi));
    }
}

unsigned grid_for(int64_t items) { return unsigned(std::clamp<int64_t>((items + 255) / 256, 1, 8192)); }

template <bool SPLIT>
void dequant_rows(const Weight& W, int64_t r0, int64_t prow, void* out, cudaStream_t st) {
    const unsigned g = grid_for(prow * (W.cols / 8));
    if (W.format == WeightFormat::DENSE) {
        dequant_rows_kernel<kDense, GgmlType::F32, SPLIT><<<g, 256, 0, st>>>(W, 0, 0, r0, prow, out);
    } else if (W.format == WeightFormat::AFFINE) {
        dequant_rows_kernel<kAffine, GgmlType::F32, SPLIT><<<g, 256, 0, st>>>(W, 0, 0, r0, prow, out);
    } else {
        const GgmlTypeTraits tr = ggml_type_traits(W.ggml_type);
        const int be = int(tr.block_elems), bb = int(tr.block_bytes);
        switch (W.ggml_type) {
#define EMBER_DQ_CASE(T)                                                                            \
    case GgmlType::T:                                                                               \
        dequant_rows_kernel<kGgml, GgmlType::T, SPLIT><<<g, 256, 0, st>>>(W, be, bb, r0, prow, out); \
        break;
            EMBER_DQ_CASE(Q4_0)
            EMBER_DQ_CASE(Q4_1)
            EMBER_DQ_CASE(Q5_0)
            EMBER_DQ_CASE(Q8_0)
            EMBER_DQ_CASE(Q4_K)
            EMBER_DQ_CASE(Q5_K)
            EMBER_DQ_CASE(Q6_K)
#undef EMBER_DQ_CASE
            default: EMBER_CHECK(false, "gemm_split: GGML type %s", tr.name ? tr.name : "?");
        }
    }
    CUDA_CHECK(cudaGetLastError());
}

bool block_type_ok(GgmlType t) {
    switch (t) {
        case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q8_0:
        case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K: return true;
        default: return false;
    }
}

int64_t panel_rows(const Weight& W) {
    const int64_t p = int64_t(kPanelMax / (4 * size_t(W.cols))) / 128 * 128;
    return std::min<int64_t>(W.rows, std::max<int64_t>(p, 128));
}

bool exact_bf16(const Weight& W) { return W.format == WeightFormat::DENSE && W.dtype == DType::BF16; }

}  // namespace

bool gemm_split_supported(const Weight& W) {
    const bool fmt = (W.format == WeightFormat::GGML && block_type_ok(W.ggml_type)) ||
                     (W.format == WeightFormat::DENSE &&
                      (W.dtype == DType::F32 || W.dtype == DType::F16 || W.dtype == DType::BF16)) ||
                     (W.format == WeightFormat::AFFINE && W.bits >= 1 && W.bits <= 8 && W.group_size >= 8 &&
                      W.group_size % 8 == 0 && W.cols % W.group_size == 0 && W.scales && W.biases &&
                      (W.sb_dtype == DType::F32 || W.sb_dtype == DType::F16 || W.sb_dtype == DType::BF16));
    return fmt && W.data && W.cols > 0 && W.cols % 8 == 0 && W.rows < (int64_t(1) << 31) &&
           W.cols < (int64_t(1) << 31);
}

size_t gemm_split_workspace_bytes(const Weight& W, int64_t n) {
    size_t b = kCublasWs + 256 + align256(size_t(n) * size_t(W.cols) * 6);
    if (!exact_bf16(W)) b += align256(size_t(panel_rows(W)) * size_t(W.cols) * 4);
    return b;
}

void gemm_split_dequant_rows(const Weight& W, int64_t r0, int64_t rows, float* out, cudaStream_t stream) {
    EMBER_CHECK(gemm_split_supported(W) && r0 >= 0 && rows >= 0 && r0 + rows <= W.rows,
                "gemm_split_dequant_rows: rows [%lld, %lld) of %lld", (long long)r0, (long long)(r0 + rows),
                (long long)W.rows);
    if (rows) dequant_rows<false>(W, r0, rows, out, stream);
}

void gemm_split(const Weight& W, const float* x, int64_t n, float* y, cudaStream_t stream, void* workspace,
                size_t workspace_bytes, GemmPrecision prec) {
    EMBER_CHECK(gemm_split_supported(W), "gemm_split: unsupported weight (format %d, %lld x %lld)", int(W.format),
                (long long)W.rows, (long long)W.cols);
    EMBER_CHECK(n >= 1 && n < (int64_t(1) << 31) && x && y, "gemm_split: n=%lld", (long long)n);
    EMBER_CHECK(workspace && workspace_bytes >= gemm_split_workspace_bytes(W, n),
                "gemm_split: workspace %zu bytes, needs %zu", workspace_bytes, gemm_split_workspace_bytes(W, n));
    if (W.rows == 0) return;
    uint8_t* ws = nullptr;
    cublasHandle_t h = detail::cublas_bind(workspace, stream, &ws);
    const int64_t K = W.cols;
    auto* xs = reinterpret_cast<__nv_bfloat16*>(ws);
    ws += align256(size_t(n) * size_t(K) * 6);
    split_x_kernel<<<grid_for(n * K), 256, 0, stream>>>(x, xs, n, K);
    CUDA_CHECK(cudaGetLastError());
    const bool fp32 = prec == GemmPrecision::FP32;
    const float one = 1.0f, zero = 0.0f;
    // y[:, r0 : r0 + pr] (ld W.rows) = β·y + A[pr rows, ld lda] · B[n rows, ld 3K]ᵀ over k columns.
    auto mm = [&](const __nv_bfloat16* A, int64_t pr, int64_t lda, const __nv_bfloat16* B, int64_t k, float* yo,
                  const float* beta) {
        CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(pr), int(n), int(k), &one, A, CUDA_R_16BF, int(lda),
                                  B, CUDA_R_16BF, int(3 * K), beta, yo, CUDA_R_32F, int(W.rows), CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
    };
    if (exact_bf16(W)) {  // wl = 0: wh·xh (+ wh·xl)
        const auto* A = static_cast<const __nv_bfloat16*>(W.data);
        mm(A, W.rows, K, xs, K, y, &zero);
        if (fp32) mm(A, W.rows, K, xs + 2 * K, K, y, &one);
        return;
    }
    auto* panel = reinterpret_cast<__nv_bfloat16*>(ws);
    const int64_t P = panel_rows(W);
    for (int64_t r0 = 0; r0 < W.rows; r0 += P) {
        const int64_t pr = std::min(P, W.rows - r0);
        dequant_rows<true>(W, r0, pr, panel, stream);
        if (fp32) {
            mm(panel, pr, 2 * K, xs, 2 * K, y + r0, &zero);     // wh·xh + wl·xh
            mm(panel, pr, 2 * K, xs + 2 * K, K, y + r0, &one);  // + wh·xl
        } else {
            mm(panel, pr, 2 * K, xs, K, y + r0, &zero);
        }
    }
}

}  // namespace ember::cuda
