// ops/linear/linear_cuda.h: y = x · Wᵀ on the GPU for a dense, MLX-affine or GGML Weight (spec and fp64 reference:
// ops/linear/linear.h, formats: ops/linear/weight.h, quant/affine.h, quant/ggml_blocks.h). Tests:
// linear_cuda_test.cpp (dense / affine), linear_ggml_cuda_test.cpp (GGML). Benchmark: bench/gpu/gemv_bench.cu.
//
//   y[t, r] = Σ_c W[r, c] · x[t, c]      t < n, r < W.rows, c < W.cols
//   x [n, cols] f32 device, y [n, rows] f32 device, W with DEVICE data/scales/biases in the CPU layout.
//
// n ≤ 8 (decode, speculative verify): one GEMV launch that reads every weight byte once for all n tokens.
//   - AFFINE 4/8-bit, group 32/64/128, bf16/f16/f32 scales, 16-byte aligned data (linear_gemv_q.cu, the
//     streaming "q" kernel): weights straight from HBM into registers, mma.m16n8k16 with the codes as the exact
//     bf16 values 16 + q and x as two bf16 terms hi + lo (|x − hi − lo| ≤ 2⁻¹⁶|x|); products exact, fp32
//     accumulation, per group y += s·C + (b − 16·s)·Σx'. Error ≤ 2⁻¹⁶·Σ|w||x| + fp32 rounding, i.e.
//     fp32-accumulate quality. Deterministic (fixed reduction order, no atomics). Launched with programmatic
//     dependent launch (GemvTuning::q_pdl, env EMBER_GEMV_PDL=0 turns it off): it prefetches W before waiting
//     for the previous kernel of the stream, so W must not be written by the kernel launched right before it
//     (x and y are only touched after the wait).
//     The previous tensor-core kernel (linear_gemv_affine.cu, "mma": persistent blocks, cp.async ring, clusters,
//     same numerics) stays reachable: GemvTuning::kernel = 2 or env EMBER_GEMV=mma; it is also the fallback
//     when x cannot be staged for the q kernel.
//   - TILED (a large 4/8-bit affine or GGML Q6_K matrix the CUDA upload re-laid out, ops/linear/weight_tiles.h;
//     linear_gemv_stream.cu, the "stream" kernel): same numerics as the q kernel; persistent blocks whose warps
//     each own a K chunk with x in registers, weights through a cp.async shared-memory ring; one launch per
//     token (W read once per token), so meant for n = 1 decode; Q6_K: up to 4 tokens per launch (the batched
//     engine's Q6_K LM head at 2-64 rows; EMBER_STREAM_ROWS=0: one per launch). Also n > 8.
//   - GGML Q4_0/Q4_1/Q5_0/Q8_0/Q4_K/Q5_K/Q6_K (linear_gemv_ggml.cu): CUDA cores, codes decoded exactly in
//     registers, x in fp32 (not quantized to Q8), fp32 accumulation: the error of an fp32 dot product of the
//     dequantized row. GGML F32/F16/BF16 run as DENSE.
//   - DENSE f32/f16/bf16 and AFFINE with other bit widths / unaligned pointers (linear_gemv_simple.cu): fp32
//     CUDA-core kernels, fp32 accumulation.
//   No workspace, no allocation, no synchronisation, no host reads: capturable in a CUDA graph. The first call
//   of each kernel instance sets its shared-memory limit and caches the SM count (and, for "mma", the cluster
//   occupancy) of the device current then (one device per process; first calls from several threads at once
//   race benignly).
// n > 8 (prefill, batched rows): AFFINE 4/8-bit weights (MLX, and the GGUF matrices the upload repacked to
//   affine) run the tensor-core GEMM (linear_gemm_q.h: codes exact, x as hi + lo bf16 — the GEMV's numerics — or
//   one bf16 product with GemmPrecision::BF16); the workspace holds its split x and K-split partials. Other formats
//   run the exact GEMV in 8-token chunks (W re-read n/8 times). Opt-in EMBER_BF16_PREFILL=1
//   (dense/affine only, linear_gemm.cu): W dequantized (or converted) to bf16 a row panel at a time into
//   `workspace` and multiplied with x (rounded to bf16) by cuBLAS (bf16 in, fp32 accumulate, fp32 out); dense
//   f32 weights use a plain fp32 cuBLAS GEMM. Error: bf16 rounding of w and x (≈ 2⁻⁸ relative each). cuBLAS
//   handle: one per host thread, created lazily on the first call on that thread (bound to the device current
//   then) and destroyed at thread exit; its stream and workspace (carved from `workspace`) are set on every
//   call, so the call is capturable too.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "ops/linear/linear_gemm_q.h"
#include "ops/linear/weight.h"

