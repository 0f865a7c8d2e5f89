// ops/linear/linear_gemv_stream.cu: y = x·Wᵀ for large 4/8-bit affine and GGML Q6_K matrices in the tiled storage
// (ops/linear/weight_tiles.h) — the "stream" GEMV (spec: linear_cuda.h; tests: linear_stream_cuda_test.cpp;
// benchmark: gemv_bench, section "tiled"; design measurements: bench/results/2026-12-01-h200-stream-gemv.md).
//
// Design (H200: ~4.24 TB/s copy bandwidth, 132 SMs), one token per launch (Q6_K: up to 4, below):
//  - Persistent blocks of W = tiled_warps(K) warps (8..20), one per SM. Warp w owns the K chunks (128 columns)
//    w, w + W, …: its x B-fragments stay in registers (16 per chunk) while it streams those chunks of T = 16
//    row tiles (a "run"); the block's warps cover all chunks of the run, and their per-tile partial sums meet in
//    shared memory, summed in warp order (deterministic, no atomics) after one barrier per run.
//  - Weights go HBM → shared memory by cp.async (16 B per lane, whole 512-byte pieces per warp instruction), a
//    2-slot ring per warp of P tiles each (P = 4 when it fits: 4.5 KB in flight per warp); lanes read back only
//    the 16 bytes they copied (codes) and one scale entry. No registers are held by loads in flight.
//  - MMA columns carry (group, hi / lo): column 2G = x hi of the chunk's group G, 2G + 1 = x lo, so one
//    m16n8k16 per k-step serves both halves of x and all groups of the chunk (the B fragment of a lane is zero
//    where its column's group is not the step's). Lane t = G applies group G's scale and bias, the quad sums.
//  - Same exact arithmetic as the q kernel (linear_gemv_q.cu): codes as bf16 16 + q, x = hi + lo bf16,
//    y = Σ_groups s·C + (b − 16 s)·X with X = Σ x' of the group; fp32 accumulation.
//  - Programmatic dependent launch: the first weight copies are issued before griddepcontrol.wait.
//  - 8-bit codes are read as two nibbles (the high one meets 16·x); Q6_K codes as bf16 128 + q taken from 6-bit
//    streams (its 8 groups per chunk in two accumulators; y = d·Σ sc·(C − 160·X)).
//  - The loader advances per-lane source pointers by whole tiles (64-bit index math only at chunk changes).
//  - Q6_K, NT = 2 or 4 tokens per launch (the batched engine's LM head at 2-64 rows; EMBER_STREAM_ROWS=0: off):
//    MMA column 2·tok + hi / lo,
//    each k-step's sums scaled by its group's sc at once (tile_math_rows); runs of 16 / NT tiles, so the partial
//    sums keep their size; x of NT tokens in shared memory (NT = 4 up to K = 4096, 2 up to 5120).
// Measured (H200, n = 1, 290 MB – 1.1 GB heads): 4/8-bit 89–99 % of copy bandwidth where the q kernel reaches
// 66–71 %; Q6_K 92–95 % (its block kernel: 56–58 %; bench/results/2026-12-01-h200-stream-q6k.md).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "core/check.h"
#include "core/env.h"
#include "ops/linear/linear_cuda.h"
#include "ops/linear/linear_gemv_mma.cuh"
#include "ops/linear/linear_gemv_prologue.cuh"
#include "ops/linear/weight_tiles.h"

