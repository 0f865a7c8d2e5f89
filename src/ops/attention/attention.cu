// CUDA gated attention core (spec: attention_cuda.h): q/k norm + RoPE + cache append, split-K attention over
// the cache with the sigmoid gate fused into the output, and the split combine for decode.
#include "ops/attention/attention_cuda.h"
#include "ops/attention/attention_prefill.h"
#include "ops/attention/kv_cache.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "backend/cuda/warp_reduce.cuh"
#include "core/check.h"
#include "ops/rope/rope.h"

namespace ember::cuda {

namespace {

constexpr int kThreads = 256;      // attention block: 8 warps
constexpr int kTile = 32;          // keys per tile (one per lane in the softmax step)
constexpr int kRMax = 8;           // query heads per block (one warp each in the softmax step)
constexpr int kMinChunk = 64;      // fewest keys per split
constexpr int kMaxSplits = 1024;
constexpr int kTargetBlocks = 528;  // ≈ 4 blocks per SM on an H200 (132 SMs)
constexpr int kMaxHalfRot = 128;
constexpr float kLog2e = 1.4426950408889634f;

struct RopeFreq {
    float inv_freq[kMaxHalfRot];  // rope_inv_freq(), computed on the host exactly as the CPU op does
    float factor[kMaxHalfRot];    // frequency factors (angle / factor) when has_factor
    int interleaved;              // pairs (2j, 2j+1) instead of NeoX (j, j + half)
    int has_factor;
};


// Block-wide sum / max for a block of NT threads (NT a multiple of 32); every thread gets the result.
template <int NT, bool kMax>
__device__ float block_reduce(float v) {
    __shared__ float s[NT / 32 + 1];
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    v = kMax ? warp_max(v) : warp_sum(v);
    if (l == 0) s[w] = v;
    __syncthreads();
    if (w == 0) {
        float x = l < NT / 32 ? s[l] : (kMax ? -INFINITY : 0.f);
        x = kMax ? warp_max(x) : warp_sum(x);
        if (l == 0) s[NT / 32] = x;
    }
    __syncthreads();
    return s[NT / 32];
}

// Keys per split for live length T: every live split but the last gets `chunk` keys (a multiple of the tile).
__device__ __forceinline__ int64_t split_chunk(int64_t T, int n_splits) {
    if (n_splits <= 1) return T;
    int64_t c = (T + n_splits - 1) / n_splits;
    c = (c + kTile - 1) / kTile * kTile;
    return c < kMinChunk ? kMinChunk : c;
}

__device__ __forceinline__ bool position_ok(int32_t pos0, int64_t pos, int64_t cap) { return pos0 >= 0 && pos < cap; }

// Where token t of a call lives. One sequence (rows == nullptr): position *pos0_dev + t, caches at their base
// (paged: the sequence's page list `pages`). Batched decode (rows != nullptr): token t belongs to the sequence in
// slot rows[2t] at position rows[2t + 1], whose caches start slot · slot_elems elements into the pools (paged: its
// pages are row `slot` of the page table `pages`, page_stride entries apart). A slot outside [0, n_slots) or a
// negative position reads as position −1 (NaN output, nothing written).
struct RowMap {
    const int32_t* rows = nullptr;
    int64_t slot_elems = 0;
    int32_t n_slots = 0;
    const int32_t* pages = nullptr;
    int32_t page_stride = 0;
};
struct RowAt {
    int32_t lo;            // position_ok's first argument: pos0 (one sequence) or the row's own position
    int64_t pos;           // the token's position
    int64_t base;          // element offset of the row's caches in contiguous pools
    const int32_t* pages;  // paged pools: the row's page list (else nullptr)
};
__device__ __forceinline__ RowAt row_at(const RowMap& rm, const int32_t* pos0_dev, int t) {
    if (!rm.rows) {
        const int32_t p0 = *pos0_dev;
        return {p0, int64_t(p0) + t, 0, rm.pages};
    }
    const int32_t slot = rm.rows[2 * t], p = rm.rows[2 * t + 1];
    const bool ok = slot >= 0 && slot < rm.n_slots;
    return {ok ? p : -1, ok ? int64_t(p) : -1, ok && !rm.pages ? int64_t(slot) * rm.slot_elems : 0,
            rm.pages && ok ? rm.pages + int64_t(slot) * rm.page_stride : nullptr};
}
// Element offset of cache row p of kv head g: contiguous [G][cap][D] at the row's base, or paged
// [page][G][kKvPage][D] (attention_cuda.h). Rows p .. p + 31 with p a multiple of 32 share a page.
__device__ __forceinline__ int64_t kv_row(const RowAt& ra, int g, int64_t p, int G, int64_t cap, int D) {
    if (!ra.pages) return ra.base + (int64_t(g) * cap + p) * D;
    return kv_page_elem(ra.pages[p / kKvPage], g, p, G, D);
}

// sigmoid(kNoGate) = 1 exactly (expf(−inf) = 0): the ungated layers reuse the gated epilogue unchanged.
constexpr float kNoGate = __builtin_huge_valf();
__device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

// ---- 1. prologue --------------------------------------------------------------------------------------------
// grid (n_heads + n_kv, n), block max(D, 32): blockIdx.x < H is query head h, else kv head g = blockIdx.x − H.
// Thread c < D owns element c of the head vector (head dim 16: threads 16..31 only join the reduction).
template <int D>
constexpr int prologue_threads() { return D < 32 ? 32 : D; }
constexpr int pow2_floor(int v) { return v >= 32 ? 32 : v >= 16 ? 16 : v >= 8 ? 8 : v >= 4 ? 4 : v >= 2 ? 2 : 1; }
template <int D, typename KvT>
__global__ void __launch_bounds__(prologue_threads<D>())
    qk_prologue(const float* __restrict__ qg,      // [n, H, 2, D] (gated) or [n, H, D]
                const float* __restrict__ k,       // [n, G, D]
                const float* __restrict__ v,       // [n, G, D]
                const float* __restrict__ q_norm,  // [D]
                const float* __restrict__ k_norm,  // [D]
                KvT* __restrict__ Kc, KvT* __restrict__ Vc,  // [G, cap, D]
                float* __restrict__ q_out,         // [n, H, D]
                const int32_t* __restrict__ pos0_dev, const RowMap rm, int H, int G, int64_t cap, int half,
                int q_stride, const __grid_constant__ RopeFreq rf, float eps) {
    pdl_trigger();  // attn_split may be scheduled as our blocks retire
    pdl_wait();
    __shared__ float row[D];
    const int t = blockIdx.y, hh = blockIdx.x, c = threadIdx.x;
    const RowAt ra = row_at(rm, pos0_dev, t);
    const int32_t pos0 = ra.lo;
    const int64_t pos = ra.pos;
    const bool is_q = hh < H;
    const int g = hh - H;
    const float* src = is_q ? qg + (int64_t(t) * H + hh) * q_stride : k + (int64_t(t) * G + g) * D;
    const bool live = c < D;
    const float x = live ? src[c] : 0.f;
    const float* nw = is_q ? q_norm : k_norm;
    const float ss = block_reduce<prologue_threads<D>(), false>(x * x);
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);  // as the CPU rmsnorm
    if (live) row[c] = nw ? x * inv * nw[c] : x;
    __syncthreads();
    if (!live) return;
    float y = row[c];
    if (c < 2 * half) {  // product and difference unfused, as the CPU op
        // NeoX pairs (j, j + half) or interleaved pairs (2j, 2j + 1); `first` = c holds the pair's a element.
        const bool il = rf.interleaved != 0;
        const int j = il ? c >> 1 : (c < half ? c : c - half);
        const bool first = il ? (c & 1) == 0 : c < half;
        const float a = il ? row[2 * j] : row[j], b = il ? row[2 * j + 1] : row[j + half];
        float phi = __fmul_rn(static_cast<float>(pos), rf.inv_freq[j]);
        if (rf.has_factor) phi = __fdiv_rn(phi, rf.factor[j]);
        float sn, cs;
        sincosf(phi, &sn, &cs);
        y = first ? __fsub_rn(__fmul_rn(a, cs), __fmul_rn(b, sn)) : __fadd_rn(__fmul_rn(b, cs), __fmul_rn(a, sn));
    }
    if (is_q) {
        q_out[(int64_t(t) * H + hh) * D + c] = y;
    } else if (position_ok(pos0, pos, cap)) {
        const int64_t dst = kv_row(ra, g, pos, G, cap, D) + c;
        kv_store(Kc + dst, y);
        kv_store(Vc + dst, v[(int64_t(t) * G + g) * D + c]);
    }
}

// ---- 2. attention over one key split ------------------------------------------------------------------------
// grid (n_splits, G · n_sub, n), block 256. Block (split, g, sub, token) handles query heads
// h = g·R + sub·8 + r, r < nr ≤ 8, keys [t0, t1) of the token's causal range [0, T).
// Per tile of 32 keys: (a) scores: 8 lanes per key row, 4 keys per warp, 16-byte loads; (b) online softmax:
// warp r for head r, lane = key; (c) P·V: thread (kq, c4) owns float4 column c4 and keys kq, kq + KQ, ...;
// its partial sums over the key subsets are added in shared memory once, at the end of the split.
// A bf16 cache moves half the bytes per load: the tile's V rows are loaded (raw) together with its K rows, so both
// round trips overlap instead of following each other (the kernel is latency-bound: one tile in flight per block).
template <int D, typename KvT>
__global__ void __launch_bounds__(kThreads, 2)
    attn_split(const float* __restrict__ q_ws,    // [n, H, D] normed + roped
               const KvT* __restrict__ Kc,        // [G, cap, D]
               const KvT* __restrict__ Vc,        // [G, cap, D]
               const float* __restrict__ qg,      // [n, H, 2, D] (gate half), or nullptr: no output gate
               const int32_t* __restrict__ pos0_dev, const RowMap rm, int H, int G, int n_sub, int64_t cap,
               int n_splits, float q_scale,                     // d^-0.5 · log2(e): scores in base 2
               float* __restrict__ part_acc,      // [n_splits, H, D]   decode only
               float* __restrict__ part_ml,       // [n_splits, H, 2]   (running max, Σ) decode only
               float* __restrict__ out) {         // [n, H, D]
    pdl_trigger();  // the next GEMV (output projection when there is no combine) may prefetch its weights
    pdl_wait();
    constexpr int kC4 = D / 4;            // float4 per row
    constexpr int kV4 = D < 32 ? 1 : D / 32;  // float4 per lane per key row in (a): 8 lanes cover a row (D = 16:
                                              // lanes sg ≥ 4 hold nothing)
    constexpr int kKQ = pow2_floor(kThreads / kC4 < kTile ? kThreads / kC4 : kTile);  // key subsets in (c): 4 (D =
                                                                                       // 256), 8 (D = 96) .. 32
    constexpr int kKPT = kTile / kKQ;     // keys per thread per tile in (c)
    static_assert(kKQ >= 2 && kTile % kKQ == 0 && D % 16 == 0, "head_dim");
    __shared__ __align__(16) float q_s[kRMax][D];
    __shared__ __align__(16) float p_s[kRMax][kTile];
    __shared__ __align__(16) float4 red_s[kKQ - 1][kC4];
    __shared__ float alpha_s[kRMax];
    __shared__ float ml_s[kRMax][2];

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int split = blockIdx.x, g = blockIdx.y / n_sub, sub = blockIdx.y % n_sub, tok = blockIdx.z;
    const int R = H / G, r0 = sub * kRMax, nr = R - r0 < kRMax ? R - r0 : kRMax;
    const int h0 = g * R + r0;  // first query head of this block
    const RowAt ra = row_at(rm, pos0_dev, tok);
    const int32_t pos0 = ra.lo;
    const int64_t pos = ra.pos;
    // Each token's split partials (only batched decode has more than one token with more than one split).
    part_acc += int64_t(tok) * n_splits * H * D;
    part_ml += int64_t(tok) * n_splits * H * 2;
    if (!position_ok(pos0, pos, cap)) {  // the caller broke pos0 + n ≤ capacity: NaN, no reads
        if (split == 0)
            for (int i = tid; i < nr * D; i += kThreads) out[(int64_t(tok) * H + h0) * D + i] = __int_as_float(0x7fc00000);
        return;
    }
    const int64_t T = pos + 1;
    const int64_t chunk = split_chunk(T, n_splits);
    const int64_t t0 = int64_t(split) * chunk;
    if (t0 >= T) return;  // past the live length
    const int64_t t1 = t0 + chunk < T ? t0 + chunk : T;
    const bool direct = (T + chunk - 1) / chunk == 1;  // one live split: finish here

    for (int i = tid; i < nr * D; i += kThreads)
        q_s[i / D][i % D] = q_ws[(int64_t(tok) * H + h0) * D + i] * q_scale;
    __syncthreads();

    const int kk = lane >> 3, sg = lane & 7;  // (a): 4 keys per warp, 8 lanes per key
    const int kt = warp * 4 + kk;             // (a): key index within the tile
    const int c4 = tid % kC4, kq = tid / kC4;  // (c)
    float4 acc[kRMax];
#pragma unroll
    for (int r = 0; r < kRMax; ++r) acc[r] = make_float4(0.f, 0.f, 0.f, 0.f);
    float m_run = -INFINITY, l_run = 0.f;  // softmax state of head `warp` (warps < nr)

    constexpr bool kPreV = !std::is_same_v<KvT, float>;
    for (int64_t ts = t0; ts < t1; ts += kTile) {
        // The tile's rows [ts, ts + 32) are consecutive in the cache (ts is a multiple of 32; a page holds 64).
        const int64_t rb = kv_row(ra, g, ts, G, cap, D);
        const KvT* Kg = Kc + rb;
        const KvT* Vg = Vc + rb;
        uint2 vraw[kPreV ? kKPT : 1];  // bf16: this thread's V of the tile for (c), loaded before (a)
        if constexpr (kPreV) {
#pragma unroll
            for (int i = 0; i < kKPT; ++i) {
                const int64_t key = ts + kq + i * kKQ;
                vraw[i] = kq < kKQ && key < t1 ? kv_raw4(Vg, (key - ts) * kC4 + c4) : make_uint2(0u, 0u);
            }
        }
        // (a) lane (kk, sg) reads float4 sg + 8j of key row kt: 8 lanes read 128 contiguous bytes.
        {
            const int64_t key = ts + kt;
            const bool kvalid = key < t1;
            const KvT* kr = Kg + int64_t(kt) * D;
            float4 kv[kV4];
#pragma unroll
            for (int j = 0; j < kV4; ++j)
                kv[j] = kvalid && sg + 8 * j < kC4 ? kv_load4(kr, sg + 8 * j) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
            for (int r = 0; r < kRMax; ++r) {
                if (r < nr) {
                    const float4* qr = reinterpret_cast<const float4*>(q_s[r]);
                    float dot = 0.f;
#pragma unroll
                    for (int j = 0; j < kV4; ++j) {
                        const float4 q4 = sg + 8 * j < kC4 ? qr[sg + 8 * j] : make_float4(0.f, 0.f, 0.f, 0.f);
                        dot = fmaf(q4.x, kv[j].x, dot);
                        dot = fmaf(q4.y, kv[j].y, dot);
                        dot = fmaf(q4.z, kv[j].z, dot);
                        dot = fmaf(q4.w, kv[j].w, dot);
                    }
                    dot += __shfl_xor_sync(0xffffffffu, dot, 4);
                    dot += __shfl_xor_sync(0xffffffffu, dot, 2);
                    dot += __shfl_xor_sync(0xffffffffu, dot, 1);
                    if (sg == 0) p_s[r][kt] = kvalid ? dot : -INFINITY;
                }
            }
        }
        __syncthreads();
        // (b) The tile always holds a valid key, so the new max is finite; exp2(−inf) = 0 covers masked keys and
        // the first tile (m_run = −inf).
        if (warp < nr) {
            const float s = p_s[warp][lane];
            const float m_new = fmaxf(m_run, warp_max(s));
            const float p = exp2f(s - m_new);
            const float alpha = exp2f(m_run - m_new);
            l_run = l_run * alpha + warp_sum(p);
            m_run = m_new;
            p_s[warp][lane] = p;
            if (lane == 0) alpha_s[warp] = alpha;
        }
        __syncthreads();
        // (c) acc[r] ← α_r·acc[r] + Σ_j p[r][j]·V[ts + j][4·c4 .. 4·c4 + 3] over this thread's keys j
        // (threads kq ≥ kKQ — D = 16 — have no keys).
        if (kq < kKQ) {
            float4 vv[kKPT];
#pragma unroll
            for (int i = 0; i < kKPT; ++i) {
                const int64_t key = ts + kq + i * kKQ;
                if constexpr (kPreV) vv[i] = kv_widen4(vraw[i]);
                else vv[i] = key < t1 ? kv_load4(Vg, (key - ts) * kC4 + c4) : make_float4(0.f, 0.f, 0.f, 0.f);
            }
#pragma unroll
            for (int r = 0; r < kRMax; ++r) {
                if (r < nr) {
                    const float a = alpha_s[r];
                    float4 o = make_float4(acc[r].x * a, acc[r].y * a, acc[r].z * a, acc[r].w * a);
#pragma unroll
                    for (int i = 0; i < kKPT; ++i) {
                        const float p = p_s[r][kq + i * kKQ];
                        o.x = fmaf(p, vv[i].x, o.x);
                        o.y = fmaf(p, vv[i].y, o.y);
                        o.z = fmaf(p, vv[i].z, o.z);
                        o.w = fmaf(p, vv[i].w, o.w);
                    }
                    acc[r] = o;
                }
            }
        }
        __syncthreads();  // p_s / alpha_s are rewritten by the next tile
    }

    if (warp < nr && lane == 0) {
        ml_s[warp][0] = m_run;
        ml_s[warp][1] = l_run;
    }
#pragma unroll
    for (int r = 0; r < kRMax; ++r) {
        if (r >= nr) break;  // nr is uniform over the block: the barriers below are reached by all threads
        if (kq > 0 && kq < kKQ) red_s[kq - 1][c4] = acc[r];
        __syncthreads();
        if (kq == 0) {
            float4 o = acc[r];
#pragma unroll
            for (int q = 0; q < kKQ - 1; ++q) {
                const float4 x = red_s[q][c4];
                o.x += x.x;
                o.y += x.y;
                o.z += x.z;
                o.w += x.w;
            }
            const int h = h0 + r;
            if (direct) {
                const float4 gt = qg ? reinterpret_cast<const float4*>(qg + (int64_t(tok) * H + h) * 2 * D + D)[c4]
                                     : make_float4(kNoGate, kNoGate, kNoGate, kNoGate);
                const float l = ml_s[r][1];
                reinterpret_cast<float4*>(out + (int64_t(tok) * H + h) * D)[c4] =
                    make_float4(o.x / l * sigmoidf_(gt.x), o.y / l * sigmoidf_(gt.y), o.z / l * sigmoidf_(gt.z),
                                o.w / l * sigmoidf_(gt.w));
            } else {
                reinterpret_cast<float4*>(part_acc + (int64_t(split) * H + h) * D)[c4] = o;
                if (c4 == 0) {
                    part_ml[(int64_t(split) * H + h) * 2 + 0] = ml_s[r][0];
                    part_ml[(int64_t(split) * H + h) * 2 + 1] = ml_s[r][1];
                }
            }
        }
        __syncthreads();  // red_s is reused by the next head
    }
}

// ---- 3. combine the splits of a decode step -----------------------------------------------------------------
// grid (H, D / C), block 256, C = min(D, 64): block (h, cb) merges columns [C·cb, C·cb + C) of head h. Thread
// (grp, c4) sums float4 column c4 over the live splits s ≡ grp (mod 256 / (C / 4)), eight loads in flight; the
// partial sums are added in shared memory in a fixed order. Every block recomputes the split weights (≤ 1024 exp2).
constexpr int kCombineThreads = 256;
constexpr int kCombineCols = 64;
constexpr int combine_cols(int D) { return D < kCombineCols ? D : D % kCombineCols == 0 ? kCombineCols : 32; }
template <int D>
__global__ void __launch_bounds__(kCombineThreads)
    attn_combine(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                 const float* __restrict__ qg, const int32_t* __restrict__ pos0_dev, const RowMap rm, int H,
                 int64_t cap, int n_splits, float* __restrict__ out) {
    pdl_trigger();  // the output projection's GEMV may prefetch its weights
    pdl_wait();
    constexpr int kC4 = combine_cols(D) / 4, kGroups = kCombineThreads / kC4, kU = 8;
    __shared__ float w_s[kMaxSplits];
    __shared__ __align__(16) float4 red_s[kGroups][kC4];
    const int h = blockIdx.x, tid = threadIdx.x, c4 = tid % kC4, grp = tid / kC4;
    const int col4 = blockIdx.y * kC4 + c4;  // float4 column within the head
    const int tok = blockIdx.z;                // batched decode: one token per row, else 0
    const RowAt ra = row_at(rm, pos0_dev, tok);
    if (!position_ok(ra.lo, ra.pos, cap)) return;  // attn_split wrote NaN
    const int64_t T = ra.pos + 1;
    part_acc += int64_t(tok) * n_splits * H * D;
    part_ml += int64_t(tok) * n_splits * H * 2;
    if (qg) qg += int64_t(tok) * H * 2 * D;
    out += int64_t(tok) * H * D;
    const int64_t chunk = split_chunk(T, n_splits);
    const int n_live = static_cast<int>((T + chunk - 1) / chunk);
    if (n_live <= 1) return;  // attn_split wrote the output

    float m = -INFINITY;
    for (int s = tid; s < n_live; s += kCombineThreads) m = fmaxf(m, part_ml[(int64_t(s) * H + h) * 2]);
    const float M = block_reduce<kCombineThreads, true>(m);
    float l = 0.f;
    for (int s = tid; s < n_live; s += kCombineThreads) {
        const float w = exp2f(part_ml[(int64_t(s) * H + h) * 2] - M);
        w_s[s] = w;
        l = fmaf(part_ml[(int64_t(s) * H + h) * 2 + 1], w, l);
    }
    const float L = block_reduce<kCombineThreads, false>(l);  // its barriers also publish w_s
    const float4* a = reinterpret_cast<const float4*>(part_acc + int64_t(h) * D) + col4;
    const int64_t step = int64_t(H) * (D / 4);  // float4 stride between consecutive splits
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = grp; s0 < n_live; s0 += kU * kGroups) {
        float4 x[kU];
#pragma unroll
        for (int u = 0; u < kU; ++u) {
            const int s = s0 + u * kGroups;
            x[u] = s < n_live ? a[int64_t(s) * step] : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int u = 0; u < kU; ++u) {
            const int s = s0 + u * kGroups;
            const float w = s < n_live ? w_s[s] : 0.f;
            o.x = fmaf(x[u].x, w, o.x);
            o.y = fmaf(x[u].y, w, o.y);
            o.z = fmaf(x[u].z, w, o.z);
            o.w = fmaf(x[u].w, w, o.w);
        }
    }
    red_s[grp][c4] = o;
    __syncthreads();
    if (grp == 0) {
#pragma unroll
        for (int g2 = 1; g2 < kGroups; ++g2) {
            const float4 x = red_s[g2][c4];
            o.x += x.x;
            o.y += x.y;
            o.z += x.z;
            o.w += x.w;
        }
        const float4 gt = qg ? reinterpret_cast<const float4*>(qg + int64_t(h) * 2 * D + D)[col4]
                             : make_float4(kNoGate, kNoGate, kNoGate, kNoGate);
        reinterpret_cast<float4*>(out + int64_t(h) * D)[col4] =
            make_float4(o.x / L * sigmoidf_(gt.x), o.y / L * sigmoidf_(gt.y), o.z / L * sigmoidf_(gt.z),
                        o.w / L * sigmoidf_(gt.w));
    }
}