namespace ember::cuda {

// y = x·Wᵀ for n tokens (n ≥ 0). Requires workspace_bytes ≥ linear_workspace_bytes(W, n) (0 for n ≤ 8; with a
// smaller workspace n > 8 falls back to the GEMV chunks). `prec` applies to the tensor-core GEMM only: n > 8, and
// 5-8 rows of an affine matrix ≥ 4096 both ways when the workspace given holds the GEMM's (faster there in batched
// decode; EMBER_GEMM_FROM_ROWS=N: from N rows for every matrix, 9: never). linear_parts follows the same rule.
void linear(const Weight& W, const float* x, int64_t n, float* y, cudaStream_t stream, void* workspace,
            size_t workspace_bytes, GemmPrecision prec = GemmPrecision::FP32);
size_t linear_workspace_bytes(const Weight& W, int64_t n);
// The row blocks parts[0..count) of one stacked weight (stacked.rows_view, in order, covering it; count ≤ 4), each
// into its own ys[k] [n, parts[k]->rows]: one tensor-core GEMM over `stacked` when linear() would take that path
// for it (n > 8; output split by rows, gemm_q_split_out), else linear() per part. Workspace as linear(stacked, n).
void linear_parts(const Weight& stacked, const Weight* const* parts, float* const* ys, int count, const float* x,
                  int64_t n, cudaStream_t stream, void* workspace, size_t workspace_bytes,
                  GemmPrecision prec = GemmPrecision::FP32);

// Decode fusions around one linear: a prologue on x as the GEMV reads it, and an accumulating epilogue.
//   norm_w set:  x'[t, c] = x[t, c] · (1 / sqrt(mean_c x[t, c]² + eps)) · norm_w[c]   (as rmsnorm(), fp32)
//   swiglu:      x [n, 2·cols] rows [gate | up]; x'[t, c] = silu(gate[t, c]) · up[t, c]  (as swiglu_fused())
//   accumulate:  y[t, r] = y[t, r] + Σ_c W[r, c] · x'[t, c]   (the residual add, in place)
// (norm_w and swiglu exclusive.) One kernel when linear_fused_native(W, n) (the streaming q kernel applies
// the prologue while staging x — every block sums Σx² as it stages x·norm_w and scales its sums by the factor as it
// stores them, or with EMBER_NORM_POST=0 computes the factors in a pass before staging x' — and the add when storing y;
// without a prologue, where the rule picks the mma kernel (4-8 rows, K ≥ 6144), that kernel adds into y, or the
// q kernel where the mma kernel cannot take W);
// otherwise the separate ops: rmsnorm / swiglu_fused into scratch, linear, add — same numerics either way
// up to fp32 summation order of Σx².
struct LinearFusion {
    const float* norm_w = nullptr;
    float eps = 0.f;
    bool swiglu = false;
    bool accumulate = false;
};
// scratch: device floats, ≥ linear_fused_scratch_floats(W, n) (only used by the unfused fallback).
struct GemvTuning;
void linear_fused(const Weight& W, const float* x, int64_t n, float* y, const LinearFusion& f, cudaStream_t stream,
                  float* scratch, size_t scratch_floats, const GemvTuning* tune = nullptr);
size_t linear_fused_scratch_floats(const Weight& W, int64_t n);
bool linear_fused_native(const Weight& W, int64_t n);
// As linear_fused_native, with the streaming q kernel forced for AFFINE weights (what linear_fused runs with
// GemvTuning::kernel = 1; the default picks the unfusable mma kernel for 4-8 rows of K ≥ 6144).
bool linear_fused_native_q(const Weight& W, int64_t n);
// linear_fused's native one-kernel form over a stacked AFFINE weight (n ≤ 8, q kernel), the output split by rows
// as linear_parts; refused (EMBER_CHECK) where linear_fused_native_q(stacked, n) is false.
void linear_parts_fused(const Weight& stacked, const Weight* const* parts, float* const* ys, int count,
                        const float* x, int64_t n, const LinearFusion& f, cudaStream_t stream);

// The MLP's first half in one GEMV: h[t, j] = silu(x'·gate_jᵀ) · (x'·up_jᵀ) for a stacked [gate; up] weight
// (2·I rows, the gate rows first), h [n, I], x' = x or, with f.norm_w, RMSNorm(x) (f.swiglu / f.accumulate:
// refused). The streaming q kernel with each tile holding gate rows j .. j + 7 and up rows I + j .. I + j + 7 in the
// places of its two 8-row halves, the product formed where the sums are stored — the numerics of linear_fused(W)
// then swiglu_fused (the same sums, bit for bit, where both take the q kernel with the same tuning). Returns false,
// with nothing enqueued, where that kernel would not run W at n rows (not AFFINE, TILED, n > 8, the rule's mma
// kernel or small-row GEMM; `tune` forces a kernel as for linear_fused) or EMBER_SWIGLU_PAIRS=0: the caller then
// runs the GEMV and swiglu_fused.
bool linear_swiglu_pairs(const Weight& gate_up, const float* x, int64_t n, float* h, const LinearFusion& f,
                         cudaStream_t stream, const GemvTuning* tune = nullptr);

// y[t, r] += b[r] for t < n, r < rows (a projection's bias, added after linear() as the CPU does: one fp32 add).
// y, b device pointers; capturable.
void add_bias(float* y, const float* b, int64_t n, int64_t rows, cudaStream_t stream);

// ---- The two paths, callable directly (tests, benchmarks) ----

// Launch shape of the tensor-core GEMV; 0 = automatic. Tests use it to reach every code path.
struct GemvTuning {
    // Tensor-core "mma" kernel (linear_gemv_affine.cu)
    int cluster = 0;         // blocks (1..8) of a thread-block cluster that split the columns
    int max_clusters = 0;    // cap on the persistent grid (in clusters): many row blocks per block
    int rows_per_block = 0;  // 16 or 32
    // Streaming "q" kernel (linear_gemv_q.cu)
    int q_groups = 0;        // groups per MMA column set G (1, 2, 4; 8/G ≥ n)
    int q_slices = 0;        // K slices per tile S (1, 2, 4, 8, 16)
    int q_max_blocks = 0;    // cap on the grid (more tiles and rounds per block)
    int q_chunk = 0;         // cap on the K-units of x staged at once (forces the chunked path)
    int q_pdl = 0;           // programmatic dependent launch: 0 = default (on; env EMBER_GEMV_PDL=0 turns it
                             // off), 1 = on, -1 = off
    // Which affine kernel: 0 = default (q; env EMBER_GEMV=mma selects the old one), 1 = q, 2 = mma
    int kernel = 0;
};
void linear_gemv(const Weight& W, const float* x, int64_t n, float* y, cudaStream_t stream,
                 const GemvTuning& tune = {});  // 1 ≤ n ≤ 8
void linear_gemm(const Weight& W, const float* x, int64_t n, float* y, cudaStream_t stream, void* workspace,
                 size_t workspace_bytes);        // any n ≥ 1
size_t linear_gemm_workspace_bytes(const Weight& W, int64_t n);
// Which kernel linear_gemv uses for W and n (and `tune`), with its launch shape (for benchmark tables).
const char* linear_gemv_describe(const Weight& W, int64_t n, char* buf, size_t buf_bytes, const GemvTuning& tune = {});

namespace detail {  // [LINEAR_CUDA_DETAIL] implemented in linear_gemv_{q,affine,ggml,simple}.cu
// Returns false (and launches nothing) when W is not AFFINE 4/8-bit with 16-byte aligned data and x.
// x == nullptr: only fill `describe` (kernel and launch shape), launch nothing. `accumulate`: y = y + x·Wᵀ.
bool gemv_affine_mma(const Weight& W, const float* x, int n, float* y, cudaStream_t stream, const GemvTuning& tune,
                     char* describe = nullptr, size_t describe_bytes = 0, bool accumulate = false);
// Same contract for the streaming kernel (linear_gemv_q.cu): AFFINE 4/8-bit, 16-byte aligned data; false also
// when x cannot be staged in shared memory even in chunks.
// `split`: the output split by rows into parts (as gemm_q_split_out; y unused). `swiglu_pairs`: W is [gate; up]
// and y [n, W.rows / 2] = SwiGLU (linear_swiglu_pairs).
bool gemv_affine_q(const Weight& W, const float* x, int n, float* y, cudaStream_t stream, const GemvTuning& tune,
                   char* describe = nullptr, size_t describe_bytes = 0, const LinearFusion* fusion = nullptr,
                   const GemmOutSplit* split = nullptr, bool swiglu_pairs = false);
// GGML block types with a CUDA kernel, and the kernel (W.format == GGML, one of those types, 2-byte aligned data).
bool gemv_ggml_supported(GgmlType t);
// Multiprocessors of the device current at the first call (cached; linear_gemv_q.cu).
int sm_count();
// The tiled "stream" kernel (linear_gemv_stream.cu) for W.format == TILED: whether its shared memory fits W, and
// the launch (one per token, Q6_K: per 4 or 2 tokens; fusion as linear_fused; x == nullptr: only fill
// `describe`, which ends " x4" / " x2" where n tokens share passes).
bool gemv_stream_fits(const Weight& W);
// Tokens one launch of the stream kernel multiplies W with, for ntok tokens: 1, or (Q6_K) 2 or 4.
int gemv_stream_tokens_per_pass(const Weight& W, int ntok);
void gemv_stream(const Weight& W, const float* x, int n, float* y, cudaStream_t stream,
                 const LinearFusion* fusion = nullptr, char* describe = nullptr, size_t describe_bytes = 0);
void gemv_ggml(const Weight& W, const float* x, int n, float* y, cudaStream_t stream);
void gemv_dense(const Weight& W, const float* x, int n, float* y, cudaStream_t stream);
void gemv_affine_generic(const Weight& W, const float* x, int n, float* y, cudaStream_t stream);
}  // namespace detail

}  // namespace ember::cuda