namespace ember::cuda::detail {
namespace {

constexpr int kMaxWarps = 20, kT = 16, kR = 2;
constexpr int kSmemMax = 227 * 1024 - 1024;  // dynamic shared memory per block (static: the RMSNorm sums)

struct SArgs {
    const uint4* codes;  // [tiles][nchunks][64]
    const uint8_t* sb;   // [tiles][nchunks][sb chunk bytes]
    float* y;            // [ntok][ystride]: this launch's tokens
    XPrologue xp;        // xp.n = ntok rows of x from xp.x
    int64_t rows, ystride;
    int tiles, nchunks;
    int accum;
};

// Row tiles per run of a launch of NT tokens: the run's partial sums (warps × tiles × 16 rows × NT) keep one size.
constexpr int tiles_per_run(int NT) { return kT / NT; }

template <class ST> struct Sb4;  // one scale entry {s(g), b(g), s(g+8), b(g+8)} as floats
template <> struct Sb4<__nv_bfloat16> {
    static __device__ __forceinline__ float4 get(const uint8_t* p) {
        const uint2 u = *reinterpret_cast<const uint2*>(p);
        return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u),
                           __uint_as_float(u.y << 16), __uint_as_float(u.y & 0xffff0000u));
    }
};
template <> struct Sb4<__half> {
    static __device__ __forceinline__ float4 get(const uint8_t* p) {
        const uint2 u = *reinterpret_cast<const uint2*>(p);
        const __half2 a = *reinterpret_cast<const __half2*>(&u.x), b = *reinterpret_cast<const __half2*>(&u.y);
        return make_float4(__low2float(a), __high2float(a), __low2float(b), __high2float(b));
    }
};
template <> struct Sb4<float> {
    static __device__ __forceinline__ float4 get(const uint8_t* p) { return *reinterpret_cast<const float4*>(p); }
};

__device__ __forceinline__ void cp_async16(uint32_t s, const void* g) {  // s: a shared-window address
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(g));
}

// Q6_K: bf16x2 {128 + q, 128 + q'} of the 6-bit codes at bits 6i..6i+5 of the two 48-bit streams of words
// w[3m..3m+2] (the low and the high 16-bit halves; weight_tiles.h), ORed into 128.0 (0x4300: bit 0 worth 1). Codes
// inside one word: one shift + one LOP3; the two that straddle two words (i = 2, 5): two of each.
__device__ __forceinline__ uint32_t pair128(const uint32_t* w, int m, int i) {
    const int o = 6 * i, wa = 3 * m + o / 16, ba = o % 16;
    uint32_t r;
    if (ba + 6 <= 16) {
        const uint32_t v = ba == 0 ? w[wa] : w[wa] >> ba;
        asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(v), "n"(0x003F003F), "n"(0x43004300));
    } else {
        const int n1 = 16 - ba;  // bits in the first word (4 or 2)
        const uint32_t lo = w[wa] >> ba, hi = w[wa + 1] << n1;
        const uint32_t m1 = ((1u << n1) - 1) * 0x00010001u, m2 = 0x003F003Fu & ~m1;
        uint32_t t;
        asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(t) : "r"(lo), "r"(m1), "n"(0x43004300));
        asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(hi), "r"(m2), "r"(t));
    }
    return r;
}

// A tile-chunk as read by a lane: its code words (4-bit / 8-bit: w[0..3] rows g, w[4..7] rows g+8; Q6_K: 12 words
// of 6-bit streams) and its scale entry e (Q6_K: e = {d(g), d(g+8)}, f = the int8 sc {(g, t), (g+8, t), (g, t+4),
// (g+8, t+4)} as floats).
struct Item {
    uint32_t w[12];
    float4 e, f;
    uint32_t scw;  // Q6_K: the four int8 sc as read
};

// A fragments of k-step s: 4-bit codes 16 + q (8-bit codes as nibble pairs), or Q6_K codes 128 + q.
template <int BITS>
__device__ __forceinline__ void frag(const Item& it, int s, uint32_t& a0, uint32_t& a1, uint32_t& a2, uint32_t& a3) {
    if constexpr (BITS == 6) {
        const int m = s / 2, i = 4 * (s % 2);
        a0 = pair128(it.w, m, i), a1 = pair128(it.w, m, i + 1), a2 = pair128(it.w, m, i + 2),
        a3 = pair128(it.w, m, i + 3);
    } else {
        const int w = s / 2, jb = 2 * (s % 2);
        a0 = pair16(it.w[w], jb), a2 = pair16(it.w[w], jb + 1), a1 = pair16(it.w[4 + w], jb),
        a3 = pair16(it.w[4 + w], jb + 1);
    }
}

