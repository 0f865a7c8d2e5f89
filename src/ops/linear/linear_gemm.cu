// ops/linear/linear_gemm.cu: y = x·Wᵀ for n > 8 tokens (prefill) — W dequantized to bf16 one row panel at a
// time into the caller's workspace, then cuBLAS bf16 × bf16 → fp32 (fp32 accumulate). Dense bf16 weights are
// used in place, dense f32 go through an fp32 cuBLAS GEMM (no tensor-core rounding), dense f16 are converted.
//
// Workspace (linear_gemm_workspace_bytes): [cuBLAS 32 MiB][x as bf16: n·K][W panel as bf16: P·K], P rows per
// panel chosen so a panel is ≤ 64 MiB. cuBLAS: y^T (rows × n, col-major, ld = rows) = W (K × rows col-major,
// transposed) · x^T (K × n col-major).
// The cuBLAS handle is per host thread (thread_local, created on first use with the then-current device,
// destroyed at thread exit). Stream and workspace are set on every call: no cuBLAS-internal allocation, so
// the call can be captured in a CUDA graph.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "ops/linear/cublas_thread.h"
#include "ops/linear/linear_cuda.h"

namespace ember::cuda {
namespace {

constexpr size_t kCublasWs = detail::kCublasWorkspace;
constexpr size_t kPanelMax = size_t(64) << 20;

size_t align256(size_t v) { return (v + 255) & ~size_t(255); }


int64_t panel_rows(const Weight& W) {
    int64_t p = int64_t(kPanelMax / (2 * size_t(W.cols))) / 128 * 128;
    return std::min<int64_t>(W.rows, std::max<int64_t>(p, 128));
}

bool needs_panel(const Weight& W) {
    return W.format == WeightFormat::AFFINE || W.dtype == DType::F16;
}

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }

__global__ void f32_to_bf16_kernel(const float* __restrict__ in, __nv_bfloat16* __restrict__ out, int64_t count) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
        out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void f16_to_bf16_kernel(const __half* __restrict__ in, __nv_bfloat16* __restrict__ out, int64_t count) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
        out[i] = __float2bfloat16_rn(__half2float(in[i]));
}

// Rows [r0, r0 + prow) of an affine W → bf16 [prow, K]. One thread per 8 codes (= `bits` whole bytes, since
// 8 codes start on a byte boundary); w = s·q + b in fp32 (as quant/affine.h), then rounded to bf16.
template <class ST>
__global__ void dequant_panel_kernel(const uint8_t* __restrict__ Wq, const ST* __restrict__ S,
                                     const ST* __restrict__ B, __nv_bfloat16* __restrict__ out, int64_t r0,
                                     int64_t prow, int64_t K, int bits, int gs, bool vec) {
    const int64_t units = K / 8, total = prow * units, row_bytes = K * bits / 8, ng = K / gs;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t rl = i / units, u = i % units, r = r0 + rl, c0 = u * 8;
        const uint8_t* p = Wq + r * row_bytes + u * bits;
        uint64_t v;
        if (vec && bits == 4) {
            v = *reinterpret_cast<const uint32_t*>(p);
        } else if (vec && bits == 8) {
            const uint2 q = *reinterpret_cast<const uint2*>(p);
            v = q.x | (uint64_t(q.y) << 32);
        } else {
            v = 0;
            for (int b = 0; b < bits; ++b) v |= uint64_t(p[b]) << (8 * b);
        }
        const int64_t gi = r * ng + c0 / gs;
        const float s = to_f(S[gi]), b = to_f(B[gi]);
        const uint64_t mask = (uint64_t(1) << bits) - 1;
        __align__(16) __nv_bfloat16 w[8];
#pragma unroll
        for (int j = 0; j < 8; ++j)
            w[j] = __float2bfloat16_rn(__fadd_rn(__fmul_rn(s, float((v >> (j * bits)) & mask)), b));
        *reinterpret_cast<uint4*>(out + rl * K + c0) = *reinterpret_cast<const uint4*>(w);
    }
}

unsigned grid_for(int64_t items) {
    return unsigned(std::clamp<int64_t>((items + 255) / 256, 1, 8192));
}

