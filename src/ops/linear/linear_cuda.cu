// ops/linear/linear_cuda.cu: dispatch of the CUDA linear (spec: linear_cuda.h) — n ≤ 8 → GEMV kernels (5-8 rows
// of matrices ≥ 4096 both ways: the tensor-core GEMM when the caller's workspace holds it; gemm_small_rows)
// (streaming tensor-core affine 4/8-bit, the tiled "stream" kernel for large 4/8-bit and Q6_K matrices, CUDA-core GGML
// blocks, fp32 CUDA-core dense and other affine widths),
// n > 8 → the exact GEMV in 8-token chunks (or, opt-in, bf16 panels + cuBLAS: linear_gemm.cu).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "core/env.h"
#include "ops/activation/activation_cuda.h"
#include "ops/linear/linear_cuda.h"
#include "ops/linear/linear_gemm_split.h"
#include "ops/norm/norm_cuda.h"
#include "quant/affine.h"
#include "quant/ggml_type.h"

namespace ember::cuda {
namespace {

void check_weight(const Weight& W, const char* who) {
    EMBER_CHECK(!W.empty() && W.rows >= 0 && W.cols > 0, "%s: empty weight", who);
    if (W.format == WeightFormat::AFFINE) {
        EMBER_CHECK(affine_params_valid(W.bits, W.group_size) && W.cols % W.group_size == 0 && W.scales && W.biases &&
                        dtype_is_float(W.sb_dtype),
                    "%s: bad affine weight (bits %d, group %d, cols %lld)", who, W.bits, W.group_size,
                    (long long)W.cols);
    } else if (W.format == WeightFormat::TILED) {
        EMBER_CHECK(W.scales && detail::gemv_stream_fits(W), "%s: bad tiled weight (%lld×%lld, group %d)", who,
                    (long long)W.rows, (long long)W.cols, W.group_size);
    } else if (W.format == WeightFormat::GGML) {
        const GgmlTypeTraits tr = ggml_type_traits(W.ggml_type);
        const bool plain = W.ggml_type == GgmlType::F32 || W.ggml_type == GgmlType::F16 || W.ggml_type == GgmlType::BF16;
        EMBER_CHECK(tr.name && (plain || detail::gemv_ggml_supported(W.ggml_type)) && W.cols % tr.block_elems == 0,
                    "%s: GGML type %s with %lld columns not supported on CUDA", who, tr.name ? tr.name : "(unknown)",
                    (long long)W.cols);
    } else {
        EMBER_CHECK(dtype_is_float(W.dtype), "%s: dense dtype %s", who, dtype_name(W.dtype));
    }
}

// GGML F32/F16/BF16 tensors are plain row-major matrices: run them as DENSE.
Weight dense_view(const Weight& W) {
    if (W.format != WeightFormat::GGML) return W;
    if (W.ggml_type != GgmlType::F32 && W.ggml_type != GgmlType::F16 && W.ggml_type != GgmlType::BF16) return W;
    Weight d = W;
    d.format = WeightFormat::DENSE;
    d.dtype = W.ggml_type == GgmlType::F32 ? DType::F32 : W.ggml_type == GgmlType::F16 ? DType::F16 : DType::BF16;
    return d;
}

// Affine kernel choice: tune.kernel, else EMBER_GEMV=mma|q (read once), else by shape: the streaming q kernel,
// except for 4..8 tokens with K ≥ 6144, where the mma kernel measured faster on the H200 (gemv_bench, 2B/9B/27B
// mlp down at n = 4/8: q 0.70–0.96× of mma; bench/results/2026-11-30-*-h200.md).
int affine_kernel(const GemvTuning& tune, const Weight& W, int64_t n) {
    static const int env = env_is("EMBER_GEMV", "mma") ? 2 : env_is("EMBER_GEMV", "q") ? 1 : 0;
    if (tune.kernel) return tune.kernel;
    if (env) return env;
    return n >= 4 && W.cols >= 6144 ? 2 : 1;
}

// EMBER_BF16_PREFILL=1: n > 8 through bf16 panels + cuBLAS (linear_gemm.cu) instead of the exact kernels.
bool cublas_prefill() {
    static const bool on = env_on("EMBER_BF16_PREFILL");
    return on;
}

// Whether n ≤ 8 rows of W take the tensor-core GEMM (where it takes W, workspace permitting) instead of the GEMV:
// from 5 rows when both dimensions are ≥ 4096. H200, batched decode at 8 rows, every matrix through the GEMM from 5
// rows vs the GEMVs (one call, 2026-12-07): synthetic 9B (every matrix ≥ 4096 both ways) 1,576 → 1,756 tok/s, its
// Q4_0 mix 1,202 → 1,599; 2B (every matrix has a dimension of 2,048) 4,246 → 3,974, at 4 rows 2,695 → 2,716. So the
// rule gives each shape its measured better choice (the rule itself did not run on a GPU: no machine was left).
// EMBER_GEMM_FROM_ROWS=N (2..9) instead: from N rows for every matrix (9: never).
bool gemm_small_rows(const Weight& W, int64_t n) {
    static const int env = std::clamp(env_int("EMBER_GEMM_FROM_ROWS", 0), 0, 9);
    return env >= 2 ? n >= env : n >= 5 && W.cols >= 4096 && W.rows >= 4096;
}

}  // namespace

void linear_gemv(const Weight& W0, const float* x, int64_t n, float* y, cudaStream_t stream, const GemvTuning& tune) {
    check_weight(W0, "linear_gemv");
    EMBER_CHECK(n >= 1 && n <= 8, "linear_gemv: n=%lld (1..8)", (long long)n);
    EMBER_CHECK(x && y, "linear_gemv: null x or y");
    if (W0.rows == 0) return;
    const Weight W = dense_view(W0);
    if (W.format == WeightFormat::GGML) {
        detail::gemv_ggml(W, x, int(n), y, stream);
        return;
    }
    if (W.format == WeightFormat::TILED) {
        detail::gemv_stream(W, x, int(n), y, stream);
        return;
    }
    if (W.format == WeightFormat::AFFINE) {
        const int k = affine_kernel(tune, W, n);
        if (k == 1 && detail::gemv_affine_q(W, x, int(n), y, stream, tune)) return;
        if (detail::gemv_affine_mma(W, x, int(n), y, stream, tune)) {
            CUDA_CHECK(cudaGetLastError());
            return;
        }
        detail::gemv_affine_generic(W, x, int(n), y, stream);
        return;
    }
    detail::gemv_dense(W, x, int(n), y, stream);
}

void linear(const Weight& W, const float* x, int64_t n, float* y, cudaStream_t stream, void* workspace,
            size_t workspace_bytes, GemmPrecision prec) {
    EMBER_CHECK(n >= 0, "linear: n=%lld", (long long)n);
    if (n == 0) return;
    if (n <= 8 && !gemm_small_rows(W, n)) {
        linear_gemv(W, x, n, y, stream);
        return;
    }
    check_weight(W, "linear");
    if (W.format == WeightFormat::TILED) {  // one pass over W per token (tiled weights are large decode matrices)
        detail::gemv_stream(W, x, int(n), y, stream);
        return;
    }
    // AFFINE 4/8-bit: the tensor-core GEMM (linear_gemm_q.h). EMBER_BF16_PREFILL=1 keeps the older opt-in path
    // (bf16 panels + cuBLAS: x and w rounded to bf16, rel. L2 up to 0.2 on the fixtures); other formats run the
    // exact GEMV in 8-row chunks, re-reading W n/8 times.
    const bool bf16_prefill = cublas_prefill();
    if (!bf16_prefill && W.rows > 0 && gemm_q_supported(W) && workspace &&
        workspace_bytes >= gemm_q_workspace_bytes(W, n)) {
        gemm_q(W, x, n, y, stream, workspace, workspace_bytes, prec);
        return;
    }
    if (n <= 8) {  // rows gemm_small_rows() gives the GEMM where it cannot take them
        linear_gemv(W, x, n, y, stream);
        return;
    }
    // Formats the 4-bit GEMM does not take (GGML Q5_0 / Q5_K / Q6_K and unrepacked blocks, dense, other affine
    // widths): dequantized panels split into hi + lo bf16, cuBLAS (linear_gemm_split.h).
    const Weight Wd = dense_view(W);
    if (!bf16_prefill && W.rows > 0 && !gemm_q_supported(W) && gemm_split_supported(Wd) && workspace &&
        workspace_bytes >= gemm_split_workspace_bytes(Wd, n)) {
        gemm_split(Wd, x, n, y, stream, workspace, workspace_bytes, prec);
        return;
    }
    if (bf16_prefill && W.format != WeightFormat::GGML && workspace_bytes >= linear_gemm_workspace_bytes(W, n)) {
        linear_gemm(W, x, n, y, stream, workspace, workspace_bytes);
        return;
    }
    for (int64_t t = 0; t < n; t += 8) {
        const int64_t m = n - t < 8 ? n - t : 8;
        linear_gemv(W, x + t * W.cols, m, y + t * W.rows, stream);
    }
}

void linear_parts(const Weight& stacked, const Weight* const* parts, float* const* ys, int count, const float* x,
                  int64_t n, cudaStream_t stream, void* workspace, size_t workspace_bytes, GemmPrecision prec) {
    EMBER_CHECK(count >= 1 && count <= 4 && parts && ys, "linear_parts: %d parts (1..4)", count);
    GemmOutSplit out;
    out.parts = count;
    int64_t r = 0;
    for (int k = 0; k < count; ++k) r += parts[k]->rows, out.end[k] = r, out.y[k] = ys[k];
    EMBER_CHECK(stacked.empty() || r == stacked.rows, "linear_parts: parts of %lld rows, stacked weight of %lld",
                (long long)r, (long long)stacked.rows);
    // n ≤ 8: the streaming GEMV over the stacked weight where linear_gemv() would take it.
    if (n >= 1 && n <= 8 && !gemm_small_rows(stacked, n) && !stacked.empty() && stacked.format == WeightFormat::AFFINE &&
        affine_kernel({}, stacked, n) == 1 && detail::gemv_affine_q(stacked, x, int(n), nullptr, stream, {}, nullptr, 0,
                                                                   nullptr, &out))
        return;
    if ((n > 8 || gemm_small_rows(stacked, n)) && !stacked.empty() && !cublas_prefill() && gemm_q_supported(stacked) &&
        workspace &&
        workspace_bytes >= gemm_q_workspace_bytes(stacked, n)) {
        gemm_q_split_out(stacked, x, n, out, stream, workspace, workspace_bytes, prec);
        return;
    }
    for (int k = 0; k < count; ++k) linear(*parts[k], x, n, ys[k], stream, workspace, workspace_bytes, prec);
}

bool linear_fused_native(const Weight& W0, int64_t n) {
    const Weight W = dense_view(W0);
    if (W.format == WeightFormat::TILED) return n >= 1 && n <= 8;
    if (W.format != WeightFormat::AFFINE || n < 1 || n > 8 || affine_kernel({}, W, n) != 1) return false;
    char buf[96];
    return detail::gemv_affine_q(W, nullptr, int(n), nullptr, nullptr, {}, buf, sizeof buf);
}

bool linear_fused_native_q(const Weight& W0, int64_t n) {
    const Weight W = dense_view(W0);
    if (W.format == WeightFormat::TILED) return n >= 1 && n <= 8;
    if (W.format != WeightFormat::AFFINE || n < 1 || n > 8) return false;
    GemvTuning t;
    t.kernel = 1;
    char buf[96];
    return detail::gemv_affine_q(W, nullptr, int(n), nullptr, nullptr, t, buf, sizeof buf);
}

void linear_parts_fused(const Weight& stacked, const Weight* const* parts, float* const* ys, int count,
                        const float* x, int64_t n, const LinearFusion& f, cudaStream_t stream) {
    EMBER_CHECK(count >= 1 && count <= 4 && parts && ys && x, "linear_parts_fused: %d parts (1..4)", count);
    EMBER_CHECK(n >= 1 && n <= 8 && !stacked.empty() && stacked.format == WeightFormat::AFFINE,
                "linear_parts_fused: n=%lld, format %d (AFFINE, 1..8 rows)", (long long)n, int(stacked.format));
    EMBER_CHECK(!(f.norm_w && f.swiglu), "linear_parts_fused: RMSNorm and SwiGLU prologues are exclusive");
    GemmOutSplit out;
    out.parts = count;
    int64_t r = 0;
    for (int k = 0; k < count; ++k) r += parts[k]->rows, out.end[k] = r, out.y[k] = ys[k];
    EMBER_CHECK(r == stacked.rows, "linear_parts_fused: parts of %lld rows, stacked weight of %lld", (long long)r,
                (long long)stacked.rows);
    GemvTuning t;
    t.kernel = 1;
    EMBER_CHECK(detail::gemv_affine_q(stacked, x, int(n), nullptr, stream, t, nullptr, 0, &f, &out),
                "linear_parts_fused: the streaming GEMV does not take this weight (%lld x %lld, %d-bit)",
                (long long)stacked.rows, (long long)stacked.cols, stacked.bits);
}

bool linear_swiglu_pairs(const Weight& W0, const float* x, int64_t n, float* h, const LinearFusion& f,
                         cudaStream_t stream, const GemvTuning* tune) {
    static const bool off = env_off("EMBER_SWIGLU_PAIRS");
    EMBER_CHECK(!f.swiglu && !f.accumulate, "linear_swiglu_pairs: a SwiGLU prologue or accumulation");
    const Weight W = dense_view(W0);
    const GemvTuning t = tune ? *tune : GemvTuning{};
    if (off || n < 1 || n > 8 || W.empty() || W.format != WeightFormat::AFFINE || W.rows % 2 != 0) return false;
    if (!tune && gemm_small_rows(W, n)) return false;  // linear() would run the GEMM
    if (affine_kernel(t, W, n) != 1) return false;
    check_weight(W, "linear_swiglu_pairs");
    EMBER_CHECK(x && h, "linear_swiglu_pairs: null x or h");
    return detail::gemv_affine_q(W, x, int(n), h, stream, t, nullptr, 0, &f, nullptr, true);
}

size_t linear_fused_scratch_floats(const Weight& W, int64_t n) { return size_t(n) * size_t(W.cols + W.rows); }

void linear_fused(const Weight& W0, const float* x, int64_t n, float* y, const LinearFusion& f, cudaStream_t stream,
                  float* scratch, size_t scratch_floats, const GemvTuning* tune) {
    check_weight(W0, "linear_fused");
    EMBER_CHECK(n >= 1 && n <= 8, "linear_fused: n=%lld (1..8)", (long long)n);
    EMBER_CHECK(x && y, "linear_fused: null x or y");
    EMBER_CHECK(!(f.norm_w && f.swiglu), "linear_fused: RMSNorm and SwiGLU prologues are exclusive");
    const Weight W = dense_view(W0);
    const GemvTuning t = tune ? *tune : GemvTuning{};
    if (W.rows == 0) return;
    if (W.format == WeightFormat::TILED) {
        detail::gemv_stream(W, x, int(n), y, stream, &f);
        return;
    }
    if (W.format == WeightFormat::AFFINE) {
        const int k = affine_kernel(t, W, n);
        const bool plain = !f.norm_w && !f.swiglu;
        // No prologue: the mma kernel (the rule's choice for 4-8 rows of K ≥ 6144) adds into y itself; where it
        // cannot take W (or x), the q kernel does.
        if (k == 2 && plain && detail::gemv_affine_mma(W, x, int(n), y, stream, t, nullptr, 0, f.accumulate)) return;
        if ((k == 1 || plain) && detail::gemv_affine_q(W, x, int(n), y, stream, t, nullptr, 0, &f)) return;
    }
    // Separate ops (same math): x' into scratch[0, n·cols), y' into scratch[n·cols, n·(cols + rows)).
    EMBER_CHECK(scratch && scratch_floats >= linear_fused_scratch_floats(W, n),
                "linear_fused: scratch of %zu floats, %zu needed", scratch_floats, linear_fused_scratch_floats(W, n));
    const float* xin = x;
    if (f.norm_w) rmsnorm(x, f.norm_w, scratch, n, W.cols, f.eps, stream), xin = scratch;
    if (f.swiglu) swiglu_fused(x, scratch, n, W.cols, stream), xin = scratch;
    float* yout = f.accumulate ? scratch + n * W.cols : y;
    linear_gemv(W0, xin, n, yout, stream, t);
    if (f.accumulate) add_bias(y, yout, 1, n * W.rows, stream);  // y += y' (one row of n·rows)
}

namespace {
__global__ void add_bias_kernel(float* __restrict__ y, const float* __restrict__ b, int64_t total, int64_t rows) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
        y[i] += b[i % rows];
}
}  // namespace