// One 16-row × 128-nibble-column block: v0 / v1 = rows g / g+8 (valid in lanes t = 0). GS = nibble columns per
// group; OFF = the code offset met by X (16 for 4-bit codes 16 + q; 272 = 16 + 16·16 for codes of two nibbles);
// e = this lane's {s(g), b(g), s(g+8), b(g+8)} of group t % NG. Q6_K: groups t, t + 4 in two accumulators (k-steps
// 0-3 / 4-7, MMA columns 2·(G % 4), +1), y = d·Σ_G sc·(C − 160·X) for codes 128 + q (w = d·sc·(q − 32)); XG, XG2
// are then −160·X.
template <int GS, int OFF, int BITS>
__device__ __forceinline__ void tile_math(const Item& it, const uint2 (&xf)[8], float XG, float XG2, float& v0,
                                          float& v1) {
    constexpr int NG = 128 / GS;
    float d0[4], d1[4];
#pragma unroll
    for (int s = 0; s < 8; ++s) {
        uint32_t a0, a1, a2, a3;
        frag<BITS>(it, s, a0, a1, a2, a3);
        const bool first = BITS == 6 ? s == 0 || s == 4 : s < 2;
        const bool one = BITS == 6 ? s < 4 : s % 2 == 0;
        if (one) {
            if (first) mma0(d0, a0, a1, a2, a3, xf[s].x, xf[s].y);
            else mma(d0, a0, a1, a2, a3, xf[s].x, xf[s].y);
        } else {
            if (first) mma0(d1, a0, a1, a2, a3, xf[s].x, xf[s].y);
            else mma(d1, a0, a1, a2, a3, xf[s].x, xf[s].y);
        }
    }
    const float4& e = it.e;
    float r0, r1;
    if constexpr (BITS == 6) {
        const float4& f = it.f;
        r0 = e.x * fmaf(f.x, (d0[0] + d0[1]) + XG, f.z * ((d1[0] + d1[1]) + XG2));
        r1 = e.y * fmaf(f.y, (d0[2] + d0[3]) + XG, f.w * ((d1[2] + d1[3]) + XG2));
    } else {
        r0 = fmaf(e.x, (d0[0] + d1[0]) + (d0[1] + d1[1]), fmaf(-float(OFF), e.x, e.y) * XG);
        r1 = fmaf(e.z, (d0[2] + d1[2]) + (d0[3] + d1[3]), fmaf(-float(OFF), e.z, e.w) * XG);
    }
    v0 = r0, v1 = r1;
    if constexpr (NG >= 2) {
        v0 += __shfl_xor_sync(0xffffffffu, v0, 1);
        v1 += __shfl_xor_sync(0xffffffffu, v1, 1);
    }
    if constexpr (NG >= 4) {
        v0 += __shfl_xor_sync(0xffffffffu, v0, 2);
        v1 += __shfl_xor_sync(0xffffffffu, v1, 2);
    }
}

// Q6_K, several tokens (NT > 1): MMA column 2·tok + (0: x hi, 1: x lo) for tok < 4, so lane (g, t) holds token t of
// rows g, g+8. Each k-step is one group G = s: its sums are scaled at once, v = d·Σ_s sc(row, s)·(C_s + XG[s]) with
// XG[s] = −160·X of the lane's token's group s (the same math as tile_math's one-token form, other order). The
// sc of group s sit in quad lane s % 4 (bytes 0 / 1: groups < 4, rows g / g+8; bytes 2 / 3: groups ≥ 4).
__device__ __forceinline__ void tile_math_rows(const Item& it, const uint2 (&xf)[8], const float (&XG)[8], float& v0,
                                               float& v1) {
    const int q0 = int(threadIdx.x & 31) & ~3;
    uint32_t wq[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) wq[u] = __shfl_sync(0xffffffffu, it.scw, q0 | u);
    float acc0 = 0.f, acc1 = 0.f;
#pragma unroll
    for (int s = 0; s < 8; ++s) {
        uint32_t a0, a1, a2, a3;
        frag<6>(it, s, a0, a1, a2, a3);
        float d[4];
        mma0(d, a0, a1, a2, a3, xf[s].x, xf[s].y);
        const uint32_t w = wq[s & 3] >> (s < 4 ? 0 : 16);
        acc0 = fmaf(float(int8_t(w & 0xffu)), (d[0] + d[1]) + XG[s], acc0);
        acc1 = fmaf(float(int8_t((w >> 8) & 0xffu)), (d[2] + d[3]) + XG[s], acc1);
    }
    v0 = it.e.x * acc0, v1 = it.e.y * acc1;
}

