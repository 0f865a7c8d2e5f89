// ops/linear/linear_gemm_q.cu: the affine 4-/8-bit tensor-core GEMM for many tokens (contract and numerics:
// linear_gemm_q.h). Y[M tokens, N rows] = X[M, K] · W[N, K]ᵀ.
//
// Two kernels share the copy pipeline (linear_gemm_q_pipe.cuh) and the prep kernels: the mma.sync kernel below
// (configs 0-4, kept for the smallest token counts) and the wgmma kernel of linear_gemm_q_wgmma.cuh (configs 5-7,
// 1.45-1.6× faster from M ≈ 32 on); the written rule picks among all of them.
// Design (mma.sync m16n8k16 bf16 → fp32; one block tile of BW W-rows × BT tokens per block, K in stages of 64):
//  - Prep kernels (per call): x → hi / lo bf16 and the per-group sums Σ (hi + lo), and the scales / biases →
//    {s, b − off·s} fp32 pairs, each written pre-tiled: for every (token tile | row tile, stage) the bytes lie
//    exactly as the kernel's shared-memory slot wants them (x's 16-byte chunks already XOR-swizzled by token row,
//    for conflict-free ldmatrix; zeros past M, N and K), so x, pairs and sums are three bulk copies a stage; the
//    codes (read in place from the weight) are 16-byte cp.async chunks. (One bulk copy per 32-byte code row was
//    tried: 3× slower — the copy engine's per-copy cost.)
//  - Main kernel: WW × WT consumer warps and one producer warp, a ring of R shared-memory slots. The producer
//    issues a stage's copies (completing on the slot's FULL mbarrier: the bulk copies' byte count and the code
//    copies' 32 arrivals) as soon as the consumers have released the slot (its EMPTY mbarrier); consumers wait on
//    FULL, compute, and release. No block-wide barrier in the loop: consumer warps drift, so their MMA, decode and epilogue
//    phases overlap. A slot: x hi plane [BT][64] bf16 then lo plane, the raw codes of BW rows (row stride padded
//    by 16 bytes: the lanes' word reads hit distinct banks), the {s, b'} pairs and x sums of the stage's groups.
//  - A warp owns MF m16 fragments (W rows) × NF n8 fragments (tokens). W is the A operand, decoded from the raw
//    codes in registers (no decoded copy in shared memory): 4-bit: pair16 (one shift + one LOP3 per two codes,
//    exact bf16 16 + q); 8-bit: byte → fp32 by the 2²³ trick, two to a bf16x2 (exact). x is the B operand
//    (ldmatrix.x4: hi and lo of one k-step). Per group the products go to an accumulator P that the group's first
//    k-step writes fresh (mma0); at the group's end acc += s·P + (b − off·s)·X (off = 16 for 4-bit codes 16 + q,
//    0 for 8-bit).
//  - Column order. MMA k-step s (16 logical columns) of thread quad t holds logical columns 16s + {2t, 2t+1,
//    2t+8, 2t+9}; within each 32-column span the codes of thread t are one 32-bit word (4-bit: word t of the span,
//    nibble j = physical column 8t + j) or two (8-bit: bytes 8t .. 8t+7). pair16(w, 2s + h) gives nibbles
//    2s + h and 2s + h + 4, so logical column L = 16s + 8h + 2t + e of a span holds physical column
//    8t + 2s + h + 4e. The prep kernel writes x in that order; a dot product over a group does not depend on the
//    order, and every group is a whole number of spans (group ≥ 32).
//  - K split: blockIdx.z takes a contiguous range of whole groups' stages and writes fp32 partials; a reduction
//    kernel sums the splits in order (deterministic). (Tried and dropped, 2026-12-06: the block that finishes a
//    tile's last slice summing the partials itself, a counter per tile, no second launch — H100, 2B at 64 rows:
//    15,937 vs 17,618 tok/s with the reduction kernel: one block's serial sum of a whole tile outlasts a launch.
//    Also tried and dropped, 2026-12-06, H100, 2B at 64 rows, one call: the split's blocks of a tile as a cluster
//    (1, 1, split) summing the partial tiles through distributed shared memory in rank order (the same bits):
//    16,384 vs 17,689 tok/s; and programmatic dependent launches of prep / GEMM / reduction, the GEMM copying its
//    first stages' weights before the wait: 15,896 (trigger after the products) or 15,571 (trigger at the start),
//    pp512 42,426 vs 45,518 with both — bench/results/2026-12-06-h100-gemm-pdl-cluster.md.)
#include "ops/linear/linear_gemm_q.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "core/env.h"
#include "ops/linear/linear_cuda.h"
#include "ops/linear/linear_gemm_q_pipe.cuh"
#include "ops/linear/linear_gemm_q_wgmma.cuh"
#include "ops/linear/linear_gemv_mma.cuh"
#include "quant/affine.h"