void add_bias(float* y, const float* b, int64_t n, int64_t rows, cudaStream_t stream) {
    EMBER_CHECK(n >= 0 && rows >= 0 && (n * rows == 0 || (y && b)), "add_bias: n=%lld rows=%lld", (long long)n,
                (long long)rows);
    const int64_t total = n * rows;
    if (total == 0) return;
    const int64_t blocks = std::min<int64_t>((total + 255) / 256, 1024);
    add_bias_kernel<<<unsigned(blocks), 256, 0, stream>>>(y, b, total, rows);
    CUDA_CHECK(cudaGetLastError());
}

size_t linear_workspace_bytes(const Weight& W, int64_t n) {
    if (n <= 8 || W.format == WeightFormat::TILED) return 0;
    // The tensor-core GEMM, or (EMBER_BF16_PREFILL=1, and formats it does not take) the bf16 cuBLAS panels.
    if (gemm_q_supported(W) && !cublas_prefill()) return gemm_q_workspace_bytes(W, n);
    const Weight Wd = dense_view(W);
    if (!cublas_prefill() && gemm_split_supported(Wd)) return gemm_split_workspace_bytes(Wd, n);
    if (W.format == WeightFormat::GGML) return 0;  // (unsupported block types: the GEMV chunks)
    return linear_gemm_workspace_bytes(W, n);
}

const char* linear_gemv_describe(const Weight& W0, int64_t n, char* buf, size_t buf_bytes, const GemvTuning& tune) {
    const Weight W = dense_view(W0);
    if (W.format == WeightFormat::GGML) {
        const GgmlTypeTraits tr = ggml_type_traits(W.ggml_type);
        std::snprintf(buf, buf_bytes, "ggml %s fp32", tr.name ? tr.name : "?");
        return buf;
    }
    if (W.format == WeightFormat::TILED) {
        detail::gemv_stream(W, nullptr, int(n), nullptr, nullptr, nullptr, buf, buf_bytes);
        return buf;
    }
    if (W.format == WeightFormat::AFFINE) {
        if (affine_kernel(tune, W, n) == 1 && detail::gemv_affine_q(W, nullptr, int(n), nullptr, nullptr, tune, buf, buf_bytes))
            return buf;
        if (detail::gemv_affine_mma(W, nullptr, int(n), nullptr, nullptr, tune, buf, buf_bytes)) return buf;
        std::snprintf(buf, buf_bytes, "generic affine");
        return buf;
    }
    std::snprintf(buf, buf_bytes, "dense fp32");
    return buf;
}

}  // namespace ember::cuda