// A ring item as this lane reads it. Codes: 1024 bytes [h][lane][16 B] (Q6_K: 1536 bytes [3][lane][16 B]); then the
// sb entries: ST {s, b} pairs (affine) or Q6_K int8 sc [lane][4] + fp16 d [g][h] (scale d·sc, bias −32·scale).
template <int BITS, class ST, int NG>
__device__ __forceinline__ void read_item(const uint8_t* b, int lane, int g, int t, Item& it) {
    constexpr int NP = BITS == 6 ? 3 : 2;
#pragma unroll
    for (int q = 0; q < NP; ++q) {
        const uint4 v = reinterpret_cast<const uint4*>(b)[32 * q + lane];
        it.w[4 * q] = v.x, it.w[4 * q + 1] = v.y, it.w[4 * q + 2] = v.z, it.w[4 * q + 3] = v.w;
    }
    if constexpr (BITS == 6) {
        const uint32_t sc = reinterpret_cast<const uint32_t*>(b + 1536)[lane];
        const __half2 d = reinterpret_cast<const __half2*>(b + 1536 + 128)[g];
        it.scw = sc;
        it.e = make_float4(__low2float(d), __high2float(d), 0.f, 0.f);
        it.f = make_float4(float(int8_t(sc & 0xff)), float(int8_t((sc >> 8) & 0xff)), float(int8_t((sc >> 16) & 0xff)),
                           float(int8_t(sc >> 24)));
    } else {
        it.e = Sb4<ST>::get(b + 1024 + (g * NG + t % NG) * 4 * int(sizeof(ST)));
    }
}

