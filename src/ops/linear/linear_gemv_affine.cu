// ops/linear/linear_gemv_affine.cu: y = x·Wᵀ for MLX affine 4-/8-bit weights and n ≤ 8 tokens, on tensor cores.
//
// Why tensor cores for a GEMV: at ~4.2 TB/s a 4-bit matrix streams ~8.4·10¹² codes/s, and an H200 issues
// ~33·10¹² thread-instructions/s. Dequantising into fp32 FMAs costs ≥ 3 instructions per code and token, which
// would use ~90 % of the issue slots at n = 1 and be 3-8× too slow at n = 4-8. One mma.m16n8k16 multiplies
// 16 rows × 16 codes by all 8 token columns at once, so n = 1..8 cost the same (~1 instruction per code / lane).
//
// Exactness (see linear_cuda.h): a code q enters the MMA as the bf16 value 16 + q, built with one shift and one
// LOP3 per two codes (nibble at mantissa bits 3-6, ORed into 16.0); an 8-bit code is split into nibbles
// l + 16h, the h nibble meeting 16·x. x enters as hi + lo (two bf16, |x − hi − lo| ≤ 2⁻¹⁶|x|). Per (row, group):
//     C = Σ (16 + q)·x'     (8-bit: Σ (16 + l)·x' + (16 + h)·16x' = Σ (272 + q)·x'),   x' = hi + lo
//     y += s·C + (b − 16·s)·X,   X = Σ x'   (272·s for 8-bit)   = s·Σ q·x' + b·Σ x' exactly, up to fp32 rounding.
// The 16 offset keeps |C| ≈ 3·|Σ q x'| (vs 18× with 128 + q), so fp32 rounding is not amplified much.
//
// Work split (persistent, pipelined). A block (16 warps, one per SM) owns 16·R rows (R = 1 or 2 MMA tiles) at
// a time and loops over row blocks; the blocks of a thread-block cluster (ck ≤ 8) split the columns when x would
// not fit or the SMs would not fill. x is staged once per block in shared memory, already split into hi/lo and
// laid out as MMA B fragments (bank-conflict-free LDS.128), with per-group sums X. Codes, scales and biases
// stream through a 3-8 deep cp.async ring (zero-filled outside the matrix) of stages of 16·R rows × 1 KB (whole
// DRAM bursts); warp w takes chunk w (64 bytes of each row) of every stage: LDS its codes (XOR-swizzled rows, no
// bank conflicts), dequant, 8 k-steps × 2 MMAs (x hi, x lo) per tile, apply the group scales. At the end of a
// row block the warps reduce through shared memory and cluster ranks through distributed shared memory, in a
// fixed order (deterministic, no atomics, no workspace).
//
// Status (H200, gemv_bench, q4 g64): ~50 % of copy bandwidth on the LM heads and 25-40 % on 9B/27B projections
// at n = 1, about the same at n = 4, and 1.2-2× torch's tinygemm at n = 8. ncu (9B LM head): issue-bound, 0.55
// warp-instructions issued per scheduler-cycle with 4 warps per scheduler, ~540 instructions per warp per 32 KB
// stage where ~250 would be needed for 90 %. The next steps are in the report: cp.async.bulk (one instruction
// per row instead of 64 LDGSTS), fewer barriers per byte (two stages per barrier or mbarrier full/empty pairs
// per stage), and cheaper scale application (pre-converted s, b − 16s per group staged once).
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>

#include "backend/cuda/cuda_check.h"
#include "core/check.h"
#include "ops/linear/linear_cuda.h"
#include "ops/linear/linear_gemv_mma.cuh"