namespace ember::cuda {
namespace {

using detail::mma;
using detail::mma0;
using detail::pair16;
using detail::split2;

using namespace gemmq;

// One stage of a consumer warp: products into P, and at each group's end acc += s·P + b'·X (b' = b − off·s, from
// gemm_prep_sb). OPEN: the stage starts a group (its first k-step writes P fresh, mma0); a group of 128 spans two
// stages (OPEN on even stages, closed on odd ones), a group of ≤ 64 columns lies within one stage.
template <class C, int BITS, int GS, bool HILO, bool OPEN>
__device__ __forceinline__ void consume_stage(const Args& a, const uint8_t* slot, uint32_t xaddr, int k0, int lane,
                                              int rw, int tw, float (&acc)[C::MF][C::NF][4],
                                              float (&P)[C::MF][C::NF][4]) {
    using S = Slot<C, BITS>;
    constexpr int MF = C::MF, NF = C::NF;
    const int g = lane >> 2, t = lane & 3;
    const uint8_t* wsl = slot + S::X;
    const float2* sbl = reinterpret_cast<const float2*>(slot + S::X + S::W);
    const float* xql = reinterpret_cast<const float*>(slot + S::X + S::W + S::SB);
#pragma unroll
    for (int sp = 0; sp < 2; ++sp) {
        if (GS == 32 && k0 + 32 * sp >= a.K) break;  // ragged last stage (K % 64 == 32)
        uint32_t wa[MF][BITS / 4], wb[MF][BITS / 4];  // this lane's code words of rows g, g + 8
#pragma unroll
        for (int i = 0; i < MF; ++i) {
            const uint8_t* pa = wsl + (rw + 16 * i + g) * S::WSTRIDE + sp * (S::ROW / 2) + t * BITS;
            if constexpr (BITS == 4) {
                wa[i][0] = *reinterpret_cast<const uint32_t*>(pa);
                wb[i][0] = *reinterpret_cast<const uint32_t*>(pa + 8 * S::WSTRIDE);
            } else {
                const uint2 va = *reinterpret_cast<const uint2*>(pa);
                const uint2 vb = *reinterpret_cast<const uint2*>(pa + 8 * S::WSTRIDE);
                wa[i][0] = va.x, wa[i][1] = va.y, wb[i][0] = vb.x, wb[i][1] = vb.y;
            }
        }
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {
            const int q = 2 * sp + ks;  // k-step of the stage: 16-byte chunks 2q, 2q + 1 of a token row
            const bool fresh = GS == 32 ? ks == 0 : (OPEN && sp == 0 && ks == 0);  // first k-step of a group
            uint32_t bh[NF][2], bl[NF][2];
#pragma unroll
            for (int j = 0; j < NF; ++j) {
                const int row = tw + 8 * j + (lane & 7), mi = lane >> 3;
                const int chunk = (2 * q + (mi & 1)) ^ (row & 7);
                if constexpr (HILO) {
                    ldsm4(xaddr + (mi >> 1) * (C::BT * 128) + row * 128 + (chunk << 4), bh[j][0], bh[j][1], bl[j][0],
                          bl[j][1]);
                } else if (j % 2 == 0) {  // x4 over hi only: chunks {2q, 2q+1} of token blocks j and j + 1 (NF even)
                    const int row2 = tw + 8 * (j + (mi >> 1)) + (lane & 7);
                    const int ch2 = (2 * q + (mi & 1)) ^ (row2 & 7);
                    ldsm4(xaddr + row2 * 128 + (ch2 << 4), bh[j][0], bh[j][1], bh[j + 1][0], bh[j + 1][1]);
                }
            }
#pragma unroll
            for (int i = 0; i < MF; ++i) {
                uint32_t a0, a1, a2, a3;
                if constexpr (BITS == 4) {
                    a0 = pair16(wa[i][0], 2 * ks), a1 = pair16(wb[i][0], 2 * ks);
                    a2 = pair16(wa[i][0], 2 * ks + 1), a3 = pair16(wb[i][0], 2 * ks + 1);
                } else {
                    a0 = byte_pair(wa[i][0], wa[i][1], 2 * ks), a1 = byte_pair(wb[i][0], wb[i][1], 2 * ks);
                    a2 = byte_pair(wa[i][0], wa[i][1], 2 * ks + 1), a3 = byte_pair(wb[i][0], wb[i][1], 2 * ks + 1);
                }
#pragma unroll
                for (int j = 0; j < NF; ++j) {
                    if (fresh) mma0(P[i][j], a0, a1, a2, a3, bh[j][0], bh[j][1]);
                    else mma(P[i][j], a0, a1, a2, a3, bh[j][0], bh[j][1]);
                }
                if constexpr (HILO) {
#pragma unroll
                    for (int j = 0; j < NF; ++j) mma(P[i][j], a0, a1, a2, a3, bl[j][0], bl[j][1]);
                }
            }
            const bool close = GS == 32 ? ks == 1 : (sp == 1 && ks == 1 && (GS == 64 || !OPEN));
            if (close) {
                const int gi = GS == 32 ? sp : 0;
#pragma unroll
                for (int i = 0; i < MF; ++i) {
                    const int ra = rw + 16 * i + g;
                    const float2 A = sbl[gi * C::BW + ra], B = sbl[gi * C::BW + ra + 8];
#pragma unroll
                    for (int j = 0; j < NF; ++j) {
                        const float2 X = *reinterpret_cast<const float2*>(xql + gi * C::BT + tw + 8 * j + 2 * t);
                        acc[i][j][0] = fmaf(A.y, X.x, fmaf(A.x, P[i][j][0], acc[i][j][0]));
                        acc[i][j][1] = fmaf(A.y, X.y, fmaf(A.x, P[i][j][1], acc[i][j][1]));
                        acc[i][j][2] = fmaf(B.y, X.x, fmaf(B.x, P[i][j][2], acc[i][j][2]));
                        acc[i][j][3] = fmaf(B.y, X.y, fmaf(B.x, P[i][j][3], acc[i][j][3]));
                    }
                }
            }
        }
    }
}

template <class C, int BITS, int GS, bool HILO>
__global__ void __launch_bounds__(C::NTH, C::MINB) gemm_q_kernel(const Args a) {
    using S = Slot<C, BITS>;
    constexpr int MF = C::MF, NF = C::NF, R = S::R;
    extern __shared__ __align__(1024) uint8_t smem[];
    __shared__ __align__(8) uint64_t bars[2 * R];  // FULL[R] (the slot's copies landed), EMPTY[R] (consumers done)
    const BlockPos bp = block_pos<C>(a);
    const int n0 = bp.n0, m0 = bp.m0, st0 = bp.st0, nst = bp.nst, warp = bp.warp, lane = bp.lane;
    const uint32_t smem0 = smem_u32(smem), bar0 = smem_u32(bars);
    auto full = [&](int i) { return bar0 + 8u * unsigned(i); };
    auto empty = [&](int i) { return bar0 + 8u * unsigned(R + i); };
    if (ring_start<C, BITS, HILO, R>(a, smem0, bar0, bp)) return;  // the producer warp's whole work

    // ---- consumers ----
    const int rw = (warp % C::WW) * 16 * MF, tw = (warp / C::WW) * 8 * NF;
    float acc[MF][NF][4], P[MF][NF][4];
#pragma unroll
    for (int i = 0; i < MF; ++i)
#pragma unroll
        for (int j = 0; j < NF; ++j)
#pragma unroll
            for (int h = 0; h < 4; ++h) acc[i][j][h] = 0.f;
    for (int s = 0; s < nst; ++s) {
        const int sl = s % R, st = st0 + s;
        mbar_wait(full(sl), uint32_t(s / R) & 1u);
        const uint8_t* slot = smem + sl * S::BYTES;
        const uint32_t xaddr = smem0 + sl * S::BYTES;
        if (GS == 128 && (st & 1))
            consume_stage<C, BITS, GS, HILO, false>(a, slot, xaddr, st * kStageK, lane, rw, tw, acc, P);
        else
            consume_stage<C, BITS, GS, HILO, true>(a, slot, xaddr, st * kStageK, lane, rw, tw, acc, P);
        release_slot(empty(sl), lane);
    }
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < MF; ++i)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int r = n0 + rw + 16 * i + g + 8 * hh;
            if (r >= a.N) continue;
            int ld;
            float* yr = out_row(a, r, ld);
#pragma unroll
            for (int j = 0; j < NF; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int m = m0 + tw + 8 * j + 2 * t + e;
                    if (m < a.M) yr[int64_t(m) * ld] = acc[i][j][2 * hh + e];
                }
        }
}

