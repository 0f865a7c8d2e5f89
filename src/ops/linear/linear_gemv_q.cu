// ops/linear/linear_gemv_q.cu: y = x·Wᵀ for MLX affine 4-/8-bit weights and n ≤ 8 tokens — the streaming
// tensor-core GEMV ("q" kernel; spec and error bound: linear_cuda.h; tests: linear_cuda_test.cpp QKernel*; a
// lane-exact CPU emulation of this file's index math: bench/gpu/gemv_q_emulate.py — keep the two in step).
//
// Design (numbers for q4 g64 bf16 on an H200: 132 SMs, ~4.26 TB/s copy bandwidth, ~32 GB/s per SM):
//  - Weights go straight from HBM into registers: every warp-wide load reads whole 32-byte sectors (lanes t = 0..3
//    of a row read 4 consecutive 16-, 8- or 4-byte pieces), ld.global.nc.L1::no_allocate, a 3-deep register ring
//    per warp (2 iterations = 4 KB per warp, 64 KB per SM in flight ≈ 2 µs of the SM's share of bandwidth). No
//    shared-memory staging of weights, no block barriers in the streaming loop (S = 1).
//  - mma.m16n8k16 (bf16 in, fp32 accumulate), 16 rows per warp tile, the x-hi and x-lo MMAs in two independent
//    accumulator chains. A code q enters as the exact bf16 16 + q (one shift + one LOP3 per two codes); an 8-bit
//    code is split into nibbles l + 16h, h meeting 16·x. x enters as hi + lo (two bf16, |x − hi − lo| ≤ 2⁻¹⁶|x|).
//  - The 8 MMA columns are (group, token) pairs: G groups × NT = 8/G tokens (G = 4 for n ≤ 2, 2 for n ≤ 4, 1 for
//    n ≤ 8). The B fragment is zero where a column's group differs from the group of the codes at that k, so one
//    accumulator holds the separate per-group sums C = Σ (16 + q)·x' of G groups, and the per-group scale is
//    applied once per G groups and lane: acc += s·C + (b − 16·s)·X with X = Σ x' (8-bit: 272 instead of 16).
//    Per 16 codes and lane: 1/4 load, 8 ALU (dequant), 2 MMA, 1 LDS (x fragments); plus ~2 per code-row of loop,
//    cursor and scale work: ~2.5 instructions per code, ≈ 55 % of the issue rate at 90 % of copy bandwidth.
//  - x is staged per block in shared memory once (already split into hi/lo, laid out as the B fragments of the
//    active lanes, with the group sums X), while the first weight loads are in flight. When x does not fit, K is
//    processed in chunks (x restaged per chunk, per-tile partial sums kept in shared memory).
//  - Work split: one 16-warp block per SM, each owning a contiguous range of 16-row tiles (balanced to ±1 tile).
//    Small matrices split K into S slices over the block's warps, summed through shared memory in a fixed order
//    (one barrier per round of 16/S tiles). Deterministic, no atomics, no workspace: capturable in a graph.
//  - Programmatic dependent launch (default on): the block signals launch_dependents at once and prefetches its
//    first weights before griddepcontrol.wait, so its ramp-up overlaps the tail of the previous kernel of the
//    stream; x and y are only touched after the wait. (W must not be written by the immediately preceding kernel.)
//
// Exactness (as linear_gemv_affine.cu): products of exact codes and hi/lo are exact in fp32, so
//   y = Σ_groups s·C + (b − 16s)·X = s·Σ q·x' + b·Σ x'   up to fp32 accumulation rounding,   x' = hi + lo.
// Loads outside the matrix are skipped; the stale codes left in those registers decode to finite values that meet
// x' = 0 or rows that are never stored (their scales are loaded as 0).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "core/check.h"
#include "core/env.h"
#include "ops/linear/linear_cuda.h"
#include "ops/linear/linear_gemv_mma.cuh"
#include "ops/linear/linear_gemv_prologue.cuh"
#include "ops/linear/split_out.cuh"