namespace ember::cuda::detail {
namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = 16, kThreads = 32 * kWarps;
constexpr int kChunk = 64;                 // bytes of one row per chunk (4 lanes × 16 bytes)
constexpr int kLaneBytes = 4 * 32 + 16;    // one lane's B fragments for a chunk: 4 words × 32 B, +16 B pad
constexpr int kTokBytes = 4 * kLaneBytes;  // 576: one token's B fragments for a chunk
constexpr int kRowStage = 1024;            // bytes of each row per stage: whole DRAM bursts
constexpr int kSmemMax = 227 * 1024;       // dynamic shared memory: staged x, then the stage ring
constexpr int kMaxStages = 8;

struct Args {
    const uint8_t* w;  // [rows, row_bytes] packed codes
    const void* scales;
    const void* biases;  // [rows, ngroups]
    const float* x;      // [n, K]
    float* y;            // [n, rows]
    int64_t rows, row_bytes, ngroups;
    int K, n;
    int nchunks;    // ceil(row_bytes / 64)
    int ck;         // cluster size (blocks splitting the chunks)
    int per_rank;   // chunks per cluster rank
    int nclusters;  // clusters in the grid (each loops over row blocks)
    int x_bytes;    // staged x region (multiple of 128)
    int stages;     // ring depth P (3..8)
    int accum;      // y = y + x·Wᵀ (the residual add of a fused decode step)
};

template <class ST> struct SB_;  // scale/bias element: raw load type and conversion to f32
template <> struct SB_<__nv_bfloat16> {
    using raw = unsigned short;
    static __device__ float f(raw u) { return __uint_as_float(uint32_t(u) << 16); }
};
template <> struct SB_<__half> {
    using raw = unsigned short;
    static __device__ float f(raw u) { return __half2float(__ushort_as_half(u)); }
};
template <> struct SB_<float> {
    using raw = float;
    static __device__ float f(raw v) { return v; }
};

// Stage x[0:n][chunks s0 .. s0+cnt) in shared memory: for chunk c, token k, lane t, word i, 32 bytes
// {Q0hi, Q1hi, Q0lo, Q1lo, Q2hi, Q3hi, Q2lo, Q3lo} at (c·n + k)·576 + t·144 + i·32, where Qj holds the x values
// that meet the codes of pair16(word, j); then the group sums X[c][sg][k] (f32) after all B fragments.
// Unit o (0..15) of a chunk = word i of lane t = bytes 4o..4o+3 of the chunk (see the load map in the kernel).
template <int BITS, int NG>
__device__ void stage_x(const Args& a, int s0, int cnt, uint8_t* sm) {
    constexpr int WPS = 4 / NG;                    // words per subgroup per lane
    constexpr int UPS = 16 / NG;                   // units per subgroup
    constexpr int CPU = BITS == 4 ? 8 : 4;         // columns per unit
    constexpr int CPC = 16 * CPU;                  // columns per chunk
    const int n = a.n, total = cnt * n * 16;
    float* xsum = reinterpret_cast<float*>(sm + size_t(cnt) * n * kTokBytes);
    for (int e0 = 0; e0 < total; e0 += kThreads) {  // uniform trip count: every lane reaches the shuffles
        const int e = e0 + int(threadIdx.x);
        const int o = e & 15, rest = e >> 4, k = rest % n, c = rest / n;
        const int64_t col0 = int64_t(s0 + c) * CPC + o * CPU;
        const bool ok = e < total && col0 < a.K;
        float v[8] = {};
        if (ok) {
            const float4* p = reinterpret_cast<const float4*>(a.x + int64_t(k) * a.K + col0);
            const float4 p0 = __ldg(p);
            v[0] = p0.x, v[1] = p0.y, v[2] = p0.z, v[3] = p0.w;
            if constexpr (BITS == 4) {
                const float4 p1 = __ldg(p + 1);
                v[4] = p1.x, v[5] = p1.y, v[6] = p1.z, v[7] = p1.w;
            }
        }
        uint32_t q[8];  // Q0h Q1h Q0l Q1l Q2h Q3h Q2l Q3l
        float sum = 0.f, s1, s2, d1, d2;
        if constexpr (BITS == 4) {  // Qj = {x[j], x[j+4]}
            for (int j = 0; j < 4; ++j) {
                const int slot = (j >> 1) * 4 + (j & 1);
                split2(v[j], v[j + 4], q[slot], q[slot + 2], s1, s2);
                sum += s1 + s2;
            }
        } else {  // Q0 = {x0, x2}, Q1 = 16·Q0, Q2 = {x1, x3}, Q3 = 16·Q2 (high nibbles carry 16·code)
            split2(v[0], v[2], q[0], q[2], s1, s2);
            split2(16.f * v[0], 16.f * v[2], q[1], q[3], d1, d2);
            sum += s1 + s2;
            split2(v[1], v[3], q[4], q[6], s1, s2);
            split2(16.f * v[1], 16.f * v[3], q[5], q[7], d1, d2);
            sum += s1 + s2;
        }
        if (e < total) {
            const int sg = o / UPS, rem = o % UPS, t = rem / WPS, i = sg * WPS + rem % WPS;
            uint4* dst = reinterpret_cast<uint4*>(sm + (size_t(c) * n + k) * kTokBytes + t * kLaneBytes + i * 32);
            dst[0] = make_uint4(q[0], q[1], q[2], q[3]);
            dst[1] = make_uint4(q[4], q[5], q[6], q[7]);
        }
#pragma unroll
        for (int m = 1; m < UPS; m <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);
        if (e < total && o % UPS == 0) xsum[(c * NG + o / UPS) * 8 + k] = sum;
    }
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Row r of a stage keeps its 16-byte units XOR-swizzled by f(r mod 8) ∈ 0..7 (a bijection): the LDS.128 / .64 /
// .32 reads of rows g (and g+8) by lanes (g, t) then hit 8 distinct bank groups per phase.
__device__ __forceinline__ int swz(int r) { return ((r & 1) << 2) | (r & 2) | ((r >> 2) & 1); }

template <int BITS, int GS, class ST, int R>
struct Cfg {
    static constexpr int BM = 16 * R;                 // rows per row block: R MMA tiles
    static constexpr int SB = kRowStage;              // bytes of each row per stage
    static constexpr int SC = SB / kChunk;            // 16 chunks per stage: one per warp (all R tiles)
    static constexpr int GB = GS * BITS / 8;          // bytes per group: 16 .. 128
    static constexpr int GBE = GB < kChunk ? GB : kChunk;  // bytes per subgroup (part of a group in a chunk)
    static constexpr int NG = kChunk / GBE;           // subgroups per chunk: 1, 2, 4
    static constexpr int WPS = 4 / NG;                // words per subgroup per lane
    static constexpr int ES = int(sizeof(typename SB_<ST>::raw));
    static constexpr int SU = ((SB / GB + 1) * ES + 15) / 16 + 1;  // 16-byte units per row covering a stage's groups
    static constexpr int SCOPIES = 2 * BM * SU;       // scale + bias cp.asyncs per stage
    static constexpr int SPT = (SCOPIES + kThreads - 1) / kThreads;  // ... per thread (≤ 3)
    static constexpr int SBYTES = BM * SU * 16;       // per array (scales, biases)
    static constexpr int WBYTES = BM * SB;            // codes per stage
    static constexpr int STAGE = WBYTES + 2 * SBYTES;
    static constexpr int RED = kWarps * BM * 8 * 4;   // [warp][BM rows][8 tokens] f32
    static constexpr int PART = BM * 8 * 4;           // [8 tokens][BM rows] f32
    static constexpr int RING = kSmemMax - RED - PART;  // staged x + stages
    static_assert(WBYTES / 16 == 2 * R * kThreads && SPT <= 3, "copies per thread");
};

__device__ __forceinline__ uint4 lds128(uint32_t a) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
    return v;
}
__device__ __forceinline__ uint2 lds64(uint32_t a) {
    uint2 v;
    asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(a));
    return v;
}
__device__ __forceinline__ uint32_t lds32(uint32_t a) {
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(a));
    return v;
}
__device__ __forceinline__ void cp16(uint32_t dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
// wait until at most P - 2 groups are pending (P is the run-time ring depth, 3..8)
__device__ __forceinline__ void cp_async_wait_ring(int P) {
    switch (P) {
        case 3: cp_async_wait<1>(); break;
        case 4: cp_async_wait<2>(); break;
        case 5: cp_async_wait<3>(); break;
        case 6: cp_async_wait<4>(); break;
        case 7: cp_async_wait<5>(); break;
        default: cp_async_wait<6>(); break;
    }
}

// One thread's share of a stage's cp.asyncs (constants computed once): 2R 16-byte copies of codes (rows
// tid/64 + 8h, unit tid%64, XOR-swizzled) and ≤ 3 16-byte units of scales/biases covering groups [G0, G1) of
// a row. Everything outside the matrix or the stage reads as 0 (zero-fill): a ragged last chunk needs no special
// case (its missing codes meet x = 0, its missing groups s = b = 0), and nothing past an array is read.
template <int BITS, int GS, class ST, int R>
struct Loader {
    using C = Cfg<BITS, GS, ST, R>;
    int wr, wu;        // codes: rows wr + 8h of the row block, 16-byte unit wu
    uint32_t wdst;     // its offset in a stage
    const uint8_t* sb[C::SPT];
    int srow[C::SPT], suu[C::SPT], scount;
    uint32_t sdst[C::SPT];
    // per row block
    const uint8_t* wrow;         // row m0 + wr
    int rows_left;               // rows - m0 (capped)
    int64_t sbase[C::SPT];       // byte of the first scale of row m0 + srow[h]

    __device__ explicit Loader(const Args& a) {
        const int tid = threadIdx.x;
        wr = tid >> 6, wu = tid & 63;
        wdst = wr * C::SB + 16 * (wu ^ swz(wr));
        scount = 0;
#pragma unroll
        for (int h = 0; h < C::SPT; ++h) {
            const int e0 = tid + h * kThreads;
            if (e0 < C::SCOPIES) scount = h + 1;
            const int e = min(e0, C::SCOPIES - 1);
            const int arr = e / (C::BM * C::SU);
            srow[h] = (e / C::SU) % C::BM, suu[h] = e % C::SU;
            sb[h] = static_cast<const uint8_t*>(arr ? a.biases : a.scales);
            sdst[h] = C::WBYTES + arr * C::SBYTES + (srow[h] * C::SU + suu[h]) * 16;
        }
    }
    __device__ __forceinline__ void row_block(const Args& a, int64_t m0) {
        wrow = a.w + (m0 + wr) * a.row_bytes;
        rows_left = int(min(a.rows - m0, int64_t(1) << 30));
#pragma unroll
        for (int h = 0; h < C::SPT; ++h) sbase[h] = (m0 + srow[h]) * a.ngroups * C::ES;
    }
    // columns [c0, c1) of the row block into the stage at shared address st
    __device__ __forceinline__ void issue(const Args& a, uint32_t st, int c0, int c1) const {
        const int end = min(c1 * kChunk, int(a.row_bytes)), off = c0 * kChunk + 16 * wu;
        const bool okc = off < end;
#pragma unroll
        for (int h = 0; h < 2 * R; ++h) {
            const bool ok = okc && wr + 8 * h < rows_left;
            cp16(st + wdst + h * 8 * C::SB, ok ? wrow + (h * 8 * a.row_bytes + off) : a.w, ok ? 16 : 0);
        }
        const int G0 = (c0 * kChunk) / C::GB, G1 = (end + C::GB - 1) / C::GB;
#pragma unroll
        for (int h = 0; h < C::SPT; ++h) {
            if (h >= scount) break;
            const int64_t b0 = sbase[h] + G0 * C::ES, b1 = sbase[h] + G1 * C::ES;
            const int64_t addr = (b0 & ~int64_t(15)) + 16 * suu[h];
            const bool ok = srow[h] < rows_left && G1 > G0 && addr < b1;
            cp16(st + sdst[h], ok ? sb[h] + addr : sb[h], ok ? int(min(int64_t(16), b1 - addr)) : 0);
        }
    }
};

template <int BITS, int GS, class ST, int R>
__global__ void __launch_bounds__(kThreads, 1) gemv_affine_kernel(const Args a) {
    using C = Cfg<BITS, GS, ST, R>;
    constexpr int BM = C::BM, SC = C::SC, NG = C::NG, WPS = C::WPS, GBE = C::GBE, GB = C::GB, ES = C::ES;
    constexpr float KOFF = BITS == 4 ? 16.f : 272.f;  // C = Σ (KOFF + q)·x'
    using raw_t = typename SB_<ST>::raw;

    extern __shared__ __align__(128) uint8_t smem[];
    const int P = a.stages;
    uint8_t* xs = smem;                                                  // staged x (B fragments, group sums)
    const uint32_t xs_u = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
    uint8_t* stages = smem + a.x_bytes;                                  // P × STAGE
    const uint32_t st_u = xs_u + a.x_bytes;
    float* red = reinterpret_cast<float*>(smem + C::RING);               // [kWarps][BM][8]
    float* part = red + kWarps * BM * 8;                                 // [8][BM]
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int n = a.n;
    const int rank = int(blockIdx.x) % a.ck, cluster = int(blockIdx.x) / a.ck;
    const int c_begin = rank * a.per_rank, c_end = min(a.nchunks, c_begin + a.per_rank);
    const int cnt = max(0, c_end - c_begin);
    const int64_t nrb = (a.rows + BM - 1) / BM;
    const int my_rb = cluster < nrb ? int((nrb - 1 - cluster) / a.nclusters + 1) : 0;
    const int spr = (a.per_rank + SC - 1) / SC;  // stages per row block (same for every rank of a cluster)
    const int total = my_rb * spr;
    const int64_t m_step = int64_t(a.nclusters) * BM;
    Loader<BITS, GS, ST, R> loader(a);

    int64_t ld_m0 = int64_t(cluster) * BM;  // next stage to load: row block, stage within it
    int ld_sc = 0;
    loader.row_block(a, ld_m0);
    auto load_next = [&](int slot) {
        const int c0 = c_begin + ld_sc * SC;
        loader.issue(a, st_u + slot * C::STAGE, c0, min(c0 + SC, c_end));
        if (++ld_sc == spr) ld_sc = 0, ld_m0 += m_step, loader.row_block(a, ld_m0);
    };
    for (int s = 0; s < P - 1; ++s) {  // fill the ring, then stage x while it lands
        if (s < total) load_next(s);
        cp_async_commit();
    }
    stage_x<BITS, NG>(a, c_begin, cnt, xs);
    const float* xsum = reinterpret_cast<const float*>(xs + size_t(cnt) * n * kTokBytes);

    // Warp w multiplies chunk w of every stage (64 bytes of rows g, g+8 of each of the R tiles; the B fragments
    // are shared by the tiles). Fixed shared-memory offsets: codes (swizzled; swz(r) depends on r mod 8 only),
    // B fragments of token min(g, n-1) (MMA columns ≥ n then hold finite values that are never stored).
    uint32_t offA[NG];
#pragma unroll
    for (int sg = 0; sg < NG; ++sg) {
        const int u = NG == 1 ? 4 * warp + t : NG == 2 ? 4 * warp + 2 * sg + (t >> 1) : 4 * warp + sg;
        const int in = NG == 1 ? 0 : NG == 2 ? 8 * (t & 1) : 4 * t;
        offA[sg] = g * C::SB + 16 * (u ^ swz(g)) + in;
    }
    const uint32_t offB = xs_u + (warp * n + min(g, n - 1)) * kTokBytes + t * kLaneBytes;
    const uint32_t stage_x_step = uint32_t(SC * n * kTokBytes);
    const bool z0ok = 2 * t < n, z1ok = 2 * t + 1 < n;
    float acc[R][4] = {};
    int64_t m0 = int64_t(cluster) * BM;  // stage being multiplied
    int sc = 0, slot = 0;
    int64_t srow0 = (m0 + g) * a.ngroups * ES;  // byte of row g's first scale
    const int row8 = 8 * int(a.ngroups) * ES;   // + 8 rows
    for (int it = 0; it < total; ++it) {
        cp_async_wait_ring(P);
        __syncthreads();  // stage `it` visible to all; stage it-1's buffer free
        if (it + P - 1 < total) load_next(slot == 0 ? P - 1 : slot - 1);
        cp_async_commit();

        const int c0 = c_begin + sc * SC, gc = c0 + warp;
        const uint32_t st = st_u + slot * C::STAGE;
        if (gc < c_end) {  // warp-uniform
            const int lc = sc * SC + warp;
            const uint32_t xb = offB + sc * stage_x_step;
            const int G0 = (c0 * kChunk) / GB;
            const uint8_t* sbase = stages + slot * C::STAGE + C::WBYTES + g * C::SU * 16;
            float cacc[R][NG][4];  // one accumulator chain (x hi and lo) per tile and subgroup
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int sg = 0; sg < NG; ++sg)
#pragma unroll
                    for (int j = 0; j < 4; ++j) cacc[r][sg][j] = 0.f;
            uint32_t wv[R][2][4];  // word i of rows 16r + g (+8) (see the load map in stage_x's comment)
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const uint32_t rb = st + (16 * r + 8 * h) * C::SB;
                    if constexpr (NG == 1) {
                        const uint4 q = lds128(rb + offA[0]);
                        wv[r][h][0] = q.x, wv[r][h][1] = q.y, wv[r][h][2] = q.z, wv[r][h][3] = q.w;
                    } else if constexpr (NG == 2) {
#pragma unroll
                        for (int sg = 0; sg < 2; ++sg) {
                            const uint2 q = lds64(rb + offA[sg]);
                            wv[r][h][2 * sg] = q.x, wv[r][h][2 * sg + 1] = q.y;
                        }
                    } else {
#pragma unroll
                        for (int sg = 0; sg < 4; ++sg) wv[r][h][sg] = lds32(rb + offA[sg]);
                    }
                }
#pragma unroll
            for (int i = 0; i < 4; ++i) {
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    const uint4 bq = lds128(xb + i * 32 + hh * 16);
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        const uint32_t a0 = pair16(wv[r][0][i], 2 * hh), a1 = pair16(wv[r][1][i], 2 * hh);
                        const uint32_t a2 = pair16(wv[r][0][i], 2 * hh + 1), a3 = pair16(wv[r][1][i], 2 * hh + 1);
                        mma(cacc[r][i / WPS], a0, a1, a2, a3, bq.x, bq.y);  // x hi
                        mma(cacc[r][i / WPS], a0, a1, a2, a3, bq.z, bq.w);  // x lo
                    }
                }
            }
