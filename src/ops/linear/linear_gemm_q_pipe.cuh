// ops/linear/linear_gemm_q_pipe.cuh: the copy pipeline shared by the affine GEMM's two kernels (linear_gemm_q.cu:
// mma.sync consumer warps; linear_gemm_q_wgmma.cuh: wgmma consumer warpgroups) — block configuration, the
// shared-memory slot of one stage, the kernel arguments, mbarrier / bulk-copy helpers and the producer warp's copies
// of a stage. Design and numerics: linear_gemm_q.cu, linear_gemm_q.h. Included by linear_gemm_q.cu only.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ops/linear/split_out.cuh"

namespace ember::cuda::gemmq {

using ember::cuda::detail::split_out_row;

constexpr int kStageK = 64;             // columns per stage (two 32-column spans)
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
constexpr int kSmemMax = 227 * 1024;    // dynamic shared memory per block on sm_90

// Block tile: WW × WT consumer warps, each MF m16 fragments of W rows × NF n8 fragments of tokens, plus one
// producer warp that issues every copy. MINB: blocks per SM the launch bounds ask for.
template <int WW_, int WT_, int MF_, int NF_, int MINB_>
struct Cfg {
    static constexpr int WW = WW_, WT = WT_, MF = MF_, NF = NF_, MINB = MINB_;
    static constexpr int ALIGN = 16;                          // slot alignment (bytes)
    static constexpr int NCW = WW * WT;                       // consumer warps
    static constexpr int BW = WW * 16 * MF, BT = WT * 8 * NF;
    static constexpr int NTH = 32 * (NCW + 1);                // + the producer warp
};

// Shared-memory slot of one stage (bytes).
template <class C, int BITS>
struct Slot {
    static constexpr int ROW = kStageK * BITS / 8;  // code bytes of a W row per stage (32 / 64)
    // Padded row stride: lane (g, t) reads word 12g + t (4-bit, 32-bit reads: 32 distinct banks) or words
    // 24g + 2t, +1 (8-bit, 64-bit reads, served per half-warp: g = 0..3 → 8-word ranges 0, 24, 16, 8).
    static constexpr int WSTRIDE = BITS == 4 ? ROW + 16 : ROW + 32;  // 48 / 96
    static constexpr int X = C::BT * 256;           // hi plane [BT][64] bf16, then lo plane
    static constexpr int W = C::BW * WSTRIDE;
    static constexpr int SB = 2 * C::BW * 8;        // [group 0..1][BW] {s, b − off·s} f32 pairs
    static constexpr int XS = 2 * C::BT * 4;        // [group 0..1][BT] f32 x sums
    static constexpr int BYTES = (X + W + SB + XS + C::ALIGN - 1) / C::ALIGN * C::ALIGN;
    static constexpr int PAD = C::ALIGN > 16 ? C::ALIGN : 0;  // the kernel aligns the ring's base itself
    static constexpr int R = 4 * BYTES + PAD <= kSmemMax / C::MINB ? 4 : 3;  // ring depth (8 slots were tried for
    // the wgmma tiles: no faster, the 128-row tile 12 % slower)
    static constexpr int SMEM = R * BYTES + PAD;
    static_assert(3 * BYTES + PAD <= kSmemMax / C::MINB, "block tile too large for shared memory");
    static_assert(X % 16 == 0 && W % 16 == 0 && SB % 16 == 0 && XS % 16 == 0, "16-byte alignment");
};

struct Args {
    const uint8_t* w;       // codes [N, row_bytes]
    const uint8_t* xt;      // pre-tiled x   [token tile][stage][planes · BT · 128 bytes] (gemm_prep_x)
    const uint8_t* sbt;     // {s, b'} pairs transposed: [group][sb_ld] float2 (gemm_prep_sb / gemm_q_make_pairs)
    const uint8_t* xst;     // pre-tiled x sums [token tile][stage][2][BT] f32
    float* y;               // [M, N], or [split, M, N] partials (rows [0, yend[0])); the other parts: y1..y3
    float *y1, *y2, *y3;    // rows [yend[k − 1], yend[k]) of part k as [M, yend[k] − yend[k − 1]] (GemmOutSplit)
    int yend[3];            // part ends (INT_MAX past the last part; partials: one part)
    int M, N, K, row_bytes;
    int stages, sps;        // stages of K, stages per split
    int64_t sb_ld;          // rows of the pairs' layout (≥ every row tile's end)
    int gs, ng;             // group size, groups per row
};

// Where output row r of token 0 goes, and the row stride of its part (static selects: no indexed parameters).
// Split slice z of a K split writes its own [M, N] partials (one part then).
__device__ __forceinline__ float* out_row(const Args& a, int r, int& ld) {
    return split_out_row(a.y + int64_t(blockIdx.z) * a.M * a.N, a.y1, a.y2, a.y3, a.yend, a.N, r, ld);
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// mbarriers (shared::cta) and bulk copies global → shared completing on one (PTX ISA: mbarrier, cp.async.bulk).
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Arrives and adds `bytes` to the phase's expected transaction count.
__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Waits until the phase with the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "WAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n"
        "}\n" ::"r"(bar),
        "r"(parity)
        : "memory");
}
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}
__device__ __forceinline__ void ldsm4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