struct Layout {
    size_t q_off, acc_off, ml_off, prefill_off, total;
};

size_t align256(size_t x) { return (x + 255) / 256 * 256; }

// q [n, H, D], then for n == 1 the decode partials, for n > 1 the prefill workspace (attention_prefill.h);
// batched decode (rows): the partials of every row, [n, splits, H, D] and [n, splits, H, 2].
Layout layout(const GatedAttentionDims& d, int64_t n_tokens, bool rows = false) {
    const int64_t splits = rows ? n_tokens * gated_attention_rows_splits(d, n_tokens) : gated_attention_decode_splits(d);
    Layout L;
    L.q_off = 0;
    L.acc_off = align256(size_t(n_tokens * d.n_heads * d.head_dim) * sizeof(float));
    L.prefill_off = L.acc_off;
    if (n_tokens > 1 && !rows) {
        L.ml_off = L.acc_off;
        L.total = L.prefill_off + align256(detail::prefill_workspace_bytes(d, n_tokens));
    } else {
        L.ml_off = L.acc_off + align256(size_t(splits * d.n_heads * d.head_dim) * sizeof(float));
        L.total = L.ml_off + align256(size_t(splits * d.n_heads * 2) * sizeof(float));
    }
    return L;
}

// per_token: the n > 1 path of attn_split with one split per token (CUDA cores) instead of attention_prefill.
template <int D, typename KvT>
void launch(const GatedAttentionDims& d, const float* qg, const float* k, const float* v, const float* q_norm,
            const float* k_norm, KvT* Kc, KvT* Vc, const int32_t* pos0_dev, const RowMap& rm, int64_t n,
            float* out, char* ws, const Layout& L, cudaStream_t st, bool per_token) {
    const int H = static_cast<int>(d.n_heads), G = static_cast<int>(d.n_kv);
    RopeFreq rf{};
    rope_inv_freq(d.rot_dim, d.rope_theta, rf.inv_freq);
    rf.interleaved = d.rope_interleaved ? 1 : 0;
    rf.has_factor = d.freq_factors ? 1 : 0;
    for (int64_t j = 0; d.freq_factors && j < d.rot_dim / 2; ++j) rf.factor[j] = d.freq_factors[j];
    const float* gate = d.gated ? qg : nullptr;
    float* q_ws = reinterpret_cast<float*>(ws + L.q_off);
    float* part_acc = reinterpret_cast<float*>(ws + L.acc_off);
    float* part_ml = reinterpret_cast<float*>(ws + L.ml_off);

    launch_pdl(qk_prologue<D, KvT>, dim3(unsigned(H + G), unsigned(n)), dim3(prologue_threads<D>()), 0, st, 0, qg, k, v,
               q_norm, k_norm, Kc, Vc, q_ws, pos0_dev, rm, H, G, d.capacity, int(d.rot_dim / 2),
               int(d.gated ? 2 * D : D), rf, d.eps);

    if (n > 1 && !per_token && !rm.rows) {
        detail::attention_prefill(d, q_ws, gate, Kc, Vc, pos0_dev, n, out, ws + L.prefill_off, st, detail::PREFILL_ALL,
                                  0, rm.pages);
        return;
    }
    const int R = H / G, n_sub = (R + kRMax - 1) / kRMax;
    const int n_splits = rm.rows ? static_cast<int>(gated_attention_rows_splits(d, n))
                         : n == 1 ? static_cast<int>(gated_attention_decode_splits(d))
                                  : 1;
    const float q_scale = (d.score_mul / std::sqrt(static_cast<float>(D))) * kLog2e;
    launch_pdl(attn_split<D, KvT>, dim3(unsigned(n_splits), unsigned(G * n_sub), unsigned(n)), dim3(kThreads), 0, st, 0,
               q_ws, Kc, Vc, gate, pos0_dev, rm, H, G, n_sub, d.capacity, n_splits, q_scale, part_acc, part_ml, out);
    if (n_splits > 1)
        launch_pdl(attn_combine<D>, dim3(unsigned(H), unsigned(D / combine_cols(D)), unsigned(rm.rows ? n : 1)),
                   dim3(kCombineThreads), 0, st, 0, part_acc, part_ml, gate, pos0_dev, rm, H, d.capacity, n_splits, out);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

int64_t gated_attention_rows_splits(const GatedAttentionDims& d, int64_t n_rows) {
    const int64_t s = gated_attention_decode_splits(d);
    return n_rows <= 1 ? s : std::max<int64_t>(1, (s + n_rows - 1) / n_rows);
}

int64_t gated_attention_decode_splits(const GatedAttentionDims& d) {
    EMBER_CHECK(d.n_kv > 0 && d.n_heads % d.n_kv == 0 && d.capacity > 0, "bad attention dims");
    const int64_t n_sub = (d.n_heads / d.n_kv + kRMax - 1) / kRMax;
    const int64_t by_len = (d.capacity + kMinChunk - 1) / kMinChunk;
    int64_t by_blocks = kTargetBlocks / (d.n_kv * n_sub);
    if (by_blocks < 1) by_blocks = 1;
    int64_t s = by_len < by_blocks ? by_len : by_blocks;
    return s > kMaxSplits ? kMaxSplits : s;
}

size_t gated_attention_workspace_bytes(const GatedAttentionDims& d, int64_t max_tokens) {
    // The prefill split partials (splits(n) · n rows) are not monotone in n: the largest over every n ≤ max.
    size_t most = layout(d, 1).total;
    for (int64_t n = 2; n <= max_tokens; ++n) most = std::max(most, layout(d, n).total);
    return most;
}

bool gated_attention_head_dim_supported(int64_t D) {
    return D == 16 || D == 32 || D == 64 || D == 96 || D == 128 || D == 256;
}

Status check_kv_capacity(int64_t pos0, int64_t n, int64_t capacity) {
    if (pos0 < 0 || n < 0 || pos0 + n > capacity || pos0 + n > INT32_MAX)
        return errorf("KV cache overflow: positions %lld..%lld do not fit a cache of %lld rows", (long long)pos0,
                      (long long)(pos0 + n - 1), (long long)capacity);
    return Status::ok();
}

namespace {

void core(const GatedAttentionDims& d, const float* qg, const float* k, const float* v, const float* q_norm,
          const float* k_norm, void* K_cache, void* V_cache, const int32_t* pos0_dev, int64_t n, float* out,
          void* workspace, size_t workspace_bytes, cudaStream_t stream, bool per_token, const RowMap& rm = {}) {
    EMBER_CHECK(d.n_kv > 0 && d.n_heads > 0 && d.n_heads % d.n_kv == 0, "n_heads %lld, n_kv %lld",
                (long long)d.n_heads, (long long)d.n_kv);
    EMBER_CHECK(gated_attention_head_dim_supported(d.head_dim), "head_dim %lld (16, 32, 64, 96, 128 or 256)",
                (long long)d.head_dim);
    EMBER_CHECK(d.rot_dim > 0 && d.rot_dim % 2 == 0 && d.rot_dim <= d.head_dim && d.rot_dim / 2 <= kMaxHalfRot,
                "rot_dim %lld", (long long)d.rot_dim);
    EMBER_CHECK(d.capacity > 0 && d.capacity <= INT32_MAX, "capacity %lld", (long long)d.capacity);
    EMBER_CHECK(n >= 0 && n <= 65535, "n = %lld tokens (at most 65535 per call)", (long long)n);
    EMBER_CHECK(aligned16(K_cache) && aligned16(V_cache) && aligned16(workspace) && aligned16(qg) && aligned16(out),
                "attention: K/V cache, workspace, qg and out must be 16-byte aligned");
    if (n == 0) return;
    const Layout L = layout(d, n, rm.rows != nullptr);
    EMBER_CHECK(workspace_bytes >= L.total, "attention workspace %zu bytes < %zu", workspace_bytes, L.total);
    char* ws = static_cast<char*>(workspace);
    switch (d.head_dim) {
#define EMBER_ATTN_CASE(DIM)                                                                                    \
    case DIM:                                                                                                  \
        if (d.kv_bf16)                                                                                          \
            launch<DIM>(d, qg, k, v, q_norm, k_norm, static_cast<__nv_bfloat16*>(K_cache),                      \
                        static_cast<__nv_bfloat16*>(V_cache), pos0_dev, rm, n, out, ws, L, stream, per_token);  \
        else                                                                                                   \
            launch<DIM>(d, qg, k, v, q_norm, k_norm, static_cast<float*>(K_cache), static_cast<float*>(V_cache), \
                        pos0_dev, rm, n, out, ws, L, stream, per_token);                                        \
        break;
        EMBER_ATTN_CASE(16)
        EMBER_ATTN_CASE(32)
        EMBER_ATTN_CASE(64)
        EMBER_ATTN_CASE(96)
        EMBER_ATTN_CASE(128)
        EMBER_ATTN_CASE(256)
#undef EMBER_ATTN_CASE
    }
}

}  // namespace

void gated_attention_core(const GatedAttentionDims& d, const float* qg, const float* k, const float* v,
                          const float* q_norm, const float* k_norm, void* K_cache, void* V_cache,
                          const int32_t* pos0_dev, int64_t n, float* out, void* workspace, size_t workspace_bytes,
                          cudaStream_t stream, const int32_t* pages) {
    RowMap rm;
    rm.pages = pages;
    core(d, qg, k, v, q_norm, k_norm, K_cache, V_cache, pos0_dev, n, out, workspace, workspace_bytes, stream, false, rm);
}

size_t gated_attention_rows_workspace_bytes(const GatedAttentionDims& d, int64_t max_rows) {
    size_t most = 0;
    for (int64_t n = 1; n <= max_rows; ++n) most = std::max(most, layout(d, n, true).total);
    return most;
}

void gated_attention_decode_rows(const GatedAttentionDims& d, const float* qg, const float* k, const float* v,
                                 const float* q_norm, const float* k_norm, void* K_pool, void* V_pool,
                                 int64_t n_slots, const int32_t* rows_dev, int64_t n, float* out, void* workspace,
                                 size_t workspace_bytes, cudaStream_t stream, const int32_t* page_table,
                                 int64_t page_stride) {
    EMBER_CHECK(n_slots > 0 && n_slots <= INT32_MAX && rows_dev, "attention rows: %lld slots", (long long)n_slots);
    EMBER_CHECK(!page_table || (page_stride > 0 && page_stride <= INT32_MAX), "attention rows: page stride %lld",
                (long long)page_stride);
    RowMap rm;
    rm.rows = rows_dev;
    rm.slot_elems = d.n_kv * d.capacity * d.head_dim;
    rm.n_slots = static_cast<int32_t>(n_slots);
    rm.pages = page_table;
    rm.page_stride = static_cast<int32_t>(page_stride);
    core(d, qg, k, v, q_norm, k_norm, K_pool, V_pool, nullptr, n, out, workspace, workspace_bytes, stream, false, rm);
}

namespace detail {
void gated_attention_core_per_token(const GatedAttentionDims& d, const float* qg, const float* k, const float* v,
                                    const float* q_norm, const float* k_norm, void* K_cache, void* V_cache,
                                    const int32_t* pos0_dev, int64_t n, float* out, void* workspace,
                                    size_t workspace_bytes, cudaStream_t stream) {
    core(d, qg, k, v, q_norm, k_norm, K_cache, V_cache, pos0_dev, n, out, workspace, workspace_bytes, stream, true);
}
const float* prefill_q(const GatedAttentionDims& d, int64_t n, const void* workspace) {
    return reinterpret_cast<const float*>(static_cast<const char*>(workspace) + layout(d, n).q_off);
}
void* prefill_workspace(const GatedAttentionDims& d, int64_t n, void* workspace) {
    return static_cast<char*>(workspace) + layout(d, n).prefill_off;
}
}  // namespace detail

}  // namespace ember::cuda