#pragma unroll
            for (int sg = 0; sg < NG; ++sg) {
                const float2 z = *reinterpret_cast<const float2*>(xsum + (lc * NG + sg) * 8 + 2 * t);
                const float z0 = z0ok ? z.x : 0.f, z1 = z1ok ? z.y : 0.f;
                const int goff = ((gc * kChunk + sg * GBE) / GB - G0) * ES;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    // scale/bias slots of rows 16r + g (+8) start at byte (row·ngroups + G0)·ES rounded down to 16
                    const uint32_t bA = uint32_t(srow0) + uint32_t(G0 * ES) + uint32_t(2 * r * row8), bB = bA + row8;
                    const uint8_t* pA = sbase + 16 * r * C::SU * 16 + (bA & 15) + goff;
                    const uint8_t* pB = sbase + (16 * r + 8) * C::SU * 16 + (bB & 15) + goff;
                    const float sa = SB_<ST>::f(*reinterpret_cast<const raw_t*>(pA));
                    const float sb = SB_<ST>::f(*reinterpret_cast<const raw_t*>(pB));
                    const float ba = fmaf(-KOFF, sa, SB_<ST>::f(*reinterpret_cast<const raw_t*>(pA + C::SBYTES)));
                    const float bb = fmaf(-KOFF, sb, SB_<ST>::f(*reinterpret_cast<const raw_t*>(pB + C::SBYTES)));
                    acc[r][0] += fmaf(sa, cacc[r][sg][0], ba * z0);
                    acc[r][1] += fmaf(sa, cacc[r][sg][1], ba * z1);
                    acc[r][2] += fmaf(sb, cacc[r][sg][2], bb * z0);
                    acc[r][3] += fmaf(sb, cacc[r][sg][3], bb * z1);
                }
            }
        }

        if (sc == spr - 1) {  // end of a row block: reduce over warps, then over the cluster's ranks
#pragma unroll
            for (int r = 0; r < R; ++r) {
                *reinterpret_cast<float2*>(red + (warp * BM + 16 * r + g) * 8 + 2 * t) = make_float2(acc[r][0], acc[r][1]);
                *reinterpret_cast<float2*>(red + (warp * BM + 16 * r + g + 8) * 8 + 2 * t) = make_float2(acc[r][2], acc[r][3]);
                acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = 0.f;
            }
            __syncthreads();
            if (threadIdx.x < BM * 8) {
                const int e = threadIdx.x, k = e / BM, rl = e % BM;
                float s = 0.f;
#pragma unroll
                for (int w = 0; w < kWarps; ++w) s += red[(w * BM + rl) * 8 + k];
                if (a.ck == 1) {
                    if (k < n && m0 + rl < a.rows) {
                        float* yp = a.y + k * a.rows + m0 + rl;
                        *yp = a.accum ? *yp + s : s;
                    }
                } else {
                    part[e] = s;
                }
            }
            if (a.ck > 1) {
                cg::cluster_group cl = cg::this_cluster();
                cl.sync();
                for (int e = rank * kThreads + threadIdx.x; e < BM * 8; e += a.ck * kThreads) {
                    const int k = e / BM, rl = e % BM;
                    if (k >= n || m0 + rl >= a.rows) continue;
                    float s = 0.f;
                    for (int q = 0; q < a.ck; ++q) s += cl.map_shared_rank(part, q)[e];
                    float* yp = a.y + k * a.rows + m0 + rl;
                    *yp = a.accum ? *yp + s : s;
                }
                cl.sync();  // every rank has read every part: they may be overwritten
            }
            sc = 0, m0 += m_step, srow0 = (m0 + g) * a.ngroups * ES;
        } else {
            ++sc;
        }
        slot = slot == P - 1 ? 0 : slot + 1;
    }
    cp_async_wait<0>();
}