// NT = 1: one token (every format). NT = 2 / 4 (Q6_K): a.xp.n ≤ NT tokens in one pass over the weights.
template <int GS, class ST, int P, int BITS, int NT>
__global__ void __launch_bounds__(32 * kMaxWarps, 1) gemv_stream_kernel(const SArgs a) {
    static_assert(NT == 1 || (BITS == 6 && (NT == 2 || NT == 4)), "several tokens per pass: Q6_K, 2 or 4");
    constexpr int NG = 128 / GS, KT = tiles_per_run(NT);
    constexpr int CODE = BITS == 6 ? 1536 : 1024;                      // code bytes per tile-chunk
    constexpr int SBC = BITS == 6 ? 160 : 32 * NG * int(sizeof(ST));  // sb bytes per tile-chunk
    constexpr int ITEM = CODE + SBC;                                  // bytes of one tile-chunk in the ring
    constexpr int SLOT = P * ITEM;
    extern __shared__ __align__(16) uint8_t smem[];
    const int W = int(blockDim.x) >> 5, nch = a.nchunks;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    uint8_t* ring = smem;                                                  // [W][kR][SLOT]
    uint4* xs0 = reinterpret_cast<uint4*>(smem + size_t(W) * kR * SLOT);  // [NT][nch][8 steps][4 t]
    float* xsum0 = reinterpret_cast<float*>(xs0 + NT * nch * 32);          // [NT][nch][NG]
    float* red = xsum0 + NT * nch * NG;                                    // [2][W][KT·16 rows][NT]
    __shared__ float inv_s[8], red_ss[kMaxWarps * 8];

    // ---- loader: (run, chunk index ci of this warp, tile tt) in steps of P tiles ----
    // Per lane: source pointers of its 16-byte pieces at the loader's position (advanced by whole tiles; set anew
    // at each chunk change), the first tile index there; destination = the ring slot + 16·lane.
    const uint8_t* my = ring + size_t(warp) * kR * SLOT;  // this warp's ring
    const int nmy = nch / W, nruns = (a.tiles + KT - 1) / KT;
    constexpr int SBL = SBC / 16;  // lanes that copy the tile-chunk's sb bytes
    const int64_t cstep = int64_t(nch) * (CODE / 16), sstep = int64_t(nch) * SBC;  // per tile
    int lrun = blockIdx.x, lci = 0, ltt = 0, islot = 0, ltile = 0;
    const uint4* gc = nullptr;
    const uint8_t* gs = nullptr;
    auto seek = [&]() {
        ltile = lrun * KT;  // ≥ tiles once lrun ≥ nruns: nothing is copied then
        const int64_t blk = int64_t(ltile) * nch + warp + W * lci;
        gc = a.codes + blk * (CODE / 16) + lane;
        gs = a.sb + blk * SBC + 16 * min(lane, SBL - 1);
    };
    seek();
    const uint32_t my_s = uint32_t(__cvta_generic_to_shared(my)) + 16 * lane;
    auto issue = [&]() {
        const uint32_t d = my_s + islot * SLOT;
#pragma unroll
        for (int p = 0; p < P; ++p)
            if (ltile + p < a.tiles) {
#pragma unroll
                for (int k = 0; k < CODE / 512; ++k) cp_async16(d + p * ITEM + 512 * k, gc + p * cstep + 32 * k);
                if (lane < SBL) cp_async16(d + p * ITEM + CODE, gs + p * sstep);
            }
        asm volatile("cp.async.commit_group;\n" ::);
        islot ^= 1;
        if ((ltt += P) == KT) {
            ltt = 0;
            if (++lci == nmy) lci = 0, lrun += gridDim.x;
            seek();
        } else {
            ltile += P, gc += P * cstep, gs += P * sstep;
        }
    };

    pdl_trigger();
    issue();  // weights only: nothing earlier in the stream writes them
    pdl_wait();

    // ---- x' (prologue applied) as B fragments {hi, hi, lo, lo} per (chunk, step, t), group sums ----
    float inv = 1.f;
    if (a.xp.pre == PRE_RMSNORM) {
        rms_factors(a.xp, inv_s, red_ss);
        inv = inv_s[0];
    }
    // Thread i: real columns 4i..4i+3 = nibble columns 4i.. (4-bit, Q6_K) or 8i.. as (x, 16x) pairs (8-bit), of
    // token i / (K/4); the tokens past a.xp.n are zeros.
    constexpr int V = BITS == 8 ? 2 : 1, CPG = GS / (4 * V);  // nibble columns per code, threads per group
    const int K4 = a.xp.K / 4;
    for (int ti = threadIdx.x; ti < NT * K4; ti += blockDim.x) {  // K/4 a multiple of 32: whole warps
        const int tok = NT == 1 ? 0 : ti / K4, i = NT == 1 ? ti : ti % K4;
        float v[4] = {0.f, 0.f, 0.f, 0.f};
        if (NT == 1 || tok < a.xp.n)
            load_x<4>(a.xp, a.xp.x + int64_t(tok) * a.xp.xstride, 4 * i,
                      NT == 1 || a.xp.pre != PRE_RMSNORM ? inv : inv_s[tok], v);
        uint4* xs = xs0 + tok * nch * 32;
        float* xsum = xsum0 + tok * nch * NG;
        const int col = 4 * V * i, ch = col / 128, s = (col % 128) / 16, tt = (col % 16) / 4;
        uint32_t h0, l0, h1, l1;
        float s0, s1, s2, s3, sum;
        if constexpr (V == 1) {
            split2(v[0], v[1], h0, l0, s0, s1);
            split2(v[2], v[3], h1, l1, s2, s3);
            xs[(ch * 8 + s) * 4 + tt] = make_uint4(h0, h1, l0, l1);
            sum = (s0 + s1) + (s2 + s3);
        } else {
            float z;
            sum = 0.f;
#pragma unroll
            for (int q = 0; q < 2; ++q) {  // entry tt + q: codes 2q, 2q+1 as (x, 16x) (x, 16x)
                split2(v[2 * q], 16.f * v[2 * q], h0, l0, s0, z);
                split2(v[2 * q + 1], 16.f * v[2 * q + 1], h1, l1, s1, z);
                xs[(ch * 8 + s) * 4 + tt + q] = make_uint4(h0, h1, l0, l1);
                sum += s0 + s1;
            }
        }
#pragma unroll
        for (int m = 1; m < CPG; m <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);
        if (i % CPG == 0) xsum[4 * i / (GS / V)] = sum;
    }
    __syncthreads();

    int par = 0, slot = 0;
    for (int run = blockIdx.x; run < nruns; run += gridDim.x) {
        float* rw = red + (par * W + warp) * KT * 16 * NT;
        for (int ci = 0; ci < nmy; ++ci) {
            const int ch = warp + W * ci;
            uint2 xf[8];
            float XG = 0.f, XG2 = 0.f, XT[8];
            if constexpr (NT == 1) {
#pragma unroll
                for (int s = 0; s < 8; ++s) {
                    const uint4 v = xs0[(ch * 8 + s) * 4 + t];
                    const int col = 2 * ((s * 16 / GS) % 4);  // hi column of the step's group (Q6_K: groups 4-7 → d1)
                    xf[s] = g == col ? make_uint2(v.x, v.y) : g == col + 1 ? make_uint2(v.z, v.w) : make_uint2(0u, 0u);
                }
                XG = BITS == 6 ? -160.f * xsum0[ch * NG + t] : xsum0[ch * NG + t % NG];
                XG2 = BITS == 6 ? -160.f * xsum0[ch * NG + t + 4] : 0.f;
            } else {  // column g: token g / 2, x hi (g even) or lo; lane t sums token t
                const int tok = g >> 1, tk = tok < NT ? tok : 0;  // (columns past NT tokens: zeros)
#pragma unroll
                for (int s = 0; s < 8; ++s) {
                    const uint4 v = xs0[((tk * nch + ch) * 8 + s) * 4 + t];
                    xf[s] = tok >= NT ? make_uint2(0u, 0u) : g & 1 ? make_uint2(v.z, v.w) : make_uint2(v.x, v.y);
                    XT[s] = t < NT ? -160.f * xsum0[(t * nch + ch) * NG + s] : 0.f;
                }
            }
#pragma unroll 1
            for (int j = 0; j < KT; j += P) {
                __syncwarp();
                issue();  // into the other slot (consumed last round)
                asm volatile("cp.async.wait_group 1;\n" ::);
                __syncwarp();
#pragma unroll
                for (int p = 0; p < P; ++p) {
                    Item it;
                    read_item<BITS, ST, NG>(my + slot * SLOT + p * ITEM, lane, g, t, it);
                    float v0, v1;
                    if constexpr (NT == 1) {
                        tile_math<GS, BITS == 4 ? 16 : BITS == 8 ? 272 : 0, BITS>(it, xf, XG, XG2, v0, v1);
                    } else {
                        tile_math_rows(it, xf, XT, v0, v1);
                    }
                    if (t < NT) {  // partials [tile row][token]
                        float* r = rw + ((j + p) * 16 + g) * NT + t;
                        if (ci == 0) r[0] = v0, r[8 * NT] = v1;
                        else r[0] += v0, r[8 * NT] += v1;
                    }
                }
                slot ^= 1;
            }
        }
        // The run's partials of all warps → y (fixed warp order). Double-buffered by parity: one barrier per run.
        const float* rr = red + par * W * KT * 16 * NT;
        __syncthreads();
        for (int e = threadIdx.x; e < KT * 16 * NT; e += blockDim.x) {
            float s = 0.f;
            for (int q = 0; q < W; ++q) s += rr[q * KT * 16 * NT + e];
            const int64_t row = int64_t(run) * KT * 16 + e / NT;
            const int tok = e % NT;
            if (row < a.rows && tok < a.xp.n) {
                float* y = a.y + tok * a.ystride + row;
                *y = a.accum ? *y + s : s;
            }
        }
        par ^= 1;
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
}

size_t smem_bytes(const TileGeometry& g, int P, int NT = 1) {
    const int NG = 128 / g.group_nibbles;
    const size_t item = size_t(g.code_bytes + g.sb_bytes);
    return size_t(g.warps) * kR * P * item + size_t(NT) * size_t(g.nchunks) * (512 + NG * 4) +
           2 * size_t(g.warps) * kT * 16 * 4;
}

template <int GS, class ST, int P, int BITS, int NT = 1>
void launch(const SArgs& a, int W, size_t smem, bool pdl, cudaStream_t stream) {
    auto kernel = gemv_stream_kernel<GS, ST, P, BITS, NT>;
    static const bool attr_set = [&] {
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemMax));
        return true;
    }();
    (void)attr_set;
    constexpr int KT = tiles_per_run(NT);
    const int grid = int(std::min<int64_t>(sm_count(), (a.tiles + KT - 1) / KT));
    launch_ex(kernel, dim3(unsigned(grid)), dim3(unsigned(32 * W)), smem, stream, pdl, 0, a);
}