// x [M, K] → pre-tiled hi / lo planes (Args::xt: per token tile and stage, the slot's bytes: rows of 64 bf16 in
// logical column order, 16-byte chunks XOR-swizzled by row) and group sums of hi + lo (Args::xst: at the stage
// that closes the group, index 0 or — group 32 — the span's parity). Rows ≥ M and columns ≥ K are zeros. One
// thread per (row, 32-column span, quarter t): physical columns 8t .. 8t + 7, which are logical columns 2t, 2t + 1
// of each of the span's four 8-column chunks — word t of each 16-byte chunk (the four quarters of a span write
// whole chunks; a warp, eight spans, whole 128-byte rows). The lanes of a group are consecutive (4 per span).
// (One thread per span until 2026-12-03: a quarter of the threads, each with 4× the serial work — 16 blocks at 64
// tokens × 2048 columns, latency-bound. H200: 2B pp512 1,263 → 963 µs over 162 calls; a whole 2B gdn qkv call at
// 64 tokens 61.6 → 79.3 TFLOP/s.)
template <bool HILO>
__global__ void gemm_prep_x(const float* __restrict__ x, int M, int K, int gs, int BT, int stages, bool vec,
                            uint8_t* __restrict__ xt, float* __restrict__ xst) {
    const int nsp = 2 * stages, lpg = 4 * (gs / 32), ntt = (M + BT - 1) / BT;  // lpg: lanes per group
    const unsigned total = unsigned(ntt) * unsigned(BT) * unsigned(nsp) * 4u;  // < 2³¹ (gemm_q checks)
    constexpr int planes = HILO ? 2 : 1;
    for (unsigned base = blockIdx.x * blockDim.x; base < total; base += gridDim.x * blockDim.x) {
        const unsigned idx = base + threadIdx.x;  // whole warps iterate together (shuffles below)
        const unsigned ms = idx >> 2;
        const int tq = int(idx & 3u);
        const int m = int(ms / unsigned(nsp)), sp = int(ms - unsigned(m) * unsigned(nsp));
        const int tile = m / BT, row = m % BT, st = sp / 2;
        float sum = 0.f;
        if (idx < total) {
            float v[8];
            const bool live = m < M && 32 * sp < K;
            const float* src = x + int64_t(m) * K + 32 * sp + 8 * tq;
            if (live && vec) {
                const float4 f0 = reinterpret_cast<const float4*>(src)[0], f1 = reinterpret_cast<const float4*>(src)[1];
                v[0] = f0.x, v[1] = f0.y, v[2] = f0.z, v[3] = f0.w, v[4] = f1.x, v[5] = f1.y, v[6] = f1.z, v[7] = f1.w;
            } else {
#pragma unroll
                for (int i = 0; i < 8; ++i) v[i] = live ? src[i] : 0.f;
            }
            uint8_t* dst = xt + ((int64_t(tile) * stages + st) * planes) * (BT * 128) + row * 128 + 4 * tq;
#pragma unroll
            for (int i = 0; i < 4; ++i) {  // chunk i = (s, h) = (i / 2, i % 2): physical columns 8t + 2s + h (+ 4)
                const int p0 = 2 * (i / 2) + (i % 2);
                uint32_t hw, lw;
                if constexpr (HILO) {
                    float s0, s1;
                    split2(v[p0], v[p0 + 4], hw, lw, s0, s1);
                    sum += s0 + s1;
                } else {
                    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(hw) : "f"(v[p0 + 4]), "f"(v[p0]));
                    lw = 0;
                    sum += __uint_as_float(hw << 16) + __uint_as_float(hw & 0xffff0000u);
                }
                const int c = 4 * (sp & 1) + i, off = ((c ^ (row & 7)) << 4);
                *reinterpret_cast<uint32_t*>(dst + off) = hw;
                if constexpr (HILO) *reinterpret_cast<uint32_t*>(dst + BT * 128 + off) = lw;
            }
        }
        for (int o = 1; o < lpg; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (idx < total && tq == 0 && sp % (lpg / 4) == 0) {
            const int spg = lpg / 4, stc = (sp + spg - 1) / 2, j = gs == 32 ? (sp & 1) : 0;
            xst[((int64_t(tile) * stages + stc) * 2 + j) * BT + row] = sum;
        }
    }
}

