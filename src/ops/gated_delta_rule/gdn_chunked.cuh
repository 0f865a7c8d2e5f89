// Internal to the chunked GDN prefill (gdn_chunked_cuda.h): the workspace layout of one piece of ≤ 1024 tokens
// and the three kernels' launchers (gdn_chunked_prep.cu, gdn_chunked_state.cu, gdn_chunked_out.cu; the driver
// is gdn_chunked_cuda.cu). CUDA only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "ops/gated_delta_rule/gdn_cuda.h"

namespace ember::cuda::gdn_chunked {

constexpr int kBT = 64;                // tokens per chunk
constexpr int kPieceChunks = 16;       // chunks per piece (1024 tokens): bounds the workspace
constexpr float kL2Eps = 1e-6f;        // HF/FLA l2norm eps (as the step kernel)

// Padded head dims (the tiles are zero beyond dk / dv): DK ∈ {64, 128}, DV ∈ {32, 64, 128}.
inline int padded_dk(int64_t dk) { return dk <= 64 ? 64 : 128; }
inline int padded_dv(int64_t dv) { return dv <= 32 ? 32 : dv <= 64 ? 64 : 128; }

// Workspace of one piece of nc chunks (floats, every section a multiple of 4 floats):
struct Layout {
    float* q;     // [nk][nc][64][DK]  q̂ = l2norm(q)·dk^-0.5 (rows past the piece, columns past dk: 0)
    float* k;     // [nk][nc][64][DK]  k̂ = l2norm(k)
    float* w;     // [nv][nc][64][DK]  W = (I + A)⁻¹(β e^γ ⊙ K̂)
    float* u;     // [nv][nc][64][DV]  U = (I + A)⁻¹(β ⊙ V), overwritten with U' = U − W S by the state kernel
    float* p;     // [nv][nc][64][64]  P = lower(Q̂K̂ᵀ ⊙ D) (the 16×8 tiles on or below the diagonal)
    float* s;     // [nv][nc][DK][DV]  state before each chunk
    float* gate;  // [nv][nc][2][64]   e^γ, e^{γ_last − γ} (rows past the piece: e^γ_last, 1)
};

inline int64_t layout_floats(const GdnShape& s, int nc) {
    const int64_t DK = padded_dk(s.dk), DV = padded_dv(s.dv);
    return s.nk * nc * kBT * DK * 2 + s.nv * nc * (kBT * DK + kBT * DV + kBT * kBT + DK * DV + 2 * kBT);
}

inline Layout make_layout(const GdnShape& s, int nc, float* base) {
    const int64_t DK = padded_dk(s.dk), DV = padded_dv(s.dv);
    Layout L;
    L.q = base;
    L.k = L.q + s.nk * nc * kBT * DK;
    L.w = L.k + s.nk * nc * kBT * DK;
    L.u = L.w + s.nv * nc * kBT * DK;
    L.p = L.u + s.nv * nc * kBT * DV;
    L.s = L.p + s.nv * nc * kBT * kBT;
    L.gate = L.s + s.nv * nc * DK * DV;
    return L;
}

// One piece: tokens [t0, t0 + T) of the call's T_all tokens, nc = ⌈T / 64⌉ chunks.
struct Piece {
    int64_t t0, T, T_all;
    int nc;
    bool last;  // the last piece writes the conv state
    bool vec;   // dk, dv % 4 == 0 and qkv, conv_state 16-byte aligned: the prep kernel copies rows by cp.async
    Layout ws;
    int stop_after = 0;  // benchmark only: the prep kernel returns after its step 1, 2, 4 or 5 (0: runs through)
};

__host__ __device__ inline int key_head_of(const GdnShape& s, int h) {
    const int r = static_cast<int>(s.nv / s.nk), nk = static_cast<int>(s.nk);
    return s.map == KeyHeadMap::GROUPED ? h / r : h % nk;
}

// f.template operator()<DK, DV>() for the shape's padded head dims (the kernels' template instances).
template <class F>
void with_padded_dims(const GdnShape& s, F&& f) {
    const int DK = padded_dk(s.dk), DV = padded_dv(s.dv);
    if (DK == 64)
        DV == 32 ? f.template operator()<64, 32>() : DV == 64 ? f.template operator()<64, 64>() : f.template operator()<64, 128>();
    else
        DV == 32 ? f.template operator()<128, 32>() : DV == 64 ? f.template operator()<128, 64>() : f.template operator()<128, 128>();
}

// Kernel<<<grid, block, smem, st>>>(args...), its dynamic shared memory limit raised to smem once (one size per
// kernel instance; single-device process). A plain launch, not programmatic dependent launch: with PDL a 2B
// layer of 512 tokens took 87.3 µs instead of 82.2 µs on the H200 (the early blocks of the next kernel cannot
// share an SM with these one-block-per-SM kernels; they only wait). The kernels still call pdl_wait() first,
// and pdl_trigger() lets a PDL-launched successor (the output projection) start early.
template <auto Kernel, class... A>
void launch_with_smem(dim3 grid, dim3 block, size_t smem, cudaStream_t st, A&&... args) {
    static const bool attr_set = [&] {
        CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
        return true;
    }();
    (void)attr_set;
    launch_ex(Kernel, grid, block, smem, st, false, 0u, std::forward<A>(args)...);
}

// Launchers (grid and shared memory chosen inside).
void launch_prep(const GdnDecodeArgs& a, const Piece& pc, cudaStream_t st);  // conv … W, U, P
// The state kernel's column block (16 or 32 columns) and copy stages (1 or 2), chosen from the shape
// (gdn_chunked_state.cu); EMBER_GDN_CB / EMBER_GDN_STAGES override them (A/B runs).
struct StatePlan {
    int cb, stages;
};
StatePlan state_plan(const GdnShape& s);
void launch_state(const GdnDecodeArgs& a, const Piece& pc, const StatePlan& plan, cudaStream_t st);  // U', S
void launch_out(const GdnDecodeArgs& a, const Piece& pc, cudaStream_t st);  // y (+ conv state)

}  // namespace ember::cuda::gdn_chunked