template <int GS, class ST, int BITS>
void launch_p(int P, const SArgs& a, int W, size_t smem, bool pdl, cudaStream_t stream) {
    if (P == 4) launch<GS, ST, 4, BITS>(a, W, smem, pdl, stream);
    else launch<GS, ST, 2, BITS>(a, W, smem, pdl, stream);
}

// Q6_K, NT tokens per pass.
void launch_q6k(int NT, int P, const SArgs& a, int W, size_t smem, bool pdl, cudaStream_t stream) {
    if (NT == 1) launch_p<16, __half, 6>(P, a, W, smem, pdl, stream);
    else if (NT == 2) P == 4 ? launch<16, __half, 4, 6, 2>(a, W, smem, pdl, stream)
                             : launch<16, __half, 2, 6, 2>(a, W, smem, pdl, stream);
    else P == 4 ? launch<16, __half, 4, 6, 4>(a, W, smem, pdl, stream)
                : launch<16, __half, 2, 6, 4>(a, W, smem, pdl, stream);
}

// Tokens per pass over a Q6_K weight for a launch of `ntok` tokens: 1, else the smallest of 2 / 4 that holds them
// and fits shared memory (4 → 2 → 1 as K grows). EMBER_STREAM_ROWS=0: 1 (one pass per token, as before); read at
// each call (host side, where a graph is captured), so tests can set it.
int q6k_tokens_per_pass(const TileGeometry& geo, int ntok) {
    if (env_off("EMBER_STREAM_ROWS") || ntok < 2 || geo.kind != 6) return 1;
    for (int nt : {2, 4})
        if (nt >= ntok && smem_bytes(geo, 2, nt) <= size_t(kSmemMax)) return nt;
    return smem_bytes(geo, 2, 2) <= size_t(kSmemMax) ? 2 : 1;
}