// Scales and biases [N, ng] (bf16 / f16 / f32) → {s, b − off·s} f32 pairs transposed, [ng][ld] (Args::sbt: group
// g's pairs of all rows contiguous, rows N .. ld − 1 zeros), so that a block's BW rows of a group are one bulk copy
// for every tile width — the layout does not depend on the plan, and gemm_q_make_pairs makes it once at upload.
// A block transposes 32 rows × 32 groups through shared memory, so that both the reads (along a row's groups)
// and the writes (along the rows) are coalesced (the direct form, a thread per output entry reading its own
// row's scale, fetched 16× the bytes; H200, 2B pp512, ncu: 802 → 712 µs over 162 calls). (Reading the scales in
// the producer warp instead, no prep at all, was tried: 2× slower GEMMs — 256 scattered 2-byte loads per stage
// and block.)
template <class ST>
__global__ void gemm_prep_sb(const ST* __restrict__ sc, const ST* __restrict__ bi, int N, int ng, int ngw, int ld,
                             float off, float2* __restrict__ out) {
    __shared__ float2 tile[32][33];
    const int r0 = int(blockIdx.x) * 32, g0 = int(blockIdx.y) * 32;
    const int tx = int(threadIdx.x) & 31, ty = int(threadIdx.x) >> 5;  // 256 threads: 8 rows or groups a pass
    for (int i = ty; i < 32; i += 8) {
        const int n = r0 + i, g = g0 + tx;
        float2 v = make_float2(0.f, 0.f);
        if (n < N && g < ng) {
            const float s = to_float(sc[int64_t(n) * ng + g]), b = to_float(bi[int64_t(n) * ng + g]);
            v = make_float2(s, fmaf(-off, s, b));
        }
        tile[i][tx] = v;
    }
    __syncthreads();
    for (int i = ty; i < 32; i += 8) {
        const int g = g0 + i, n = r0 + tx;
        if (n < ld && g < ngw) out[int64_t(g) * ld + n] = tile[tx][i];  // zeros for g ≥ ng (pairs_groups)
    }
}

// Sums the K split's partials in slice order into the output (split by rows as Args::y .. y3 / yend, a.N rows):
// thread x of the grid is output row r (its part and stride found once), the grid's y walks the tokens m — no
// division per element; reads and writes along r, coalesced.
__global__ void gemm_reduce(const float* __restrict__ part, int split, int M, Args a) {
    const int N = a.N, r = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
    if (r >= N) return;
    int ld;
    float* yr = out_row(a, r, ld);  // (blockIdx.z = 0)
    const int64_t count = int64_t(M) * N;
    for (int m = int(blockIdx.y); m < M; m += int(gridDim.y)) {
        const int64_t i = int64_t(m) * N + r;
        float s = part[i];
        for (int z = 1; z < split; ++z) s += part[int64_t(z) * count + i];
        yr[int64_t(m) * ld] = s;
    }
}

// ---- host side ----