namespace ember::cuda::detail {
namespace {

constexpr int kWarps = 16, kThreads = 32 * kWarps;
constexpr int kSmemMax = 227 * 1024 - 1024;  // dynamic shared memory per block (static: the RMSNorm sums)
constexpr int kRedBytes = 2 * kWarps * 16 * 8 * 4;  // slice partials, double-buffered by round parity
constexpr int kMaxChunkTiles = 128;   // tiles per block whose partials fit in shared memory when K is chunked

// Compile-time layout of one configuration (BITS, GS, G). All sizes in bytes of one weight row.
//   iteration: 128 row bytes × 16 rows (2 KB); lane t of row g reads NP pieces of LS bytes at p·4·LS + t·LS.
//   span:      G groups (G·GB bytes); U spans per iteration (small groups) or V iterations per span (large).
//   K-unit:    whole spans and whole iterations (KU = 128·V bytes): the unit of slicing and chunking.
template <int BITS, int GS, int G>
struct QC {
    static constexpr int GB = GS * BITS / 8;             // bytes per group and row: 16 .. 128
    static constexpr int NT = 8 / G;                     // tokens per MMA column set
    static constexpr int SB = G * GB / 4;                // bytes per lane, row and span
    static constexpr int V = SB >= 32 ? SB / 32 : 1;     // iterations per span
    static constexpr int U = SB >= 32 ? 1 : 32 / SB;     // spans per iteration
    static constexpr int LS = SB < 16 ? SB : 16;         // load size
    static constexpr int NP = 32 / LS;                   // pieces (loads) per row and iteration
    static constexpr int WPP = LS / 4;                   // 32-bit words per piece
    static constexpr int SPAN = 4 * SB;                  // row bytes per span
    static constexpr int KU = 128 * V;                   // row bytes per K-unit
    static constexpr int SPK = V == 1 ? U : 1;           // spans per K-unit
    static constexpr int AL = 32 / G;                    // lanes with a non-zero B fragment per step
    static constexpr int STEP = AL * 16;                 // shared bytes of B fragments per k-step
    static constexpr int XKU = V * 16 * STEP;            // shared bytes of B fragments per K-unit
    static constexpr int SKU = SPK * 32;                 // shared bytes of group sums per K-unit ([span][8] f32)
    static constexpr int ZERO = AL < 32 ? 16 * STEP : 0; // zero fragments read by inactive lanes
    static constexpr int NSC = G * U;                    // raw scale registers per iteration and lane
    static constexpr int BUF = 3;                        // register ring depth (iterations)
    static constexpr float OFF = BITS == 4 ? 16.f : 272.f;
    static_assert(NP * LS == 32 && (U == 1 || NP == U), "layout");
};

struct QArgs {
    const uint8_t* w;     // [rows, row_bytes] codes
    const void* scales;   // [rows, ngroups] sb dtype
    const void* biases;
    const float* x;       // [n, K]
    float* y;             // [n, rows], or rows [0, yend[0]) of a split output (GemmOutSplit)
    float *y1, *y2, *y3;  // the split's other parts: rows [yend[k − 1], yend[k]) as [n, yend[k] − yend[k − 1]]
    int64_t yend[3];      // part ends (INT64_MAX past the last part)
    int64_t rows, tiles;
    int row_bytes, ngroups, K, n;
    int nku;              // K-units per row
    int cs, nc;           // K-units per chunk, chunks
    int S, spsl;          // slices per chunk, K-units per slice
    int grid;
    int x_aligned;        // x (and norm_w) 16-byte aligned (vector loads in staging)
    int red;              // slices or chunks need the shared-memory reduction
    // Fusion (linear_cuda.h LinearFusion): x' = pre(x) as staged; y = y + x'·Wᵀ when accum.
    int pre;              // PRE_NONE, PRE_RMSNORM (x'[c] = x[c]·inv·norm_w[c]), PRE_SWIGLU (x rows [gate K | up K])
    int xstride;          // floats per token row of x (K, or 2K for SwiGLU)
    int accum;
    const float* norm_w;
    float eps;
    // SwiGLU pairs (linear_swiglu_pairs): W is [gate; up] (2·rows rows) and a tile holds gate rows 8·tile + g and
    // up rows rows + 8·tile + g in the places of rows g and g + 8; y[t, r] = silu(gate sum)·(up sum), [n, rows].
    int pairs;
    int64_t hrow;         // matrix rows between a lane's two rows: 8, or rows (pairs)
    // RMSNorm with its factor applied to the sums (post_norm): x·norm_w staged, Σx² summed while staging, the sums
    // scaled by inv as they are stored — no norm pass over x before staging (rms_factors).
    int post_norm;
};
// The prologue fields as the shared helpers (linear_gemv_prologue.cuh) take them.
__device__ __forceinline__ XPrologue xpro(const QArgs& a) {
    return XPrologue{a.x, a.norm_w, a.eps, a.n, a.K, a.xstride, a.pre, a.x_aligned};
}

template <class ST> struct SBT;
template <> struct SBT<__nv_bfloat16> {
    static __device__ __forceinline__ uint32_t load(const void* p, int64_t i) {
        return __ldg(static_cast<const unsigned short*>(p) + i);
    }
    static __device__ __forceinline__ float f(uint32_t u) { return __uint_as_float(u << 16); }
};
template <> struct SBT<__half> {
    static __device__ __forceinline__ uint32_t load(const void* p, int64_t i) {
        return __ldg(static_cast<const unsigned short*>(p) + i);
    }
    static __device__ __forceinline__ float f(uint32_t u) { return __half2float(__ushort_as_half((unsigned short)u)); }
};
template <> struct SBT<float> {
    static __device__ __forceinline__ uint32_t load(const void* p, int64_t i) {
        return __float_as_uint(__ldg(static_cast<const float*>(p) + i));
    }
    static __device__ __forceinline__ float f(uint32_t u) { return __uint_as_float(u); }
};

// Streaming loads of LS bytes into N words (whole sectors per warp instruction; 4-byte pieces only cover half a
// sector per instruction, so those keep L1 allocation for the neighbouring instruction).
template <int LS>
__device__ __forceinline__ void ldw(const uint8_t* p, uint32_t* v) {
    if constexpr (LS == 16) {
        asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                     : "l"(p));
    } else if constexpr (LS == 8) {
        asm("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];\n" : "=r"(v[0]), "=r"(v[1]) : "l"(p));
    } else {
        asm("ld.global.nc.u32 %0, [%1];\n" : "=r"(v[0]) : "l"(p));
    }
}

// Stage x for K-units [ku0, ku0 + nku_c) into shared memory: B fragments {b0 hi, b1 hi, b0 lo, b1 lo} of step
// st (16 per iteration) and active slot tok·4 + t at xs + st·STEP + slot·16, and the group sums X[span][col].
// One thread per (token, 32-bit word of the row): the word's 4 nibble pairs feed steps 2w and 2w+1 of lane t.
// Tokens n .. NT−1 and columns ≥ K are staged as zeros. post_norm: x·norm_w staged, and each warp's Σx² of its
// words per token stored (first chunk) or added (later chunks) at ssr[warp·8 + token].
template <int BITS, int GS, int G>
__device__ __forceinline__ void stage_x(const QArgs& a, const float* inv, int ku0, int nku_c, uint8_t* xs,
                                        float* xsum, float* ssr, bool first_chunk) {
    const int K = a.K, n = a.n;
    using C = QC<BITS, GS, G>;
    constexpr int CPW = BITS == 4 ? 8 : 4;  // columns per word
    const int words = nku_c * C::KU / 4;     // a multiple of 32: every warp is wholly inside or outside
    const int byte0 = ku0 * C::KU;
    for (int tok = 0; tok < C::NT; ++tok) {
        const float* xt = a.x + int64_t(tok) * a.xstride;
        const float inv_t = a.pre == PRE_RMSNORM && !a.post_norm && tok < n ? inv[tok] : 1.f;
        float ssq = 0.f;  // post_norm: Σx² of this thread's words
        for (int wi = int(threadIdx.x); wi < words; wi += kThreads) {  // warp-uniform condition (shuffles below)
            const unsigned bl = 4u * unsigned(wi);  // chunk-local byte of the word
            const int col0 = BITS == 4 ? 2 * (byte0 + int(bl)) : byte0 + int(bl);
            // Position of the word in the iteration layout (see QC): piece p, lane tt, word w of the lane.
            const unsigned itl = bl / 128u, o = bl % 128u;
            const unsigned p = o / (4u * C::LS), tt = (o / C::LS) % 4u, wp = (o % C::LS) / 4u;
            const unsigned w = p * C::WPP + wp;
            uint8_t* dst = xs + (itl * 16 + 2 * w) * C::STEP + (tok * 4 + tt) * 16;
            float sum = 0.f;
            if (tok < n && col0 < K) {
                float v[8];
                if (a.post_norm) load_x_normw<CPW>(xpro(a), xt, col0, v, ssq);
                else load_x<CPW>(xpro(a), xt, col0, inv_t, v);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    uint32_t b0h, b0l, b1h, b1l;
                    float s0, s1, s2, s3;
                    if constexpr (BITS == 4) {  // pair j = {x[j], x[j+4]}; b0 = pair 2h, b1 = pair 2h+1
                        split2(v[2 * h], v[2 * h + 4], b0h, b0l, s0, s1);
                        split2(v[2 * h + 1], v[2 * h + 5], b1h, b1l, s2, s3);
                        sum += (s0 + s1) + (s2 + s3);
                    } else {  // pair 2h = {x[h], x[h+2]} (low nibbles), pair 2h+1 = 16·{x[h], x[h+2]} (high)
                        split2(v[h], v[h + 2], b0h, b0l, s0, s1);
                        split2(16.f * v[h], 16.f * v[h + 2], b1h, b1l, s2, s3);
                        sum += s0 + s1;
                    }
                    *reinterpret_cast<uint4*>(dst + h * C::STEP) = make_uint4(b0h, b1h, b0l, b1l);
                }
            } else {  // tokens ≥ n, columns ≥ K
                *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
                *reinterpret_cast<uint4*>(dst + C::STEP) = make_uint4(0u, 0u, 0u, 0u);
            }
            // Group sum over the GB/4 consecutive words (lanes) of a group.
#pragma unroll
            for (int m = 1; m < C::GB / 4; m <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);
            if (wi % (C::GB / 4) == 0) {
                const unsigned span = bl / C::SPAN, gam = (bl % C::SPAN) / C::GB;
                xsum[span * 8 + gam * C::NT + tok] = sum;
            }
        }
        if (a.post_norm && tok < n) {  // (uniform: every lane of the warp is here)
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) ssq += __shfl_xor_sync(0xffffffffu, ssq, o);
            float* slot = ssr + (threadIdx.x >> 5) * 8 + tok;
            if ((threadIdx.x & 31) == 0) *slot = first_chunk ? ssq : *slot + ssq;
        }
    }
}

