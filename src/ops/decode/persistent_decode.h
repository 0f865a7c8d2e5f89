// ops/decode/persistent_decode.h: the persistent decode kernel — a batch-1 decode step (or a run of its steps)
// as ONE launch: every SM resident for the whole run, working through a fixed list of phases (the GEMVs with
// their fused norms / SwiGLU / residual adds, the Gated DeltaNet step, the attention split and combine), with the
// dependencies between phases kept by counters in global memory instead of kernel boundaries, and the weights of
// every GEMV streamed by a producer warp into a shared-memory ring far ahead of the computation (the next
// phases' weights are in flight while the current phase waits for its input). Plain C++ header (no nvcc needed).
//
// Phases (the math of each is the op it replaces; the CPU reference of each is that op's):
//   GEMV     y = x'·Wᵀ (+ y when accum), W AFFINE 4-bit (group 32/64/128, bf16/f16/f32 scales), x' = RMSNorm(x)
//            (pre 1), SwiGLU(x rows [gate K | up K]) (pre 2) or x (pre 0): linear_fused (linear_cuda.h), same
//            numerics class (codes exact in bf16, x as hi + lo bf16, fp32 accumulation; another fp32 summation
//            order). Rows in 16-row tiles, a contiguous balanced range of tiles per block.
//   GDN      gated_delta_net_step with T = 1 (gdn_cuda.h): one value head per task.
//   ATTN     gated_attention_core with n = 1 (attention_cuda.h) up to the split partials: q/k RMSNorm + RoPE, the
//            new K/V row appended, one task per (kv head, key split); splits from the live length at run time.
//   COMBINE  merge of the split partials with the sigmoid output gate: one task per query head.
// Every block waits for phase p−1 to be complete (a counter reaching its target for this run) before phase p,
// so a phase sees every earlier phase's writes; data made inside the launch is read through L2 (ld.cg).
// Deterministic: fixed reduction orders, no floating-point atomics — repeated runs give the same bits.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ember::cuda::pd {

enum PdKind : int32_t { PD_GEMV = 0, PD_GDN = 1, PD_ATTN = 2, PD_COMBINE = 3 };
enum PdPre : int32_t { PD_PRE_NONE = 0, PD_PRE_RMSNORM = 1, PD_PRE_SWIGLU = 2 };
enum PdScale : int32_t { PD_BF16 = 0, PD_F16 = 1, PD_F32 = 2 };

struct PdGemv {
    const uint8_t* w;        // codes [rows, K/2] (MLX bit order), rows contiguous, 16-byte aligned
    const void* scales;      // [rows, K/gs]
    const void* biases;      // [rows, K/gs]
    const float* x;          // [K] (pre 2: [2K], gate then up)
    float* y;                // [rows]
    const float* norm_w;     // [K] (pre 1)
    int32_t rows, K, gs, st;  // st: PdScale
    int32_t pre, accum;
    float eps;
    int32_t pad;
};

struct PdGdn {  // gdn_cuda.h GdnDecodeArgs, T = 1
    const float *qkv, *z, *a, *b, *conv_w, *A_log, *dt_bias, *norm_w;
    float *conv_state, *S, *y;
    int32_t nk, nv, dk, dv, K, tiled_map;
    float eps;
    int32_t pad;
};

struct PdAttn {  // attention_cuda.h GatedAttentionDims + pointers, n = 1 at *pos_dev
    const float *qg, *k, *v, *q_norm, *k_norm;  // qg [H, 2, D] (gated) or [H, D]; k, v [G, D]; norms [D] or null
    void *Kc, *Vc;                               // [G, cap, D], fp32 or bf16 (kv_bf16) elements
    float *part;                                 // split partials: acc [max_splits, H, D] then (m, l) [max_splits, H, 2]
    float *out;                                  // [H, D]
    const float* rope;                           // [half] inv_freq, then [half] frequency factors (has_factor)
    int32_t H, G, D, half, cap, gated, interleaved, has_factor, max_splits;
    float eps, q_scale;                          // q_scale = score_mul · D^-½ · log2(e)
    int32_t kv_bf16;                             // the caches hold bf16 (attention_cuda.h GatedAttentionDims)
};

struct PdPhase {
    int32_t kind;  // PdKind
    int32_t pad[3];
    union {
        PdGemv gemv;
        PdGdn gdn;
        PdAttn attn;
    };
};

// One launch: phases [first, first + count) of a device phase table; flags[i] counts the blocks done with phase
// i (monotonic across runs: the target of a run is (epoch + 1) · grid, wrapping); sync[0] = epoch, sync[1] =
// blocks finished (the last block of a launch with `last` set resets it and advances the epoch).
struct PdLaunch {
    const PdPhase* phases;
    int32_t first, count;
    uint32_t* flags;
    uint32_t* sync;
    const int32_t* pos_dev;  // position of the token (attention)
    int32_t last;            // this launch ends the run (advances the epoch)
    int32_t grid;            // blocks (all resident: one per SM)
    int32_t nslots, slot_bytes, work_bytes;  // shared-memory ring and work area (pd_smem_plan)
    int32_t kc;                              // K columns per ring slot
    // Diagnostics (null: off): per phase p and block b, trace[(p · grid + b) · 4 + i] = %globaltimer ns at
    // i = 0 phase entry, 1 after the wait for phase p − 1, 2 done (before the signal), and 3 = ns that block's
    // consumer thread 0 spent waiting for ring slots in the phase.
    uint64_t* trace;
    int32_t backoff_ns;  // pause between two polls of a phase counter (0: spin)
    int32_t debug;       // experiments (EMBER_PD_DEBUG): bit 0 GEMV consumers skip the products (wrong results, for
                         // timing the weight stream alone); bit 1 per-row slot copies only; bit 2 per-row slots by
                         // cp.async pieces instead of 1-D bulk copies; timing-only (wrong results): bit 3 GEMV
                         // consumers skip the per-group scale / bias epilogue, bit 5 skip the per-tile barrier and
                         // the cross-warp reduction
};

// What each phase kind accepts (checked when a decode plan is built; anything else runs as ordinary kernels).
bool pd_gemv_supported(int bits, int group_size, int scale_dtype_bytes, int64_t rows, int64_t K, const void* w,
                       const void* scales, const void* biases);
bool pd_gdn_supported(int64_t nk, int64_t nv, int64_t dk, int64_t dv, int K);
bool pd_attention_supported(int64_t H, int64_t G, int64_t D, int64_t rot_dim);
// Key splits an ATTN phase may use (the partials' workspace: max_splits · H · (D + 2) floats).
int pd_attention_max_splits(int64_t G);

// Shared-memory plan for a launch whose largest GEMV input has max_k columns (x staging) and whose GEMVs have
// scales of up to `scale_bytes` bytes: fills nslots, slot_bytes, work_bytes, kc; returns the dynamic bytes.
size_t pd_smem_plan(int64_t max_k, int scale_bytes, PdLaunch& L);
// Blocks of a launch (the SM count of the current device).
int pd_grid();

// Enqueues one launch (graph-capturable; no allocation, no host reads).
void pd_launch(const PdLaunch& L, size_t smem_bytes, cudaStream_t stream);

}  // namespace ember::cuda::pd