// Ring depth for a staged-x region of x_bytes (0 when fewer than 3 stages fit).
template <int BITS, int GS, class ST, int R>
int ring_stages(int64_t x_bytes) {
    using C = Cfg<BITS, GS, ST, R>;
    const int64_t p = (C::RING - x_bytes) / C::STAGE;
    return p < 3 ? 0 : int(std::min<int64_t>(p, kMaxStages));
}

// Launches (unless `dry`) the persistent grid: as many clusters as are resident at once (one block per SM),
// each looping over row blocks. Writes the kernel and its launch shape to `describe`.
template <int BITS, int GS, class ST, int R>
void launch(Args a, int64_t max_clusters, cudaStream_t stream, bool dry, char* describe, size_t describe_bytes) {
    using C = Cfg<BITS, GS, ST, R>;
    auto kernel = gemv_affine_kernel<BITS, GS, ST, R>;
    static const bool attr_set = [&] {  // once per instance (single-device process)
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemMax));
        return true;
    }();
    (void)attr_set;
    a.stages = ring_stages<BITS, GS, ST, R>(a.x_bytes);
    EMBER_CHECK(a.stages >= 3, "gemv_affine_mma: staged x of %d bytes leaves no room for the ring", a.x_bytes);
    cudaLaunchConfig_t cfg = {};
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = kSmemMax;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = unsigned(a.ck);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    // Resident clusters, per cluster size, once per instance: blocks/SM × SMs for ck = 1; for ck > 1 the
    // occupancy API, checked against ~128 of 132 SMs being usable by clusters (GPCs of 16-18 SMs).
    static int resident[9] = {};
    if (!resident[a.ck]) {
        int per_sm = 0, q = 0;
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, kSmemMax));
        const int blocks = std::max(1, per_sm) * sm_count();
        int r = blocks;
        if (a.ck > 1) {
            cfg.gridDim = dim3(unsigned(a.ck));
            if (cudaOccupancyMaxActiveClusters(&q, kernel, &cfg) != cudaSuccess) q = 0, (void)cudaGetLastError();
            const int est = std::max(1, blocks / 8 * 8 / a.ck);
            r = q >= est / 2 && q <= blocks / a.ck ? q : est;
        }
        resident[a.ck] = r;
    }
    const int64_t nrb = (a.rows + C::BM - 1) / C::BM;
    a.nclusters = int(std::min<int64_t>({nrb, resident[a.ck], max_clusters > 0 ? max_clusters : nrb}));
    if (describe)
        std::snprintf(describe, describe_bytes, "mma q%d g%d R%d ck%d P%d grid%d", BITS, GS, R, a.ck, a.stages,
                      a.nclusters * a.ck);
    if (dry) return;
    cfg.gridDim = dim3(unsigned(a.nclusters * a.ck));
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, a));
}

