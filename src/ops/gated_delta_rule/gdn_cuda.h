// Gated DeltaNet step on the GPU (qwen35.md §2.6): conv + SiLU → L2 norms → gates → delta rule on the fp32 state →
// gated RMSNorm, fused into one kernel launch for any T. Matches the CPU composition in layers/gated_delta_net.cpp
// (causal_conv1d_silu, l2norm, gdn_gates, gated_delta_rule_*, rmsnorm_gated). Plain C++ header (no nvcc needed).
#pragma once
#include <cstdint>
#include <cuda_runtime_api.h>

#include "ops/gated_delta_rule/gated_delta_rule.h"

namespace ember::cuda {

struct GdnDecodeArgs {  // all device pointers, fp32, rows contiguous
    const float* qkv;      // [T, conv_dim] in_proj_qkv output before the conv, conv_dim = 2*nk*dk + nv*dv (q | k | v)
    const float* z;        // [T, nv*dv]
    const float* a;        // [T, nv]
    const float* b;        // [T, nv]
    const float* conv_w;   // [conv_dim, K]   (w[c, K−1] multiplies the current token)
    const float* A_log;    // [nv]
    const float* dt_bias;  // [nv]
    const float* norm_w;   // [dv]  gated RMSNorm weight (plain w, not 1 + w)
    float* conv_state;     // [K−1, conv_dim] in/out, oldest row first
    float* S;              // [nv, dk, dv] in/out (dv contiguous, HF layout)
    float* y;              // [T, nv*dv] out: gated-RMSNormed core output (input of out_proj); must not alias inputs
    GdnShape shape;        // nk, nv, dk, dv, key-head map
    int K;                 // conv kernel size, 2..4
    float eps;             // gated RMSNorm eps
};

// Advances one GDN layer by T tokens (T = 1: decode). Per token t and value head h (key head map(h)):
//   c = silu(causal_conv(qkv)) ;  q̂ = l2norm(q_c)·dk^-0.5 ;  k̂ = l2norm(k_c)   (eps 1e-6 inside the rsqrt)
//   g = −exp(A_log)·softplus(a + dt_bias) (threshold 20) ;  β = σ(b)
//   S ← e^g S ;  u = Sᵀk̂ ;  δ = β(v − u) ;  S ← S + k̂ δᵀ ;  o = Sᵀq̂ ;  y = norm_w·(o / rms(o))·silu(z)
// One kernel launch for every T (a thread-block cluster per key head; tokens are processed sequentially inside
// it with the state tile in registers), no allocation, no host sync: capturable in a CUDA graph. Requires
// nv % nk == 0, nv/nk ≤ 8, 2 ≤ K ≤ 4, dk ≤ 256 and a head slice that fits 256 threads × 16 rows × 4 columns
// (checked with EMBER_CHECK; every Qwen3.5 shape qualifies: dk = dv = 128, nv/nk ≤ 4). S must be 16-byte
// aligned for the fast path (else scalar accesses). T = 0 does nothing. Deterministic (no atomics): results do
// not depend on timing, and a graph replay equals direct calls bit for bit. Design notes: gdn_cuda.cu.
void gated_delta_net_step(const GdnDecodeArgs& args, int64_t T, cudaStream_t stream);

// Batched decode: n_rows independent sequences, one token each. Row r (< n_rows) is the T = 1 step of
// gated_delta_net_step on row r of qkv / z / a / b / y (row strides as for T = n_rows tokens), with that
// sequence's state at args.conv_state + slot·conv_stride and args.S + slot·S_stride (floats), where
// slot = rows_dev[2·r] (device int32 array of (slot, position) pairs; the position is not used here).
// Rows must name distinct slots. Two kernels (`kernel`; AUTO: the rule below, or EMBER_GDN_ROWS=slice|head):
//   SLICE: the single-sequence kernel with T = 1 per row (a row's result is bit-identical to the single-sequence
//          call on that state); the fewer rows, the better it fills the GPU.
//   HEAD:  a block per (row, value head) with the whole head's state in registers (gdn_rows_cuda.h; dk, dv ≤ 128):
//          the same math in other fp32 summation orders; AUTO takes it from n_rows·nv ≥ 15/16 of a block per SM
//          (H100, 2B at 8 rows = 128 blocks on 132 SMs: 4,013 vs 3,852 tok/s with SLICE; 2026-12-06).
// Graph-capturable (rows_dev read at run time).
// Checked: 0 ≤ n_rows ≤ 65535 (n_rows = 0 does nothing), conv_stride ≥ (K−1)·conv_dim, S_stride ≥ nv·dk·dv; the
// slots themselves are not range-checked (device memory). Fast float4 state path when args.S is 16-byte aligned
// and S_stride % 4 == 0, else scalar (same results). A graph captures n_rows and the pointers, not the slots.
enum class GdnRowsKernel { AUTO, SLICE, HEAD };
void gated_delta_net_step_rows(const GdnDecodeArgs& args, const int32_t* rows_dev, int64_t conv_stride,
                               int64_t S_stride, int64_t n_rows, cudaStream_t stream,
                               GdnRowsKernel kernel = GdnRowsKernel::AUTO);

}  // namespace ember::cuda