struct CfgInfo {
    int bw, bt, minb;
    double eff;  // relative tensor efficiency of the tile (the rule's guess; larger tiles reuse more)
};
// The block tiles (consumer warps WW × WT, warp tile MF·16 rows × NF·8 tokens). Blocks have 8 warps (7 consumers
// + the producer; or 3 + 1 at two blocks per SM): an SM sub-partition then holds 2 warps, so a thread may use up to
// 255 registers (9 warps per SM would cap it at 168 and spill the fp32-faithful tiles).
// [GEMM_Q_CONFIGS] keep in step with launch_bits() below.
using C0 = Cfg<7, 1, 2, 8, 1>;  // 224 × 64
using C1 = Cfg<7, 1, 2, 4, 1>;  // 224 × 32
using C2 = Cfg<7, 1, 2, 2, 1>;  // 224 × 16
using C3 = Cfg<7, 1, 4, 4, 1>;  // 448 × 32
using C4 = Cfg<3, 1, 2, 8, 2>;  // 96 × 64, two blocks per SM
// wgmma tiles (linear_gemm_q_wgmma.cuh): two consumer warpgroups + the producer warp. (Tried and dropped, H200,
// bench/results/2026-12-03-h200-gemm-wgmma.md: 256 × 64 without the tile overlap, 256 × 32, 192 × 64 and 256 × 64 from
// three / four warpgroups, two groups in flight per warpgroup, 8-slot rings — none faster than these three.)
using C5 = WgCfg<2, 1, 64>;        // 128 × 64
using C6 = WgCfg<2, 2, 64, true>;  // 256 × 64, tile i closed while tile i + 1 computes
using C7 = WgCfg<2, 1, 128>;       // 128 × 128
// eff: measured per-SM throughput relative to C0 (H200, 6144×2048, M = 512, all forced: 132.8, 132.3, 126.0,
// 130.6, 138.1 TFLOP/s; bench/results/2026-12-01-h200-gemm-q.md). The wgmma tiles: 200-240 TFLOP/s fp32-faithful at
// M = 512-2048 over the 2B / 9B / 27B shapes (bench/results/2026-12-03-h200-gemm-wgmma.md), ≈ 1.6× C0.
constexpr CfgInfo kCfgs[] = {
    {C0::BW, C0::BT, C0::MINB, 1.0}, {C1::BW, C1::BT, C1::MINB, 1.0}, {C2::BW, C2::BT, C2::MINB, 0.95},
    {C3::BW, C3::BT, C3::MINB, 0.98}, {C4::BW, C4::BT, C4::MINB, 1.04},
    {C5::BW, C5::BT, C5::MINB, 1.6},  {C6::BW, C6::BT, C6::MINB, 1.6},  {C7::BW, C7::BT, C7::MINB, 1.55},
};
constexpr int kNumCfgs = int(sizeof(kCfgs) / sizeof(kCfgs[0]));
constexpr int kFirstWgCfg = 5;  // configs from here on are the wgmma kernel's

template <class C, int BITS>
int smem_bytes() { return Slot<C, BITS>::SMEM; }

int cfg_smem(int c, int bits) {
    switch (c) {
        case 0: return bits == 4 ? smem_bytes<C0, 4>() : smem_bytes<C0, 8>();
        case 1: return bits == 4 ? smem_bytes<C1, 4>() : smem_bytes<C1, 8>();
        case 2: return bits == 4 ? smem_bytes<C2, 4>() : smem_bytes<C2, 8>();
        case 3: return bits == 4 ? smem_bytes<C3, 4>() : smem_bytes<C3, 8>();
        case 4: return bits == 4 ? smem_bytes<C4, 4>() : smem_bytes<C4, 8>();
        case 5: return bits == 4 ? smem_bytes<C5, 4>() : smem_bytes<C5, 8>();
        case 6: return bits == 4 ? smem_bytes<C6, 4>() : smem_bytes<C6, 8>();
        default: return bits == 4 ? smem_bytes<C7, 4>() : smem_bytes<C7, 8>();
    }
}

int stages_of(const Weight& W) { return int((W.cols + kStageK - 1) / kStageK); }

// Blocks of config c resident per SM: the launch bounds' minimum (registers), if shared memory allows it.
int blocks_per_sm(int c, int bits) {
    const int by_smem = (228 * 1024) / (cfg_smem(c, bits) + 1024);
    return std::max(1, std::min(by_smem, kCfgs[c].minb));
}

// Estimated µs of a plan (the written rule): waves of blocks over the SMs × block time, plus the reduction of a
// K split. Block time = 1 µs of fixed latency + its tensor work (two products per code) at the tile's share of
// ~2.0 TFLOP/s per SM (the rate measured at M = 512: ≈ 135 TFLOP/s of useful work × 2 products ≈ 270 of
// mma.sync; the absolute value only weighs latency and reduction against it), scaled by the tile's efficiency. Reduction:
// 1.5 µs + its bytes (split·M·N·4 read, M·N·4 written) at 3 TB/s.
double plan_us(int c, int split, int64_t M, int64_t N, int64_t K, int bits, int sms) {
    const CfgInfo& ci = kCfgs[c];
    const int64_t tiles = ((N + ci.bw - 1) / ci.bw) * ((M + ci.bt - 1) / ci.bt) * split;
    const int bps = blocks_per_sm(c, bits);
    const double waves = std::ceil(double(tiles) / double(int64_t(sms) * bps));
    const double kslice = std::ceil(double(K) / split);
    const double flop = 4.0 * ci.bw * ci.bt * kslice;
    const double block_us = 1.0 + flop / (ci.eff * 2.0e6 / bps);
    double us = waves * block_us;
    if (split > 1) us += 1.5 + double(split + 1) * double(M) * double(N) * 4.0 / 3.0e6;
    return us;
}

size_t align256(size_t v) { return (v + 255) & ~size_t(255); }

// Bytes the K-split partials may take: min(32 MiB, 8·n·rows·4) — growing with n, so that a workspace sized for
// the largest n of a caller also serves every smaller n.
constexpr size_t kPartialCap = size_t(32) << 20;
size_t partial_budget(const Weight& W, int64_t n) {
    return std::min(kPartialCap, size_t(8) * size_t(n) * size_t(W.rows) * 4);
}

template <class C, int BITS, int GS, bool HILO>
void launch_cfg(const Args& a, int split, cudaStream_t st) {
    auto* k = [] {
        if constexpr (C::ALIGN == 1024) return gemm_q_wg_kernel<C, BITS, GS, HILO>;
        else return gemm_q_kernel<C, BITS, GS, HILO>;
    }();
    static const bool attr = [&] {
        CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, Slot<C, BITS>::SMEM));
        return true;
    }();
    (void)attr;
    const dim3 grid(unsigned((a.N + C::BW - 1) / C::BW), unsigned((a.M + C::BT - 1) / C::BT), unsigned(split));
    k<<<grid, C::NTH, Slot<C, BITS>::SMEM, st>>>(a);
    CUDA_CHECK(cudaGetLastError());
}