// bf16x2 {byte b of lo, byte b of hi} as exact values (codes 0..255): 2²³ + q as fp32 bits, minus 2²³.
__device__ __forceinline__ uint32_t byte_pair(uint32_t lo, uint32_t hi, int b) {
    const float f0 = __uint_as_float(__byte_perm(lo, 0x4B000000u, 0x7540u + unsigned(b))) - 8388608.f;
    const float f1 = __uint_as_float(__byte_perm(hi, 0x4B000000u, 0x7540u + unsigned(b))) - 8388608.f;
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(f1), "f"(f0));  // f0 → low half
    return r;
}

// The producer warp's copies of stage st (columns [64·st, 64·st + 64)) into `slot`, completing on `bar` (FULL):
// lane 0 sets the expected bytes and issues the bulk copies of x and of the x sums (pre-tiled, contiguous) and of
// the {s, b'} pairs of the groups the stage closes (one contiguous BW-row range per group: group 32: two, the
// second of a ragged last stage the layout's zero group; 64: one; 128: one at odd stages), into [group 0..1][BW];
// every lane copies its 16-byte chunks of the codes (chunk lane % WCH of rows lane / WCH + (32 / WCH)·j; rows
// ≥ N and the invalid half of a ragged last stage are zero-filled) with cp.async and arrives on `bar` when they
// land (.noinc: the 32 arrivals are part of the barrier's count, 1 + 32).
template <class C, int BITS, bool HILO>
__device__ __forceinline__ void produce_stage(const Args& a, uint32_t slot, uint32_t bar, int st, int n0, int m0,
                                              int lane) {
    using S = Slot<C, BITS>;
    constexpr uint32_t XB = (HILO ? 2 : 1) * C::BT * 128;  // x bytes of a stage
    constexpr int WCH = S::ROW / 16, WR = 32 / WCH, WJ = C::BW / WR;
    static_assert(C::BW % WR == 0, "code rows per lane step");
    const int tt = m0 / C::BT;
    if (lane == 0) {
        constexpr uint32_t GB = C::BW * 8;  // one group's pairs of the tile's rows
        const int g0 = a.gs == 32 ? 2 * st : a.gs == 64 ? st : st >> 1;
        const int ng = a.gs == 32 ? 2 : a.gs == 64 ? 1 : (st & 1);  // (group 32: a zero group past an odd last)
        mbar_expect(bar, XB + uint32_t(ng) * GB + S::XS);
        bulk_copy(slot, a.xt + (int64_t(tt) * a.stages + st) * XB, XB, bar);
        for (int j = 0; j < ng; ++j)
            bulk_copy(slot + S::X + S::W + j * GB, a.sbt + (int64_t(g0 + j) * a.sb_ld + n0) * 8, GB, bar);
        bulk_copy(slot + S::X + S::W + S::SB, a.xst + (int64_t(tt) * a.stages + st) * S::XS, S::XS, bar);
    }
    const int c = lane % WCH, r0 = lane / WCH, kb = st * S::ROW + 16 * c;
    const bool kok = kb < a.row_bytes;
    const uint8_t* q = a.w + int64_t(n0 + r0) * a.row_bytes + kb;
    const int64_t step = int64_t(WR) * a.row_bytes;
    const uint32_t d = slot + S::X + r0 * S::WSTRIDE + 16 * c;
#pragma unroll 7
    for (int j = 0; j < WJ; ++j) {
        const bool ok = kok && n0 + r0 + WR * j < a.N;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d + j * WR * S::WSTRIDE), "l"(q),
                     "r"(ok ? 16 : 0)
                     : "memory");  // (!ok: nothing is read)
        q += step;
    }
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}