template <int BITS, int GS, class ST>
void launch_r(int R, const Args& a, int64_t mc, cudaStream_t stream, bool dry, char* d, size_t db) {
    if (R == 2) launch<BITS, GS, ST, 2>(a, mc, stream, dry, d, db);
    else launch<BITS, GS, ST, 1>(a, mc, stream, dry, d, db);
}

template <int BITS, int GS>
void launch_st(DType st, int R, const Args& a, int64_t mc, cudaStream_t stream, bool dry, char* d, size_t db) {
    if (st == DType::BF16) launch_r<BITS, GS, __nv_bfloat16>(R, a, mc, stream, dry, d, db);
    else if (st == DType::F16) launch_r<BITS, GS, __half>(R, a, mc, stream, dry, d, db);
    else launch_r<BITS, GS, float>(R, a, mc, stream, dry, d, db);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

bool gemv_affine_mma(const Weight& W, const float* x, int n, float* y, cudaStream_t stream, const GemvTuning& tune,
                     char* describe, size_t describe_bytes, bool accumulate) {
    const bool dry = x == nullptr;  // describe only
    if (W.format != WeightFormat::AFFINE || (W.bits != 4 && W.bits != 8) || !aligned16(W.data) || !aligned16(x))
        return false;
    if (W.group_size != 32 && W.group_size != 64 && W.group_size != 128) return false;
    if (W.sb_dtype != DType::BF16 && W.sb_dtype != DType::F16 && W.sb_dtype != DType::F32) return false;
    if (W.cols * W.bits / 8 >= (int64_t(1) << 30)) return false;  // (32-bit column arithmetic)
    EMBER_CHECK(n >= 1 && n <= 8 && W.cols % W.group_size == 0, "gemv_affine_mma: n=%d cols=%lld", n, (long long)W.cols);
    Args a{};
    a.w = static_cast<const uint8_t*>(W.data), a.scales = W.scales, a.biases = W.biases, a.x = x, a.y = y;
    a.rows = W.rows, a.row_bytes = W.cols * W.bits / 8, a.ngroups = W.cols / W.group_size;
    a.K = int(W.cols), a.n = n;
    a.accum = accumulate ? 1 : 0;
    a.nchunks = int((a.row_bytes + kChunk - 1) / kChunk);
    const int gbe = std::min(W.group_size * W.bits / 8, kChunk), ng = kChunk / gbe;
    const int64_t per_chunk = int64_t(n) * kTokBytes + ng * 8 * 4;  // staged x per chunk
    // Rows per block 16·R: R = 2 (two tiles share each B fragment: fewer shared-memory reads and barriers per
    // byte) unless that leaves SMs idle. Cluster size ck: enough ranks for x to fit next to a ≥ 3-deep ring
    // (about 150 KB), then whatever fills the SMs most evenly with row-block × rank units (persistent blocks,
    // one per SM; ~128 of 132 SMs usable by clusters of 2..8), weighed by how full the stages of 16 chunks are.
    const int sms = sm_count();
    const int gb = W.group_size * W.bits / 8, es = int(dtype_size(W.sb_dtype));
    auto x_max = [&](int r) {  // staged x that leaves room for a 3-deep ring (same formulas as Cfg)
        const int64_t su = ((kRowStage / gb + 1) * es + 15) / 16 + 1;
        const int64_t stage = 16 * r * kRowStage + 2 * 16 * r * su * 16;
        return kSmemMax - kWarps * 16 * r * 8 * 4 - 16 * r * 8 * 4 - 3 * stage;
    };
    int R = 2, ck = 1;
    double best = -1;
    for (int r : {2, 1})
        for (int c = 1; c <= 8; ++c) {
            const int per = (a.nchunks + c - 1) / c;
            if (per * per_chunk > x_max(r)) continue;
            if (c > 1 && per < 16) break;  // keep ≥ 1 KB of every row per rank (whole DRAM bursts)
            const int64_t units = (a.rows + 16 * r - 1) / (16 * r) * c;
            const int64_t slots = c == 1 ? sms : (sms / 8) * 8;
            const double fill = double(per) / double((per + 15) / 16 * 16);
            const double eff = fill * double(units) / double((units + slots - 1) / slots * slots);
            if (eff > best + 0.05) best = eff, R = r, ck = c;
        }
    if (best < 0) {  // nothing fits with ≥ 1 KB per rank: smallest split that fits
        R = 1, ck = 8;
        for (int c = 1; c <= 8; ++c)
            if ((a.nchunks + c - 1) / c * per_chunk <= x_max(1)) {
                ck = c;
                break;
            }
    }
    if (tune.cluster) ck = tune.cluster;
    if (tune.rows_per_block) R = tune.rows_per_block / 16;
    EMBER_CHECK(ck >= 1 && ck <= 8 && (R == 1 || R == 2), "gemv_affine_mma: ck=%d R=%d", ck, R);
    a.ck = ck;
    a.per_rank = (a.nchunks + ck - 1) / ck;
    a.x_bytes = int((a.per_rank * per_chunk + 127) / 128 * 128);
    if (a.x_bytes > x_max(R)) return false;  // (rows of > ~2·10⁴ 4-bit codes × 8 tokens: generic kernel)
    if (a.rows == 0) return true;
    const int64_t mc = tune.max_clusters;
    switch (W.bits * 1000 + W.group_size) {
        case 4032: launch_st<4, 32>(W.sb_dtype, R, a, mc, stream, dry, describe, describe_bytes); break;
        case 4064: launch_st<4, 64>(W.sb_dtype, R, a, mc, stream, dry, describe, describe_bytes); break;
        case 4128: launch_st<4, 128>(W.sb_dtype, R, a, mc, stream, dry, describe, describe_bytes); break;
        case 8032: launch_st<8, 32>(W.sb_dtype, R, a, mc, stream, dry, describe, describe_bytes); break;
        case 8064: launch_st<8, 64>(W.sb_dtype, R, a, mc, stream, dry, describe, describe_bytes); break;
        default: launch_st<8, 128>(W.sb_dtype, R, a, mc, stream, dry, describe, describe_bytes); break;
    }
    return true;
}

}  // namespace ember::cuda::detail