// Where y[tok, row] lives (the split output's part, static selects).
__device__ __forceinline__ float* y_at(const QArgs& a, int tok, int64_t row) {
    int64_t ld;
    float* p = split_out_row(a.y, a.y1, a.y2, a.y3, a.yend, a.rows, row, ld);
    return p + int64_t(tok) * ld;
}

// After a round with slices or chunks: sum the slice partials of each (tile, row, token) in slice order, then
// store y (last chunk) or keep the running sum in ypart.
// Pairs: entries of the tile's rows 0..7 only, each with its up partner at row16 + 8 (y = silu(gate)·up).
// post_norm: the sums scaled by inv[tok] as they are stored.
__device__ __forceinline__ void reduce_round(const QArgs& a, const float* red, float* ypart, int64_t rows, int64_t tile0,
                                             int64_t tb1, int lt0, int TPR, int S, int n, bool first_chunk,
                                             bool last_chunk, bool accum, const float* inv) {
    const int RPT = a.pairs ? 8 : 16;  // output rows per tile
    for (int e = int(threadIdx.x); e < TPR * RPT * n; e += kThreads) {
        const int tl2 = e / (RPT * n), rem = e % (RPT * n), row16 = rem / n, tok = rem % n;
        const int64_t tile = tile0 + tl2, row = tile * RPT + row16;
        if (tile >= tb1 || row >= rows) continue;
        float s = 0.f, su = 0.f;
        for (int q = 0; q < S; ++q) s += red[(tl2 * S + q) * 128 + row16 * 8 + tok];
        if (a.pairs)
            for (int q = 0; q < S; ++q) su += red[(tl2 * S + q) * 128 + (row16 + 8) * 8 + tok];
        float* yp = ypart + ((lt0 + tl2) * 16 + row16) * 8 + tok;
        if (!first_chunk) {
            s = *yp + s;
            if (a.pairs) su = yp[64] + su;
        }
        if (last_chunk) {
            float* y = y_at(a, tok, row);
            if (a.post_norm) s *= inv[tok], su *= inv[tok];
            const float v = a.pairs ? swiglu1(s, su) : s;
            *y = accum ? *y + v : v;
        } else {
            *yp = s;
            if (a.pairs) yp[64] = su;
        }
    }
}