template <int GS, int BITS>
void launch_st(DType st, int P, const SArgs& a, int W, size_t smem, bool pdl, cudaStream_t stream) {
    if (st == DType::BF16) launch_p<GS, __nv_bfloat16, BITS>(P, a, W, smem, pdl, stream);
    else if (st == DType::F16) launch_p<GS, __half, BITS>(P, a, W, smem, pdl, stream);
    else launch_p<GS, float, BITS>(P, a, W, smem, pdl, stream);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

bool gemv_stream_fits(const Weight& W) {
    const TileGeometry g = tile_geometry(W);
    return W.format == WeightFormat::TILED && g.ok && smem_bytes(g, 2) <= size_t(kSmemMax);
}

int gemv_stream_tokens_per_pass(const Weight& W, int ntok) {
    return gemv_stream_fits(W) ? q6k_tokens_per_pass(tile_geometry(W), std::min(ntok, 4)) : 1;
}

void gemv_stream(const Weight& W, const float* x, int n, float* y, cudaStream_t stream, const LinearFusion* fusion,
                 char* describe, size_t describe_bytes) {
    EMBER_CHECK(gemv_stream_fits(W), "gemv_stream: not a tiled weight it can run");
    const TileGeometry geo = tile_geometry(W);
    const int nw = geo.warps, nch = int(geo.nchunks), gsn = geo.group_nibbles;
    const int P = smem_bytes(geo, 4) <= size_t(kSmemMax) ? 4 : 2;
    const size_t smem = smem_bytes(geo, P);
    static const bool pdl_env = !env_off("EMBER_GEMV_PDL");
    if (describe) {
        const int nt = q6k_tokens_per_pass(geo, std::min(n, 4));
        std::snprintf(describe, describe_bytes, "stream %s g%d W%d P%d smem%zuK%s%s",
                      geo.kind == 6 ? "Q6_K" : W.bits == 4 ? "q4" : "q8", W.group_size, nw, P,
                      (smem + 1023) / 1024, pdl_env ? " pdl" : "", nt == 4 ? " x4" : nt == 2 ? " x2" : "");
    }
    if (x == nullptr || W.rows == 0) return;
    EMBER_CHECK(n >= 1 && y && W.data && W.scales, "gemv_stream: bad arguments");
    EMBER_CHECK(aligned16(W.data) && aligned16(W.scales), "gemv_stream: tiled storage must be 16-byte aligned");
    const LinearFusion f = fusion ? *fusion : LinearFusion{};
    SArgs a{};
    a.codes = static_cast<const uint4*>(W.data), a.sb = static_cast<const uint8_t*>(W.scales);
    a.rows = W.rows, a.ystride = W.rows, a.tiles = int((W.rows + 15) / 16), a.nchunks = nch;
    a.accum = f.accumulate ? 1 : 0;
    a.xp.norm_w = f.norm_w, a.xp.eps = f.eps, a.xp.n = 1, a.xp.K = int(W.cols);
    a.xp.pre = f.norm_w ? PRE_RMSNORM : f.swiglu ? PRE_SWIGLU : PRE_NONE;
    a.xp.xstride = f.swiglu ? 2 * int(W.cols) : int(W.cols);
    a.xp.aligned = aligned16(x) && (!f.norm_w || aligned16(f.norm_w)) && a.xp.xstride % 4 == 0 ? 1 : 0;
    // One launch per token (the weights are read once per token: meant for n = 1, decode); Q6_K: up to 4 tokens per
    // launch (q6k_tokens_per_pass).
    for (int tok = 0; tok < n;) {
        const int nt = q6k_tokens_per_pass(geo, std::min(n - tok, 4));
        const int m = std::min(n - tok, nt);
        const int Pm = nt == 1 ? P : smem_bytes(geo, 4, nt) <= size_t(kSmemMax) ? 4 : 2;
        SArgs b = a;
        b.xp.x = x + int64_t(tok) * a.xp.xstride;
        b.xp.n = m;
        b.y = y + int64_t(tok) * W.rows;
        switch (geo.kind * 1000 + gsn) {
            case 4032: launch_st<32, 4>(W.sb_dtype, P, b, nw, smem, pdl_env, stream); break;
            case 4064: launch_st<64, 4>(W.sb_dtype, P, b, nw, smem, pdl_env, stream); break;
            case 4128: launch_st<128, 4>(W.sb_dtype, P, b, nw, smem, pdl_env, stream); break;
            case 8064: launch_st<64, 8>(W.sb_dtype, P, b, nw, smem, pdl_env, stream); break;
            case 6016: launch_q6k(nt, Pm, b, nw, smem_bytes(geo, Pm, nt), pdl_env, stream); break;
            default: launch_st<128, 8>(W.sb_dtype, P, b, nw, smem, pdl_env, stream); break;
        }
        tok += m;
    }
    CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::cuda::detail