template <class C, int BITS, bool HILO>
void launch_gs(const Args& a, int gs, int split, cudaStream_t st) {
    if (gs == 32) launch_cfg<C, BITS, 32, HILO>(a, split, st);
    else if (gs == 64) launch_cfg<C, BITS, 64, HILO>(a, split, st);
    else launch_cfg<C, BITS, 128, HILO>(a, split, st);
}

template <int BITS, bool HILO>
void launch_bits(int c, const Args& a, int gs, int split, cudaStream_t st) {
    switch (c) {  // [GEMM_Q_CONFIGS]
        case 0: launch_gs<C0, BITS, HILO>(a, gs, split, st); break;
        case 1: launch_gs<C1, BITS, HILO>(a, gs, split, st); break;
        case 2: launch_gs<C2, BITS, HILO>(a, gs, split, st); break;
        case 3: launch_gs<C3, BITS, HILO>(a, gs, split, st); break;
        case 4: launch_gs<C4, BITS, HILO>(a, gs, split, st); break;
        case 5: launch_gs<C5, BITS, HILO>(a, gs, split, st); break;
        case 6: launch_gs<C6, BITS, HILO>(a, gs, split, st); break;
        default: launch_gs<C7, BITS, HILO>(a, gs, split, st); break;
    }
}

}  // namespace

int gemm_q_configs() { return kNumCfgs; }

bool gemm_q_supported(const Weight& W) {
    return W.format == WeightFormat::AFFINE && (W.bits == 4 || W.bits == 8) &&
           (W.group_size == 32 || W.group_size == 64 || W.group_size == 128) && W.cols % W.group_size == 0 &&
           W.cols % 32 == 0 && W.scales && W.biases && dtype_is_float(W.sb_dtype) &&
           (reinterpret_cast<uintptr_t>(W.data) & 15u) == 0 && (W.rows < (int64_t(1) << 31)) &&
           (W.cols < (int64_t(1) << 30)) && (reinterpret_cast<uintptr_t>(W.scales) & 1u) == 0 &&
           (reinterpret_cast<uintptr_t>(W.biases) & 1u) == 0 &&
           (W.sb_dtype != DType::F32 ||
            ((reinterpret_cast<uintptr_t>(W.scales) & 3u) == 0 && (reinterpret_cast<uintptr_t>(W.biases) & 3u) == 0));
}

// EMBER_GEMM_PLAN=c:s (A/B and diagnosis): every call the caller does not force takes tile config c (and K split s,
// 0: the rule's), e.g. 0:1 for the 224 × 64 tile without a split.
static GemmPlan env_plan() {
    static const GemmPlan p = [] {
        GemmPlan e;
        const char* v = env_str("EMBER_GEMM_PLAN");
        int c = -1, sp = 0;
        if (v && std::sscanf(v, "%d:%d", &c, &sp) >= 1 && c >= 0 && c < kNumCfgs) e.config = c, e.split = sp;
        return e;
    }();
    return p;
}

GemmPlan gemm_q_plan(const Weight& W, int64_t n, const GemmPlan& force_in) {
    const GemmPlan force = force_in.config < 0 && force_in.split <= 0 ? env_plan() : force_in;
    const int sms = detail::sm_count();
    const int stages = stages_of(W);
    const int per_group = W.group_size == 128 ? 2 : 1;  // a split starts at a group's first stage
    GemmPlan best;
    double best_us = 0;
    for (int c = 0; c < kNumCfgs; ++c) {
        if (force.config >= 0 && c != force.config) continue;
        for (int split : {1, 2, 3, 4, 6, 8}) {
            if (force.split > 0 && split != force.split) continue;
            if (split > 1 && force.split <= 0 &&
                (stages < 4 * split || size_t(split) * size_t(n) * size_t(W.rows) * 4 > partial_budget(W, n)))
                continue;  // ≥ 4 stages per slice; partials within the budget
            const double us = plan_us(c, split, n, W.rows, W.cols, W.bits, sms);
            if (best.config < 0 || us < best_us) best.config = c, best.split = split, best_us = us;
        }
    }
    if (best.config < 0) best.config = force.config >= 0 ? force.config : 0, best.split = 1;
    // Whole groups per slice; no empty slices.
    const int units = stages / per_group;
    best.split = std::max(1, std::min(best.split, units));
    return best;
}

// Rows of the transposed pairs (gemm_prep_sb): every row tile of every plan reads within them (BW ≤ 448); even,
// so that each group's range of a tile starts 16-byte aligned.
static int64_t pairs_ld(int64_t rows) { return (rows + 448 + 1) / 2 * 2; }
// Groups of the layout: group 32 with an odd count has one more, of zeros (the second half of the ragged last
// stage is copied like any other; its products are zeros, and so must its pairs be).
static int64_t pairs_groups(const Weight& W) {
    const int64_t ng = W.cols / W.group_size;
    return ng + (W.group_size == 32 && ng % 2 ? 1 : 0);
}