// A consumer warp hands slot `bar`'s EMPTY barrier its arrival once every lane's reads of the slot are done. The
// proxy fence is what makes them done: the slot's next bulk copies write through the async proxy, and a plain
// release arrive does not wait for shared-memory loads still in flight (ptxas issued the close step's LDS of the
// pairs and x sums, then the arrive, and only then waited for the loaded values — the producer's next bulk copy could
// overwrite the pairs before they were read: wrong rows of the 9B's LM head at 9-16 tokens, 2026-12-07).
__device__ __forceinline__ void release_slot(uint32_t bar, int lane) {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncwarp();
    if (lane == 0) mbar_arrive(bar);
}

// This block's place: its W-row and token tile origins, its K slice (stages st0 .. st0 + nst), warp and lane.
struct BlockPos {
    int n0, m0, st0, nst, warp, lane;
};
template <class C>
__device__ __forceinline__ BlockPos block_pos(const Args& a) {
    const int st0 = int(blockIdx.z) * a.sps;
    return {int(blockIdx.x) * C::BW, int(blockIdx.y) * C::BT, st0, min(a.stages, st0 + a.sps) - st0,
            int(threadIdx.x) >> 5, int(threadIdx.x) & 31};
}

// The ring's mbarriers at bar0 (FULL[R]: the slot's copies landed — 1 expect + 32 cp.async arrivals; EMPTY[R]: the
// consumers are done with it — one arrival per consumer warp); thread 0 of the block, before a __syncthreads.
template <class C, int R>
__device__ __forceinline__ void ring_init(uint32_t bar0) {
    for (int i = 0; i < R; ++i) mbar_init(bar0 + 8u * unsigned(i), 1 + 32), mbar_init(bar0 + 8u * unsigned(R + i), C::NCW);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// The producer warp's loop over the block's nst stages from st0: use u of slot i waits until the consumers
// released use u − 1 (EMPTY phase u − 1), then copies.
template <class C, int BITS, bool HILO, int R>
__device__ __forceinline__ void ring_produce(const Args& a, uint32_t smem0, uint32_t bar0, int st0, int nst, int n0,
                                             int m0, int lane) {
    for (int s = 0; s < nst; ++s) {
        const int sl = s % R, u = s / R;
        if (u > 0) mbar_wait(bar0 + 8u * unsigned(R + sl), uint32_t(u - 1) & 1u);
        produce_stage<C, BITS, HILO>(a, smem0 + sl * Slot<C, BITS>::BYTES, bar0 + 8u * unsigned(sl), st0 + s, n0, m0,
                                     lane);
    }
}

// Block start of both kernels: the ring's barriers initialized, then the producer warp (warp NCW) runs its loop and
// returns true; consumer warps return false at once.
template <class C, int BITS, bool HILO, int R>
__device__ __forceinline__ bool ring_start(const Args& a, uint32_t smem0, uint32_t bar0, const BlockPos& bp) {
    if (threadIdx.x == 0) ring_init<C, R>(bar0);
    __syncthreads();
    if (bp.warp != C::NCW) return false;
    ring_produce<C, BITS, HILO, R>(a, smem0, bar0, bp.st0, bp.nst, bp.n0, bp.m0, bp.lane);
    return true;
}

}  // namespace ember::cuda::gemmq