template <int BITS, int GS, int G, class ST>
__global__ void __launch_bounds__(kThreads, 1) gemv_q_kernel(const QArgs a) {
    using C = QC<BITS, GS, G>;
    constexpr int BUF = C::BUF, NT = C::NT, ES = int(sizeof(ST));
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ float inv[8];           // RMSNorm factors per token (PRE_RMSNORM)
    __shared__ float ssr[kWarps * 8];  // post_norm: per-warp Σx² per token (static total ≤ 1 KB: kSmemMax)
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;

    // Shared memory: B fragments | group sums | zero fragments | slice partials | chunked tile partials.
    uint8_t* xs = smem;
    float* xsum = reinterpret_cast<float*>(smem + a.cs * C::XKU);
    const int zero_off = a.cs * (C::XKU + C::SKU);
    float* red = reinterpret_cast<float*>(smem + zero_off + C::ZERO);
    float* ypart = red + kRedBytes / 4;
    const uint8_t* zero = smem + zero_off;

    // This block's tiles, in rounds of TPR tiles × S slices (warp w: tile lane w / S, slice w % S).
    const int64_t tb0 = int64_t(blockIdx.x) * a.tiles / a.grid, tb1 = int64_t(blockIdx.x + 1) * a.tiles / a.grid;
    const int TPR = kWarps / a.S, tl = warp / a.S, kq0 = (warp % a.S) * a.spsl;
    const int nr = int((tb1 - tb0 + TPR - 1) / TPR);
    const int nit = a.nc * nr * a.spsl * C::V;  // same for every warp of the block (barriers below)
    const int n = a.n, cs = a.cs, spsl = a.spsl;
    const int64_t rows = a.rows;
    const int row_bytes = a.row_bytes, ngroups = a.ngroups;

    uint32_t cw[BUF][16];      // codes: words 0..7 row g, 8..15 row g+8 (piece p: words p·WPP ..)
    uint32_t sr[BUF][C::NSC];  // raw scales / biases, see below
#pragma unroll
    for (int j = 0; j < BUF; ++j) {
#pragma unroll
        for (int i = 0; i < 16; ++i) cw[j][i] = 0u;
#pragma unroll
        for (int i = 0; i < C::NSC; ++i) sr[j][i] = 0u;
    }

    // ---- load side: cursor (chunk lc, round lr, K-unit lq of the slice, iteration lv of the span) ----
    // Scales: lane t loads G of the 4G values a quad needs per span (kinds s row g, s row g+8, b row g, b row g+8
    // of each of the G groups): kinds (t·G) mod 4 + i of group gd = t·G/4, the group of the accumulator columns
    // 2t, 2t+1 that the lane owns (apply() gathers the other kinds by shuffles).
    const int gd = t * G / 4, kind0 = (t * G) % 4;
    const int rb_t = row_bytes - t * C::LS;  // piece p is inside the row iff ib + p·4·LS < rb_t
    const int64_t rs8 = a.hrow * ngroups * ES;           // scales: a lane's second row
    const int64_t hoff = a.hrow * row_bytes;              // codes: a lane's second row
    const int RPT = a.pairs ? 8 : 16;                     // output rows per tile
    int lv = 0, lq = 0, lr = 0, lc = 0;
    bool l_tile_ok = false, okg = false, okg8 = false;
    const uint8_t* pw = a.w;  // row g of the tile
    const uint8_t* spa = nullptr;  // kind kind0 (G = 1: kind t) at group 0
    const uint8_t* spb = nullptr;  // G = 4: biases row g
    auto round_ptrs = [&]() {
        const int64_t tile = tb0 + int64_t(lr) * TPR + tl, r0 = tile * RPT + g;
        l_tile_ok = tile < tb1;
        okg = l_tile_ok && r0 < rows, okg8 = l_tile_ok && (a.pairs ? r0 < rows : r0 + 8 < rows);
        pw = a.w + r0 * row_bytes;
        const int64_t rsb = (r0 + (G == 1 ? a.hrow * (t & 1) : 0)) * int64_t(ngroups) * ES;
        spa = static_cast<const uint8_t*>(kind0 >= 2 ? a.biases : a.scales) + rsb;
        spb = static_cast<const uint8_t*>(a.biases) + rsb;
    };
    round_ptrs();
    auto lnext = [&]() {
        if (++lv == C::V) {
            lv = 0;
            if (++lq == spsl) {
                lq = 0;
                if (++lr == nr) lr = 0, ++lc;
                round_ptrs();
            }
        }
    };
    auto load = [&](int slot) {
        const int kq = kq0 + lq, ku = lc * cs + kq;
        if (!(l_tile_ok && kq < cs && ku < a.nku)) return;
        const int ib = (ku * C::V + lv) * 128;  // row byte of the iteration
        const uint8_t* pg = pw + ib + t * C::LS;
        // Pieces outside the matrix are not loaded and keep stale codes: any word decodes to finite bf16 values
        // (16 .. 31), which meet x' = 0 (columns ≥ K are staged as zeros) or belong to rows ≥ rows, whose scales
        // and biases are loaded as 0 and whose sums are never stored.
#pragma unroll
        for (int p = 0; p < C::NP; ++p) {
            const bool okp = ib + p * 4 * C::LS < rb_t;
            if (okp && okg) ldw<C::LS>(pg + p * 4 * C::LS, &cw[slot][p * C::WPP]);
            if (okp && okg8) ldw<C::LS>(pg + hoff + p * 4 * C::LS, &cw[slot][8 + p * C::WPP]);
        }
        if (C::V > 1 && lv != C::V - 1) return;  // scales ride with the span's last iteration
#pragma unroll
        for (int us = 0; us < C::U; ++us) {
            const int gi = (ib / C::SPAN + us) * G + gd;
            const bool okgi = gi < ngroups;
#pragma unroll
            for (int i = 0; i < G; ++i) {
                const uint8_t* p = (G == 4 && i >= 2 ? spb : spa) + (G > 1 && (i & 1) ? rs8 : 0) + int64_t(gi) * ES;
                const bool okr = G == 1 ? ((t & 1) ? okg8 : okg) : ((i & 1) ? okg8 : okg);
                sr[slot][us * G + i] = okr && okgi ? SBT<ST>::load(p, 0) : 0u;
            }
        }
    };

    // ---- compute side ----
    float acc[4] = {0.f, 0.f, 0.f, 0.f};  // rows g, g, g+8, g+8 × accumulator columns 2t, 2t+1
    // post_norm: the RMSNorm factor of token lane & 7 (each warp its own copy, the same bits: fixed summation
    // order), from the warps' Σx² after each staging; warp 0 also leaves it in inv[] for reduce_round.
    float inv_lane = 1.f;
    auto post_inv = [&]() {
        if (!a.post_norm) return;
        float ss = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) ss += ssr[w * 8 + (lane & 7)];
        inv_lane = 1.0f / sqrtf(ss / static_cast<float>(a.K) + a.eps);
        if (warp == 0 && lane < 8) inv[lane] = inv_lane;
    };
    float Dh[4] = {0.f, 0.f, 0.f, 0.f}, Dl[4] = {0.f, 0.f, 0.f, 0.f};  // x hi / x lo chains (independent MMAs)
    // Lane's B-fragment offset for piece p in iteration v: its slot if its column's group (g / NT) is the group
    // of the codes it holds there, else −1 (zero fragments).
    const int tslot16 = ((g % NT) * 4 + t) * 16;
    auto boff = [&](int p, int v) -> int {
        const int gam = C::U > 1 ? gd : ((v * 128 + p * 4 * C::LS + t * C::LS) % C::SPAN) / C::GB;
        return g / NT == gam ? tslot16 : -1;
    };

    // Per-span scale application (all lanes; shuffles inside).
    auto apply = [&](const uint32_t* raw, int span_local) {
        float sv[G];
#pragma unroll
        for (int i = 0; i < G; ++i) sv[i] = SBT<ST>::f(raw[i]);
        float k4[4];
        if constexpr (G == 4) {
#pragma unroll
            for (int k = 0; k < 4; ++k) k4[k] = sv[k];
        } else {
            const int src0 = (lane & ~3) | (t & ~(4 / G - 1));
#pragma unroll
            for (int k = 0; k < 4; ++k) k4[k] = __shfl_sync(0xffffffffu, sv[k % G], src0 + k / G);
        }
        const float2 X = *reinterpret_cast<const float2*>(xsum + span_local * 8 + 2 * t);
        const float bg = fmaf(-C::OFF, k4[0], k4[2]), bg8 = fmaf(-C::OFF, k4[1], k4[3]);
        acc[0] = fmaf(k4[0], Dh[0] + Dl[0], fmaf(bg, X.x, acc[0]));
        acc[1] = fmaf(k4[0], Dh[1] + Dl[1], fmaf(bg, X.y, acc[1]));
        acc[2] = fmaf(k4[1], Dh[2] + Dl[2], fmaf(bg8, X.x, acc[2]));
        acc[3] = fmaf(k4[1], Dh[3] + Dl[3], fmaf(bg8, X.y, acc[3]));
#pragma unroll
        for (int i = 0; i < 4; ++i) Dh[i] = Dl[i] = 0.f;
    };

    auto compute = [&](int slot, int kq, int v) {
        const uint8_t* xit = xs + (kq * C::V + v) * (16 * C::STEP);
#pragma unroll
        for (int p = 0; p < C::NP; ++p) {
            const int bo = boff(p, v);
            const uint8_t* base = bo >= 0 ? xit + bo : zero;
#pragma unroll
            for (int ss = 0; ss < 2 * C::WPP; ++ss) {
                const int s = p * 2 * C::WPP + ss, w = p * C::WPP + ss / 2, h = ss & 1;
                const uint32_t a0 = pair16(cw[slot][w], 2 * h), a2 = pair16(cw[slot][w], 2 * h + 1);
                const uint32_t a1 = pair16(cw[slot][8 + w], 2 * h), a3 = pair16(cw[slot][8 + w], 2 * h + 1);
                const uint4 bq = *reinterpret_cast<const uint4*>(base + s * C::STEP);
                mma(Dh, a0, a1, a2, a3, bq.x, bq.y);  // x hi
                mma(Dl, a0, a1, a2, a3, bq.z, bq.w);  // x lo
            }
            if constexpr (C::U > 1) apply(&sr[slot][p * G], kq * C::U + p);
        }
        if constexpr (C::U == 1) {
            if (v == C::V - 1) apply(&sr[slot][0], kq);
        }
    };

    // End of a round: sum the lanes that hold other groups of the same token, then store (one slice, one chunk)
    // or go through shared memory (slices: fixed order; chunks: running per-tile partials).
    int par = 0;
    auto finish = [&](int r, int c) {
        if constexpr (G == 4) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], 1);
                acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], 2);
            }
        } else if constexpr (G == 2) {
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], 2);
        }
        const bool writer = G == 4 ? t == 0 : G == 2 ? t < 2 : true;
        const int tok0 = (2 * t) % NT;
        const int64_t tile0 = tb0 + int64_t(r) * TPR;
        if (!a.red) {
            const int64_t tile = tile0 + tl;
            if (a.post_norm) {  // (uniform) acc[i] belongs to token tok0 + (i & 1)
                const float s0 = __shfl_sync(0xffffffffu, inv_lane, tok0 & 7);
                const float s1 = __shfl_sync(0xffffffffu, inv_lane, (tok0 + 1) & 7);
                acc[0] *= s0, acc[1] *= s1, acc[2] *= s0, acc[3] *= s1;
            }
            if (writer && tile < tb1 && a.pairs) {  // acc[0..1]: gate row g, acc[2..3]: its up row
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    const int64_t row = tile * 8 + g;
                    const int tok = tok0 + i;
                    if (row < rows && tok < n) *y_at(a, tok, row) = swiglu1(acc[i], acc[2 + i]);
                }
            } else if (writer && tile < tb1) {
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int64_t row = tile * 16 + g + 8 * (i >> 1);
                    const int tok = tok0 + (i & 1);
                    if (row < rows && tok < n) {
                        float* yp = y_at(a, tok, row);
                        *yp = a.accum ? *yp + acc[i] : acc[i];
                    }
                }
            }
        } else {
            float* rw = red + (par * kWarps + warp) * 128;
            if (writer) {
#pragma unroll
                for (int i = 0; i < 4; ++i) rw[(g + 8 * (i >> 1)) * 8 + tok0 + (i & 1)] = acc[i];
            }
            __syncthreads();
            reduce_round(a, red + par * kWarps * 128, ypart, rows, tile0, tb1, r * TPR, TPR, a.S, n, c == 0,
                         c == a.nc - 1, a.accum != 0, inv);
            par ^= 1;
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[i] = 0.f;
    };

    // Programmatic dependent launch: let the next kernel of the stream be scheduled as our blocks retire (it waits
    // for our completion before touching memory we write), and prefetch our weights before waiting for the
    // previous kernel (weights are not written by it; x and y are only touched after the wait).
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    // Prologue: fill the ring, wait for the producer of x, then zero the zero fragments and stage x while the
    // loads land.