// The {s, b'} pairs of W transposed into `out` ([ng][ld] float2, gemm_prep_sb).
static void launch_prep_sb(const Weight& W, float2* out, int64_t ld, cudaStream_t stream) {
    const float off = W.bits == 4 ? 16.f : 0.f;
    const int64_t ng = W.cols / W.group_size;
    EMBER_CHECK(ng <= 65535 * 32 && ld < (int64_t(1) << 31), "gemm_q: %lld rows × %lld groups: too many",
                (long long)W.rows, (long long)ng);
    const int64_t gw = pairs_groups(W);
    const dim3 g(unsigned((ld + 31) / 32), unsigned((gw + 31) / 32));
    const int N = int(W.rows), G = int(ng), L = int(ld), GW = int(gw);
    if (W.sb_dtype == DType::F32)
        gemm_prep_sb<float><<<g, 256, 0, stream>>>(static_cast<const float*>(W.scales),
                                                   static_cast<const float*>(W.biases), N, G, GW, L, off, out);
    else if (W.sb_dtype == DType::F16)
        gemm_prep_sb<__half><<<g, 256, 0, stream>>>(static_cast<const __half*>(W.scales),
                                                    static_cast<const __half*>(W.biases), N, G, GW, L, off, out);
    else
        gemm_prep_sb<__nv_bfloat16><<<g, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(W.scales),
                                                           static_cast<const __nv_bfloat16*>(W.biases), N, G, GW, L,
                                                           off, out);
    CUDA_CHECK(cudaGetLastError());
}

// W's pairs made at upload, in a form the kernels can read (a rows_view starting at an odd row cannot: its bulk
// copies would not be 16-byte aligned).
static bool gemm_q_pairs_usable(const Weight& W) {
    return W.gemm_pairs && W.gemm_pairs_ld >= pairs_ld(W.rows) && W.gemm_pairs_ld % 2 == 0 &&
           (reinterpret_cast<uintptr_t>(W.gemm_pairs) & 15u) == 0;
}

// Workspace layout (each part 256-aligned): pre-tiled x (≤ (n + 128) rows × stages × 256 bytes), x sums
// (≤ (n + 128) × stages × 8), {s, b'} pairs ([groups][pairs_ld(rows)] float2; unused when W brings its own), K-split
// partials (partial_budget). The bounds hold for every tile (BT ≤ 128, BW ≤ 448) and grow with n.
struct WsLayout {
    size_t xt, xst, sbt, part, total;
};
WsLayout ws_layout(const Weight& W, int64_t n, const GemmPlan& p) {
    const size_t st = size_t(stages_of(W)), rows = size_t(n) + 128;
    WsLayout l;
    l.xt = 0;
    l.xst = l.xt + align256(rows * st * 256);
    l.sbt = l.xst + align256(rows * st * 8);
    l.part = l.sbt + align256(size_t(pairs_ld(W.rows)) * size_t(pairs_groups(W)) * 8);
    l.total = l.part + align256(std::max(partial_budget(W, n), p.split > 1 ? size_t(p.split) * size_t(n) * size_t(W.rows) * 4 : 0));
    return l;
}

size_t gemm_q_workspace_bytes(const Weight& W, int64_t n, const GemmPlan& force) {
    return 256 + ws_layout(W, n, gemm_q_plan(W, n, force)).total;
}

size_t gemm_q_pairs_bytes(const Weight& W) {
    return gemm_q_supported(W) ? size_t(pairs_ld(W.rows)) * size_t(pairs_groups(W)) * 8 : 0;
}

int64_t gemm_q_pairs_ld(const Weight& W) { return gemm_q_supported(W) ? pairs_ld(W.rows) : 0; }

void gemm_q_make_pairs(const Weight& W, void* dst, cudaStream_t stream) {
    EMBER_CHECK(gemm_q_supported(W) && dst && (reinterpret_cast<uintptr_t>(dst) & 15u) == 0,
                "gemm_q_make_pairs: unsupported weight or unaligned destination");
    if (W.rows == 0) return;
    launch_prep_sb(W, static_cast<float2*>(dst), pairs_ld(W.rows), stream);
}

const char* gemm_q_describe(const Weight& W, int64_t n, char* buf, size_t buf_bytes, const GemmPlan& force) {
    const GemmPlan p = gemm_q_plan(W, n, force);
    const CfgInfo& ci = kCfgs[p.config];
    std::snprintf(buf, buf_bytes, "gemm q%d g%d %s%dx%d split%d smem%dK", W.bits, W.group_size,
                  p.config >= kFirstWgCfg ? "wgmma " : "", ci.bw, ci.bt, p.split, cfg_smem(p.config, W.bits) / 1024);
    return buf;
}