void dequant_panel(const Weight& W, int64_t r0, int64_t prow, __nv_bfloat16* out, cudaStream_t st) {
    const int64_t total = prow * (W.cols / 8);
    const auto* q = static_cast<const uint8_t*>(W.data);
    const bool vec = (reinterpret_cast<uintptr_t>(q) & 7u) == 0;  // word loads for bits 4 / 8
    if (W.format == WeightFormat::DENSE) {  // f16
        f16_to_bf16_kernel<<<grid_for(prow * W.cols), 256, 0, st>>>(static_cast<const __half*>(W.data) + r0 * W.cols,
                                                                     out, prow * W.cols);
    } else if (W.sb_dtype == DType::F32) {
        dequant_panel_kernel<float><<<grid_for(total), 256, 0, st>>>(q, static_cast<const float*>(W.scales),
                                                                     static_cast<const float*>(W.biases), out, r0,
                                                                     prow, W.cols, W.bits, W.group_size, vec);
    } else if (W.sb_dtype == DType::F16) {
        dequant_panel_kernel<__half><<<grid_for(total), 256, 0, st>>>(q, static_cast<const __half*>(W.scales),
                                                                      static_cast<const __half*>(W.biases), out, r0,
                                                                      prow, W.cols, W.bits, W.group_size, vec);
    } else {
        dequant_panel_kernel<__nv_bfloat16><<<grid_for(total), 256, 0, st>>>(
            q, static_cast<const __nv_bfloat16*>(W.scales), static_cast<const __nv_bfloat16*>(W.biases), out, r0,
            prow, W.cols, W.bits, W.group_size, vec);
    }
    CUDA_CHECK(cudaGetLastError());
}

}  // namespace

namespace detail {
namespace {
struct ThreadCublas {
    cublasHandle_t h = nullptr;
    ~ThreadCublas() {
        if (h) cublasDestroy(h);
    }
};
}  // namespace

cublasHandle_t cublas_thread_handle() {
    thread_local ThreadCublas c;
    if (!c.h) CUBLAS_CHECK(cublasCreate(&c.h));
    return c.h;
}

cublasHandle_t cublas_bind(void* workspace, cudaStream_t stream, uint8_t** rest) {
    uint8_t* ws = reinterpret_cast<uint8_t*>(align256(reinterpret_cast<uintptr_t>(workspace)));
    cublasHandle_t h = cublas_thread_handle();
    CUBLAS_CHECK(cublasSetStream(h, stream));  // (resets the workspace: set it after)
    CUBLAS_CHECK(cublasSetWorkspace(h, ws, kCublasWorkspace));
    *rest = ws + kCublasWorkspace;
    return h;
}
}  // namespace detail

size_t linear_gemm_workspace_bytes(const Weight& W, int64_t n) {
    size_t b = kCublasWs + 256;  // + 256: the caller's pointer is aligned up
    if (W.format == WeightFormat::DENSE && W.dtype == DType::F32) return b;
    b += align256(size_t(n) * size_t(W.cols) * 2);
    if (needs_panel(W)) b += align256(size_t(panel_rows(W)) * size_t(W.cols) * 2);
    return b;
}

void linear_gemm(const Weight& W, const float* x, int64_t n, float* y, cudaStream_t stream, void* workspace,
                 size_t workspace_bytes) {
    EMBER_CHECK(n >= 1 && W.cols % 8 == 0 && W.rows < (int64_t(1) << 31) && W.cols < (int64_t(1) << 31) &&
                    n < (int64_t(1) << 31),
                "linear_gemm: n=%lld rows=%lld cols=%lld", (long long)n, (long long)W.rows, (long long)W.cols);
    EMBER_CHECK(workspace_bytes >= linear_gemm_workspace_bytes(W, n),
                "linear_gemm: workspace %zu bytes, needs %zu", workspace_bytes, linear_gemm_workspace_bytes(W, n));
    if (W.rows == 0) return;
    uint8_t* ws = nullptr;
    cublasHandle_t h = detail::cublas_bind(workspace, stream, &ws);
    const float one = 1.0f, zero = 0.0f;
    const int m = int(W.rows), k = int(W.cols), nn = int(n);
    if (W.format == WeightFormat::DENSE && W.dtype == DType::F32) {
        CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, nn, k, &one, W.data, CUDA_R_32F, k, x, CUDA_R_32F, k,
                                  &zero, y, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return;
    }
    auto* xb = reinterpret_cast<__nv_bfloat16*>(ws);
    ws += align256(size_t(n) * size_t(k) * 2);
    f32_to_bf16_kernel<<<grid_for(n * W.cols), 256, 0, stream>>>(x, xb, n * W.cols);
    CUDA_CHECK(cudaGetLastError());
    if (!needs_panel(W)) {  // dense bf16
        CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, nn, k, &one, W.data, CUDA_R_16BF, k, xb, CUDA_R_16BF,
                                  k, &zero, y, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return;
    }
    auto* panel = reinterpret_cast<__nv_bfloat16*>(ws);
    const int64_t P = panel_rows(W);
    for (int64_t r0 = 0; r0 < W.rows; r0 += P) {
        const int64_t pr = std::min(P, W.rows - r0);
        dequant_panel(W, r0, pr, panel, stream);
        CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(pr), nn, k, &one, panel, CUDA_R_16BF, k, xb,
                                  CUDA_R_16BF, k, &zero, y + r0, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
    }
}

}  // namespace ember::cuda