#pragma unroll
    for (int j = 0; j < BUF - 1; ++j) {
        if (j < nit) load(j);
        lnext();
    }
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    if (a.pre == PRE_RMSNORM && !a.post_norm) rms_factors(xpro(a), inv, ssr);  // (ssr as its scratch)
    for (int i = int(threadIdx.x); i < C::ZERO / 16; i += kThreads)
        reinterpret_cast<uint4*>(smem + zero_off)[i] = make_uint4(0u, 0u, 0u, 0u);
    stage_x<BITS, GS, G>(a, inv, 0, min(cs, a.nku), xs, xsum, ssr, true);
    __syncthreads();
    post_inv();

    int cv = 0, cq = 0, cr = 0, cc = 0;  // compute cursor
    bool c_tile_ok = tb0 + tl < tb1;
    for (int base = 0; base < nit; base += BUF) {
#pragma unroll
        for (int j = 0; j < BUF; ++j) {
            const int it = base + j;
            if (it + BUF - 1 < nit) load((j + BUF - 1) % BUF);
            lnext();
            if (it < nit) {
                const int kq = kq0 + cq;
                if (c_tile_ok && kq < cs && cc * cs + kq < a.nku) compute(j, kq, cv);
                if (++cv == C::V) {
                    cv = 0;
                    if (++cq == spsl) {  // end of a round
                        cq = 0;
                        finish(cr, cc);
                        if (++cr == nr) {
                            cr = 0;
                            if (++cc < a.nc) {  // next chunk of x (every thread is past its last read: barrier in finish)
                                const int k0 = cc * cs;
                                stage_x<BITS, GS, G>(a, inv, k0, min(cs, a.nku - k0), xs, xsum, ssr, false);
                                __syncthreads();
                                post_inv();
                            }
                        }
                        c_tile_ok = tb0 + int64_t(cr) * TPR + tl < tb1;
                    }
                }
            }
        }
    }
}