namespace {
void gemm_q_impl(const Weight& W, const float* x, int64_t n, const GemmOutSplit& out, cudaStream_t stream,
                 void* workspace, size_t workspace_bytes, GemmPrecision prec, const GemmPlan& force) {
    EMBER_CHECK(gemm_q_supported(W), "gemm_q: unsupported weight (format %d, bits %d, group %d, cols %lld)",
                int(W.format), W.bits, W.group_size, (long long)W.cols);
    EMBER_CHECK(n >= 1 && n < (int64_t(1) << 31) / 2 && x, "gemm_q: n=%lld", (long long)n);
    EMBER_CHECK(workspace && workspace_bytes >= gemm_q_workspace_bytes(W, n, force),
                "gemm_q: workspace %zu bytes, needs %zu", workspace_bytes, gemm_q_workspace_bytes(W, n, force));
    if (W.rows == 0) return;
    EMBER_CHECK(out.parts >= 1 && out.parts <= 4 && out.end[out.parts - 1] == W.rows,
                "gemm_q: output in %d parts ending at row %lld of %lld", out.parts,
                (long long)(out.parts >= 1 && out.parts <= 4 ? out.end[out.parts - 1] : -1), (long long)W.rows);
    for (int k = 0; k < out.parts; ++k)
        EMBER_CHECK(out.y[k] && out.end[k] > (k ? out.end[k - 1] : 0), "gemm_q: output part %d empty or null", k);
    const GemmPlan p = gemm_q_plan(W, n, force);
    const bool hilo = prec == GemmPrecision::FP32;
    // The x prep kernel indexes with 32 bits: padded tokens × spans × 4 quarters stay below 2³¹.
    EMBER_CHECK((n + 128) * 8 * int64_t(stages_of(W)) < (int64_t(1) << 31),
                "gemm_q: %lld tokens × %lld columns, beyond the prep kernel's 32-bit indices", (long long)n,
                (long long)W.cols);
    const CfgInfo& ci = kCfgs[p.config];
    uint8_t* ws = reinterpret_cast<uint8_t*>(align256(reinterpret_cast<uintptr_t>(workspace)));
    const WsLayout l = ws_layout(W, n, p);
    const int stages = stages_of(W);
    const int64_t ng = W.cols / W.group_size;
    const bool own_pairs = gemm_q_pairs_usable(W);  // made at upload (gemm_q_make_pairs)
    Args a{};
    a.w = static_cast<const uint8_t*>(W.data);
    a.xt = ws + l.xt, a.xst = ws + l.xst;
    a.sbt = own_pairs ? static_cast<const uint8_t*>(W.gemm_pairs) : ws + l.sbt;
    a.sb_ld = own_pairs ? W.gemm_pairs_ld : pairs_ld(W.rows);
    a.gs = W.group_size, a.ng = int(ng);
    a.M = int(n), a.N = int(W.rows), a.K = int(W.cols);
    a.row_bytes = int(W.cols * W.bits / 8);
    a.stages = stages;
    const int per_group = W.group_size == 128 ? 2 : 1;
    const int units = a.stages / per_group;
    a.sps = (units + p.split - 1) / p.split * per_group;
    const int split = (a.stages + a.sps - 1) / a.sps;  // slices actually non-empty
    // The output parts (or the partials, one part); the reduction writes the parts.
    Args ao = a;
    ao.y = out.y[0], ao.y1 = out.y[1], ao.y2 = out.y[2], ao.y3 = out.y[3];
    for (int k = 0; k < 3; ++k) ao.yend[k] = k + 1 < out.parts ? int(out.end[k]) : INT_MAX;
    float* part = reinterpret_cast<float*>(ws + l.part);
    if (split > 1) {
        a.y = part, a.y1 = a.y2 = a.y3 = nullptr;
        a.yend[0] = a.yend[1] = a.yend[2] = INT_MAX;
    } else {
        a = ao;
    }
    {
        const int64_t threads = ((n + ci.bt - 1) / ci.bt) * ci.bt * 2 * stages * 4;  // (row, span, quarter)
        const unsigned g = unsigned(std::clamp<int64_t>((threads + 255) / 256, 1, 8192));
        const bool vec = (reinterpret_cast<uintptr_t>(x) & 15u) == 0;
        auto* xst = reinterpret_cast<float*>(ws + l.xst);
        if (hilo)
            gemm_prep_x<true><<<g, 256, 0, stream>>>(x, int(n), int(W.cols), W.group_size, ci.bt, stages, vec, ws + l.xt,
                                                     xst);
        else
            gemm_prep_x<false><<<g, 256, 0, stream>>>(x, int(n), int(W.cols), W.group_size, ci.bt, stages, vec,
                                                      ws + l.xt, xst);
        CUDA_CHECK(cudaGetLastError());
    }
    if (!own_pairs) launch_prep_sb(W, reinterpret_cast<float2*>(ws + l.sbt), pairs_ld(W.rows), stream);
    const int gs = W.group_size;
    if (W.bits == 4) {
        if (hilo) launch_bits<4, true>(p.config, a, gs, split, stream);
        else launch_bits<4, false>(p.config, a, gs, split, stream);
    } else {
        if (hilo) launch_bits<8, true>(p.config, a, gs, split, stream);
        else launch_bits<8, false>(p.config, a, gs, split, stream);
    }
    if (split > 1) {
        const int64_t gx = (W.rows + 255) / 256, gy = std::clamp<int64_t>(4096 / gx, 1, std::min<int64_t>(n, 65535));
        gemm_reduce<<<dim3(unsigned(gx), unsigned(gy)), 256, 0, stream>>>(part, split, int(n), ao);
        CUDA_CHECK(cudaGetLastError());
    }
}
}  // namespace

void gemm_q(const Weight& W, const float* x, int64_t n, float* y, cudaStream_t stream, void* workspace,
            size_t workspace_bytes, GemmPrecision prec, const GemmPlan& force) {
    EMBER_CHECK(y, "gemm_q: null y");
    GemmOutSplit out;
    out.parts = 1, out.end[0] = W.rows, out.y[0] = y;
    gemm_q_impl(W, x, n, out, stream, workspace, workspace_bytes, prec, force);
}

void gemm_q_split_out(const Weight& W, const float* x, int64_t n, const GemmOutSplit& out, cudaStream_t stream,
                      void* workspace, size_t workspace_bytes, GemmPrecision prec, const GemmPlan& force) {
    gemm_q_impl(W, x, n, out, stream, workspace, workspace_bytes, prec, force);
}

}  // namespace ember::cuda