// Host mirror of QC for a run-time (bits, gs, G).
struct QLayout {
    int GB, SB, V, U, KU, SPK, AL, XKU, SKU, ZERO;
    QLayout(int bits, int gs, int G) {
        GB = gs * bits / 8, SB = G * GB / 4, V = SB >= 32 ? SB / 32 : 1, U = SB >= 32 ? 1 : 32 / SB;
        KU = 128 * V, SPK = V == 1 ? U : 1, AL = 32 / G;
        XKU = V * 16 * AL * 16, SKU = SPK * 32, ZERO = AL < 32 ? 16 * AL * 16 : 0;
    }
};

struct QPlan {
    QArgs a;
    int G;
    bool pdl;
    size_t smem;
};

// Work split for one call. Returns false when x cannot be staged (then another kernel runs). Pairs: tiles of 8
// output rows (a gate row and its up row each), as many tiles as the plain [gate; up] GEMV has.
bool plan(const Weight& W, int n, const GemvTuning& tune, bool pairs, QPlan& P) {
    QArgs& a = P.a;
    int G = n <= 2 ? 4 : n <= 4 ? 2 : 1;
    if (tune.q_groups) G = tune.q_groups;
    EMBER_CHECK((G == 1 || G == 2 || G == 4) && 8 / G >= n, "gemv_q: groups per MMA %d for n=%d", G, n);
    P.G = G;
    const QLayout L(W.bits, W.group_size, G);
    a.rows = pairs ? W.rows / 2 : W.rows, a.row_bytes = int(W.cols * W.bits / 8), a.ngroups = int(W.cols / W.group_size);
    a.K = int(W.cols), a.n = n;
    a.pairs = pairs ? 1 : 0, a.hrow = pairs ? a.rows : 8;
    a.tiles = pairs ? (a.rows + 7) / 8 : (W.rows + 15) / 16;
    a.nku = (a.row_bytes + L.KU - 1) / L.KU;
    int grid = int(std::min<int64_t>(a.tiles, sm_count()));
    if (tune.q_max_blocks > 0) grid = std::min(grid, tune.q_max_blocks);
    a.grid = std::max(grid, 1);
    const int64_t tpb = (a.tiles + a.grid - 1) / a.grid;  // most tiles of a block
    const int per_ku = L.XKU + L.SKU;
    const int budget = kSmemMax - L.ZERO;
    // Chunks of K (x does not fit, or forced by the tuning for tests).
    int cs = a.nku;
    if (tune.q_chunk > 0) cs = std::min(cs, tune.q_chunk);
    if (int64_t(cs) * per_ku > budget - kRedBytes) {
        const int64_t room = budget - kRedBytes - tpb * 16 * 8 * 4;
        if (tpb > kMaxChunkTiles || room < per_ku) return false;
        cs = int(std::min<int64_t>(cs, room / per_ku));
    }
    a.cs = cs, a.nc = (a.nku + cs - 1) / cs;
    // Slices: fewest iterations per warp (rounds × K-units per slice); ties within 10 % go to fewer slices.
    int S = 1;
    if (tune.q_slices) {
        S = tune.q_slices;
    } else {
        double best = 0;
        for (int s : {1, 2, 4, 8, 16}) {
            const int64_t rounds = (tpb + (kWarps / s) - 1) / (kWarps / s), spsl = (cs + s - 1) / s;
            const double cost = double(rounds * spsl) * (s > 1 ? 1.02 : 1.0);
            if (s == 1 || cost < best * 0.9) best = cost, S = s;
        }
    }
    EMBER_CHECK(S == 1 || S == 2 || S == 4 || S == 8 || S == 16, "gemv_q: slices %d", S);
    a.S = S, a.spsl = (cs + S - 1) / S;
    a.red = (S > 1 || a.nc > 1) ? 1 : 0;
    P.smem = size_t(cs) * per_ku + L.ZERO + (a.red ? kRedBytes : 0) + (a.nc > 1 ? size_t(tpb) * 16 * 8 * 4 : 0);
    EMBER_CHECK(P.smem <= size_t(kSmemMax), "gemv_q: %zu bytes of shared memory", P.smem);
    return true;
}

template <int BITS, int GS, int G, class ST>
void launch(const QPlan& P, cudaStream_t stream) {
    auto kernel = gemv_q_kernel<BITS, GS, G, ST>;
    static const bool attr_set = [&] {  // once per instance (single-device process)
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemMax));
        return true;
    }();
    (void)attr_set;
    launch_ex(kernel, dim3(unsigned(P.a.grid)), dim3(kThreads), P.smem, stream, P.pdl, 0, P.a);
}

template <int BITS, int GS, int G>
void launch_st(DType st, const QPlan& P, cudaStream_t stream) {
    if (st == DType::BF16) launch<BITS, GS, G, __nv_bfloat16>(P, stream);
    else if (st == DType::F16) launch<BITS, GS, G, __half>(P, stream);
    else launch<BITS, GS, G, float>(P, stream);
}

template <int BITS, int GS>
void launch_g(DType st, const QPlan& P, cudaStream_t stream) {
    if (P.G == 4) launch_st<BITS, GS, 4>(st, P, stream);
    else if (P.G == 2) launch_st<BITS, GS, 2>(st, P, stream);
    else launch_st<BITS, GS, 1>(st, P, stream);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

// SM count of the device current at the first call (one device per process: linear_cuda.h).
int sm_count() {
    static const int n = [] {
        int dev = 0, v = 0;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
        return v;
    }();
    return n;
}

bool gemv_affine_q(const Weight& W, const float* x, int n, float* y, cudaStream_t stream, const GemvTuning& tune,
                   char* describe, size_t describe_bytes, const LinearFusion* fusion, const GemmOutSplit* split,
                   bool swiglu_pairs) {
    if (W.format != WeightFormat::AFFINE || (W.bits != 4 && W.bits != 8) || !aligned16(W.data)) return false;
    if (W.group_size != 32 && W.group_size != 64 && W.group_size != 128) return false;
    if (W.sb_dtype != DType::BF16 && W.sb_dtype != DType::F16 && W.sb_dtype != DType::F32) return false;
    if (W.cols * W.bits / 8 >= (int64_t(1) << 30) || W.cols % W.group_size != 0) return false;
    EMBER_CHECK(n >= 1 && n <= 8, "gemv_affine_q: n=%d", n);
    if (swiglu_pairs) {
        EMBER_CHECK(W.rows % 2 == 0 && !split && !(fusion && (fusion->swiglu || fusion->accumulate)),
                    "gemv_affine_q: SwiGLU pairs over %lld rows (even; no output split, SwiGLU prologue or accumulation)",
                    (long long)W.rows);
    }
    QPlan P{};
    if (!plan(W, n, tune, swiglu_pairs, P)) return false;
    static const bool pdl_env = !env_off("EMBER_GEMV_PDL");
    P.pdl = tune.q_pdl ? tune.q_pdl > 0 : pdl_env;
    P.a.w = static_cast<const uint8_t*>(W.data), P.a.scales = W.scales, P.a.biases = W.biases;
    P.a.x = x, P.a.y = y;
    P.a.y1 = P.a.y2 = P.a.y3 = nullptr;
    P.a.yend[0] = P.a.yend[1] = P.a.yend[2] = INT64_MAX;
    if (split) {  // (linear_parts: y unused)
        EMBER_CHECK(split->parts >= 1 && split->parts <= 4 && split->end[split->parts - 1] == W.rows,
                    "gemv_affine_q: output split in %d parts does not cover %lld rows", split->parts, (long long)W.rows);
        P.a.y = split->y[0], P.a.y1 = split->y[1], P.a.y2 = split->y[2], P.a.y3 = split->y[3];
        for (int k = 0; k + 1 < split->parts; ++k) P.a.yend[k] = split->end[k];
        y = split->y[0];
    }
    const LinearFusion f = fusion ? *fusion : LinearFusion{};
    P.a.pre = f.norm_w ? PRE_RMSNORM : f.swiglu ? PRE_SWIGLU : PRE_NONE;
    // The RMSNorm factor applied to the sums (one pass over x per block) unless EMBER_NORM_POST=0 (the factors
    // first, rms_factors, then x' staged: two passes).
    static const bool post_env = !env_off("EMBER_NORM_POST");
    P.a.post_norm = P.a.pre == PRE_RMSNORM && post_env ? 1 : 0;
    P.a.xstride = f.swiglu ? 2 * P.a.K : P.a.K;
    P.a.accum = f.accumulate ? 1 : 0;
    P.a.norm_w = f.norm_w, P.a.eps = f.eps;
    P.a.x_aligned = aligned16(x) && (!f.norm_w || aligned16(f.norm_w)) ? 1 : 0;
    if (describe)
        std::snprintf(describe, describe_bytes, "q%d g%d G%d S%d ch%d grid%d smem%zuK%s%s", W.bits, W.group_size, P.G,
                      P.a.S, P.a.nc, P.a.grid, (P.smem + 1023) / 1024, P.pdl ? " pdl" : "", swiglu_pairs ? " pairs" : "");
    if (x == nullptr || W.rows == 0) return true;  // describe only / nothing to do
    EMBER_CHECK(W.scales && W.biases && y, "gemv_affine_q: null pointer");
    switch (W.bits * 1000 + W.group_size) {
        case 4032: launch_g<4, 32>(W.sb_dtype, P, stream); break;
        case 4064: launch_g<4, 64>(W.sb_dtype, P, stream); break;
        case 4128: launch_g<4, 128>(W.sb_dtype, P, stream); break;
        case 8032: launch_g<8, 32>(W.sb_dtype, P, stream); break;
        case 8064: launch_g<8, 64>(W.sb_dtype, P, stream); break;
        default: launch_g<8, 128>(W.sb_dtype, P, stream); break;
    }
    CUDA_CHECK(cudaGetLastError());
    return true;
}

}  // namespace ember::cuda::detail
