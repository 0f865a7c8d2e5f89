// ops/attention/attention_prefill.cu: prefill attention (n > 1) on tensor cores, flash-attention style — the
// cache conversion to bf16 hi + lo, the flash kernel, the split combine (design and numerics:
// attention_prefill.h; the op: attention_cuda.h).
#include "ops/attention/attention_prefill.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "core/check.h"
#include "ops/attention/kv_cache.cuh"
#include "ops/linear/linear_gemv_mma.cuh"  // mma (m16n8k16 bf16 → f32), split2 (fp32 → bf16 hi + lo)

namespace ember::cuda::detail {

namespace {

// W warps per block (4 or 8), 16 (token, head) rows each: kRows = 16·W rows share every K/V tile.
constexpr int kMinChunk = 128;   // fewest keys per split (a multiple of 64)
constexpr int kMaxSplits = 16;
constexpr int kSMs = 132;        // H200; only steers the split count
constexpr int kConvertThreads = 256, kConvertBlocks = 4 * kSMs;
constexpr int kCombineThreads = 256;

template <int D>
constexpr int key_tile() { return D == 256 ? 16 : 64; }
// Shared-memory row stride in bf16: 2D + 16 bytes, an odd number of 16-byte units, so the 8 rows of every
// ldmatrix 8×8 piece land in distinct banks.
template <int D>
constexpr int lds() { return D + 8; }
template <int D, int P, int W>
constexpr size_t smem_bytes() { return size_t(2) * lds<D>() * P * (16 * W + 2 * key_tile<D>()); }
template <int D, int P, int W>
constexpr int blocks_per_sm() {
    const int b = int((227 * 1024) / (smem_bytes<D, P, W>() + 1024));
    const int by_regs = 8 / W;  // 64K registers at the ~200-255 per thread the kernels use: 256 threads per SM
    return b < 1 ? 1 : b > by_regs ? by_regs : b;
}

struct KeyRange {
    int64_t begin, end;
    int n_live;
};
// Keys [begin, end) of split s of a query tile whose last (valid) token sees the keys [0, T).
__host__ __device__ inline KeyRange split_range(int64_t T, int splits, int s) {
    int64_t chunk = T;
    if (splits > 1) {
        chunk = (T + splits - 1) / splits;
        chunk = (chunk + 63) / 64 * 64;
        if (chunk < kMinChunk) chunk = kMinChunk;
    }
    KeyRange r;
    r.n_live = static_cast<int>((T + chunk - 1) / chunk);
    r.begin = int64_t(s) * chunk;
    r.end = r.begin + chunk < T ? r.begin + chunk : T;
    return r;
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], uint32_t a) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
// 16 bytes global → shared; zero-filled (nothing read) when !ok.
__device__ __forceinline__ void cp_async16(uint32_t s, const void* g, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(g), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

__device__ __forceinline__ float sigmoid_(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ bool position_ok(int32_t pos0, int64_t t, int64_t cap) {
    return pos0 >= 0 && int64_t(pos0) + t < cap;
}
constexpr float kNaN = __builtin_nanf("");

// ---- 1. cache rows → bf16 hi (+ lo) ---------------------------------------------------------------------------
// grid (kConvertBlocks, 2G): y = tensor (K, V) · G + kv head; a grid-stride loop over rows [0, pos0 + n) · D/4.
// A bf16 cache (KvT = __nv_bfloat16) splits exactly: lo = 0 (and with P = 1 the cache is read in place, no copy).
template <int D, int P, typename KvT>
__global__ void __launch_bounds__(kConvertThreads)
    kv_to_bf16(const KvT* __restrict__ Kc, const KvT* __restrict__ Vc,  // [G, cap, D]
               uint32_t* __restrict__ kv16,                                 // [2][G][cap][P][D] bf16 (pairs)
               const int32_t* __restrict__ pos0_dev, int n, int G, int64_t cap,
               const int32_t* __restrict__ pages) {  // paged caches (attention_cuda.h kKvPage), or nullptr
    pdl_trigger();
    pdl_wait();
    constexpr int kC4 = D / 4;
    const int32_t pos0 = *pos0_dev;
    if (pos0 < 0) return;
    const int64_t rows = int64_t(pos0) + n < cap ? int64_t(pos0) + n : cap;
    const int which = blockIdx.y / G, g = blockIdx.y % G;
    const KvT* src = which ? Vc : Kc;
    uint32_t* dst = kv16 + (int64_t(which) * G + g) * cap * P * (D / 2);
    for (int64_t i = int64_t(blockIdx.x) * kConvertThreads + threadIdx.x; i < rows * kC4;
         i += int64_t(gridDim.x) * kConvertThreads) {
        const int64_t row = i / kC4;
        const int c4 = static_cast<int>(i % kC4);
        const int64_t at = pages ? kv_page_elem(pages[row / kKvPage], g, row, G, D) : (int64_t(g) * cap + row) * D;
        const float4 x = kv_load4(src + at, c4);
        uint32_t h0, l0, h1, l1;
        float sa, sb;
        split2(x.x, x.y, h0, l0, sa, sb);
        split2(x.z, x.w, h1, l1, sa, sb);
        uint32_t* d = dst + row * P * (D / 2) + 2 * c4;
        *reinterpret_cast<uint2*>(d) = make_uint2(h0, h1);
        if (P == 2) *reinterpret_cast<uint2*>(d + D / 2) = make_uint2(l0, l1);
    }
}

// ---- 2. flash attention over one key split ---------------------------------------------------------------------
// grid (splits, G · n_sub, n_tiles), block 128, dynamic smem: Q [P][64][LD], K [P][BN][LD], V [P][BN][LD] bf16.
// mma fragments (PTX ISA, g = lane / 4, t = lane % 4): S / O accumulators c0, c1 = row g, cols 2t, 2t + 1;
// c2, c3 = row g + 8. Two adjacent key n8 tiles of S are one A fragment (k16 over keys) of P·V.
template <int D, int P, int W>
__global__ void __launch_bounds__(32 * W)
    attn_prefill_flash(const float* __restrict__ q_ws,    // [n, H, D] normed + roped
                       const float* __restrict__ gate,    // qg [n, H, 2, D] (gate half) or nullptr
                       const uint16_t* __restrict__ K16,  // [G][cap][P][D] bf16
                       const uint16_t* __restrict__ V16,  // [G][cap][P][D] bf16
                       const int32_t* __restrict__ pos0_dev, int n, int H, int G, int n_sub, int RB, int TB,
                       int64_t cap, int splits, float q_scale,  // q_scale = score_mul · d^-½ · log2(e)
                       float* __restrict__ part_acc,            // [splits, n, H, D]
                       float* __restrict__ part_ml,             // [splits, n, H, 2] (max, Σ) base 2
                       float* __restrict__ out) {               // [n, H, D]
    pdl_trigger();
    pdl_wait();
    constexpr int kThreads = 32 * W, kRows = 16 * W;
    constexpr int BN = key_tile<D>(), LD = lds<D>(), NT = BN / 8, DT = D / 8, KS = BN / 16;
    constexpr uint32_t kRowB = LD * 2;  // bytes per smem row
    constexpr int kUnroll = D == 256 ? 4 : D / 16;  // d = 256: a partly unrolled Q·Kᵀ keeps O (128 registers) unspilled
    extern __shared__ __align__(16) uint16_t smem[];
    uint16_t* Qs = smem;                   // [P][kRows][LD]
    uint16_t* Ks = Qs + P * kRows * LD;    // [P][BN][LD]
    uint16_t* Vs = Ks + P * BN * LD;       // [P][BN][LD]

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gq = lane >> 2, t4 = lane & 3;
    const int split = blockIdx.x, g = blockIdx.y / n_sub, sub = blockIdx.y % n_sub;
    const int tile = gridDim.z - 1 - blockIdx.z;  // the longest causal ranges first
    const int R = H / G, r0 = sub * RB, nr = R - r0 < RB ? R - r0 : RB, h0 = g * R + r0;
    const int t0 = tile * TB, t_end = t0 + TB < n ? t0 + TB : n;
    const int32_t pos0 = *pos0_dev;
    // Block row m ↔ token t0 + m / RB, head h0 + m % RB; -1: padding.
    auto row_token = [&](int m) { const int tl = m / RB; return tl < TB && m % RB < nr && t0 + tl < n ? t0 + tl : -1; };

    if (split == 0 && (pos0 < 0 || int64_t(pos0) + t_end > cap)) {  // tokens past the capacity: NaN, no reads
        for (int i = tid; i < kRows * D; i += kThreads) {
            const int m = i / D, t = row_token(m);
            if (t >= 0 && !position_ok(pos0, t, cap)) out[(int64_t(t) * H + h0 + m % RB) * D + i % D] = kNaN;
        }
    }
    if (!position_ok(pos0, t0, cap)) return;
    const int64_t T = int64_t(pos0) + t_end < cap ? int64_t(pos0) + t_end : cap;  // keys of the tile: [0, T)
    const KeyRange kr = split_range(T, splits, split);
    if (kr.begin >= T) return;  // past the live length
    const bool direct = kr.n_live == 1;

    // Q rows · q_scale → bf16 hi (+ lo): D/8 float4 per thread, loaded in batches of up to 8 before converting.
    constexpr int kQIt = kRows * (D / 4) / kThreads, kQB = kQIt <= 8 ? kQIt : kQIt % 8 == 0 ? 8 : kQIt % 6 == 0 ? 6 : 4;
    static_assert(kQIt % kQB == 0, "q batches");
    for (int b = 0; b < kQIt; b += kQB) {
        float4 x[kQB];
#pragma unroll
        for (int u = 0; u < kQB; ++u) {
            const int i = tid + (b + u) * kThreads, m = i / (D / 4), c4 = i % (D / 4), t = row_token(m);
            x[u] = t >= 0 ? reinterpret_cast<const float4*>(q_ws + (int64_t(t) * H + h0 + m % RB) * D)[c4]
                          : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int u = 0; u < kQB; ++u) {
            const int i = tid + (b + u) * kThreads, m = i / (D / 4), c4 = i % (D / 4);
            uint32_t h0w, l0w, h1w, l1w;
            float sa, sb;
            split2(x[u].x * q_scale, x[u].y * q_scale, h0w, l0w, sa, sb);
            split2(x[u].z * q_scale, x[u].w * q_scale, h1w, l1w, sa, sb);
            *reinterpret_cast<uint2*>(Qs + m * LD + 4 * c4) = make_uint2(h0w, h1w);
            if (P == 2) *reinterpret_cast<uint2*>(Qs + (kRows + m) * LD + 4 * c4) = make_uint2(l0w, l1w);
        }
    }

    // K or V tile of BN keys from k0 (keys ≥ kr.end zero-filled). A key row is P·D/8 chunks of 16 bytes (hi then
    // lo); thread tid copies chunk tid % kCPR of rows tid / kCPR + j·kRPP: one base address per thread.
    constexpr int kCPR = P * D / 8, kRPP = kThreads / kCPR, kPasses = (BN + kRPP - 1) / kRPP;
    static_assert(kRPP >= 1, "key row wider than the block");
    const int cr = tid % kCPR, r_own = tid / kCPR;
    const bool copier = r_own < kRPP;
    const uint32_t s_own = (cr / (D / 8) * BN + r_own) * kRowB + (cr % (D / 8)) * 16;  // byte offset in a tile
    const uint16_t* Kg = K16 + int64_t(g) * cap * P * D + 8 * cr;
    const uint16_t* Vg = V16 + int64_t(g) * cap * P * D + 8 * cr;
    auto load_tile = [&](uint16_t* dst, const uint16_t* src, int64_t k0) {
        const uint32_t s0 = smem_u32(dst) + s_own;
#pragma unroll
        for (int j = 0; j < kPasses; ++j) {
            const int row = r_own + j * kRPP;
            const int64_t key = k0 + row;
            if (copier && row < BN)
                cp_async16(s0 + j * kRPP * kRowB, src + (key < kr.end ? key : kr.begin) * (P * D), key < kr.end);
        }
    };

    // This thread's two rows (g, g + 8 of the warp's 16) and their last visible key (−1: padding / no keys).
    const int mA = 16 * warp + gq;
    int lim[2];
    for (int r = 0; r < 2; ++r) {
        const int t = row_token(mA + 8 * r);
        lim[r] = t >= 0 && position_ok(pos0, t, cap) ? pos0 + t : -1;
    }
    const int warp_lim_max = __reduce_max_sync(0xffffffffu, lim[0] > lim[1] ? lim[0] : lim[1]);
    const int warp_lim_min = __reduce_min_sync(0xffffffffu, lim[0] < lim[1] ? lim[0] : lim[1]);

    // ldmatrix lane addresses: A (Q) rows 16w + lane%16, cols 8·(lane/16); B of Q·Kᵀ (K, not transposed) rows
    // 8·(lane/16) + lane%8, cols 8·((lane/8)%2); B of P·V (V, transposed) rows 8·((lane/8)%2) + lane%8, cols
    // 8·(lane/16). Part p (hi, lo) of a tile sits p · rows · kRowB further.
    const uint32_t q_a = smem_u32(Qs + (16 * warp + (lane & 15)) * LD + (lane >> 4) * 8);
    const uint32_t k_a = smem_u32(Ks + ((lane >> 4) * 8 + (lane & 7)) * LD + ((lane >> 3) & 1) * 8);
    const uint32_t v_a = smem_u32(Vs + (((lane >> 3) & 1) * 8 + (lane & 7)) * LD + (lane >> 4) * 8);
    constexpr uint32_t kQlo = kRows * kRowB, kKVlo = BN * kRowB;

    float o[DT][4];
#pragma unroll
    for (int j = 0; j < DT; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};

    load_tile(Ks, Kg, kr.begin);
    cp_async_commit();
    load_tile(Vs, Vg, kr.begin);
    cp_async_commit();
    for (int64_t k0 = kr.begin; k0 < kr.end; k0 += BN) {
        const bool more = k0 + BN < kr.end;
        const bool active = k0 <= warp_lim_max;  // warp-uniform: some row of the warp sees a key of this tile
        cp_async_wait<1>();                      // this K tile (V may still be in flight)
        __syncthreads();
        // Independent accumulator chains per key n8 tile: s (hi·hi), sx (lo·hi), sy (hi·lo); in bf16 mode s and sx
        // take the even and odd k steps. Summed in fp32 at the end.
        float s[NT][4], sx[NT][4], sy[NT][4];
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[j][e] = sx[j][e] = sy[j][e] = 0.f;
        if (active) {
#pragma unroll(kUnroll)
            for (int kk = 0; kk < D / 16; ++kk) {
                uint32_t ah[4], al[4];
                ldsm_x4(ah, q_a + kk * 32);
                if (P == 2) ldsm_x4(al, q_a + kQlo + kk * 32);
#pragma unroll
                for (int nj = 0; nj < KS; ++nj) {
                    uint32_t bh[4], bl[4];
                    const uint32_t ka = k_a + nj * 16 * kRowB + kk * 32;
                    ldsm_x4(bh, ka);
                    if (P == 2) {
                        ldsm_x4(bl, ka + kKVlo);
                        mma(s[2 * nj], ah[0], ah[1], ah[2], ah[3], bh[0], bh[1]);
                        mma(s[2 * nj + 1], ah[0], ah[1], ah[2], ah[3], bh[2], bh[3]);
                        mma(sx[2 * nj], al[0], al[1], al[2], al[3], bh[0], bh[1]);
                        mma(sx[2 * nj + 1], al[0], al[1], al[2], al[3], bh[2], bh[3]);
                        mma(sy[2 * nj], ah[0], ah[1], ah[2], ah[3], bl[0], bl[1]);
                        mma(sy[2 * nj + 1], ah[0], ah[1], ah[2], ah[3], bl[2], bl[3]);
                    } else {
                        float(&acc)[NT][4] = kk % 2 ? sx : s;
                        mma(acc[2 * nj], ah[0], ah[1], ah[2], ah[3], bh[0], bh[1]);
                        mma(acc[2 * nj + 1], ah[0], ah[1], ah[2], ah[3], bh[2], bh[3]);
                    }
                }
            }
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[j][e] += sx[j][e] + sy[j][e];
        }
        __syncthreads();  // every warp is done with the K tile
        if (more) load_tile(Ks, Kg, k0 + BN);
        cp_async_commit();

        uint32_t ph[KS][4], pl[KS][4];
        if (active) {
            // Mask (keys past the row's position or the split) and the online softmax; exp2(−inf) = 0 covers the
            // masked keys, and rows without any key so far keep m = −inf with 0 as the reference.
            const bool edge = k0 + BN > int64_t(warp_lim_min) + 1 || k0 + BN > kr.end;
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int64_t key = k0 + 8 * j + 2 * t4 + (e & 1);
                    if (edge && !(key <= lim[e >> 1] && key < kr.end)) s[j][e] = -INFINITY;
                    mx[e >> 1] = fmaxf(mx[e >> 1], s[j][e]);
                }
            float mu[2], alpha[2], rs[2] = {0.f, 0.f};
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
                const float m_new = fmaxf(m_run[r], mx[r]);
                mu[r] = m_new == -INFINITY ? 0.f : m_new;
                alpha[r] = exp2f(m_run[r] - mu[r]);
                m_run[r] = m_new;
            }
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    s[j][e] = exp2f(s[j][e] - mu[e >> 1]);
                    rs[e >> 1] += s[j][e];
                }
#pragma unroll
            for (int r = 0; r < 2; ++r) l_run[r] = l_run[r] * alpha[r] + rs[r];
            if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
                for (int j = 0; j < DT; ++j) {
                    o[j][0] *= alpha[0];
                    o[j][1] *= alpha[0];
                    o[j][2] *= alpha[1];
                    o[j][3] *= alpha[1];
                }
            }
            float sa, sb;
#pragma unroll
            for (int kk = 0; kk < KS; ++kk) {
                split2(s[2 * kk][0], s[2 * kk][1], ph[kk][0], pl[kk][0], sa, sb);
                split2(s[2 * kk][2], s[2 * kk][3], ph[kk][1], pl[kk][1], sa, sb);
                split2(s[2 * kk + 1][0], s[2 * kk + 1][1], ph[kk][2], pl[kk][2], sa, sb);
                split2(s[2 * kk + 1][2], s[2 * kk + 1][3], ph[kk][3], pl[kk][3], sa, sb);
            }
        }
        cp_async_wait<1>();  // this V tile (the next K may still be in flight)
        __syncthreads();
        if (active) {
#pragma unroll
            for (int kk = 0; kk < KS; ++kk)
#pragma unroll
                for (int dj = 0; dj < D / 16; ++dj) {
                    uint32_t vh[4], vl[4];
                    const uint32_t va = v_a + kk * 16 * kRowB + dj * 32;
                    ldsm_x4_t(vh, va);
                    if (P == 2) {
                        ldsm_x4_t(vl, va + kKVlo);
                        mma(o[2 * dj], pl[kk][0], pl[kk][1], pl[kk][2], pl[kk][3], vh[0], vh[1]);
                        mma(o[2 * dj], ph[kk][0], ph[kk][1], ph[kk][2], ph[kk][3], vl[0], vl[1]);
                        mma(o[2 * dj + 1], pl[kk][0], pl[kk][1], pl[kk][2], pl[kk][3], vh[2], vh[3]);
                        mma(o[2 * dj + 1], ph[kk][0], ph[kk][1], ph[kk][2], ph[kk][3], vl[2], vl[3]);
                    }
                    mma(o[2 * dj], ph[kk][0], ph[kk][1], ph[kk][2], ph[kk][3], vh[0], vh[1]);
                    mma(o[2 * dj + 1], ph[kk][0], ph[kk][1], ph[kk][2], ph[kk][3], vh[2], vh[3]);
                }
        }
        __syncthreads();  // every warp is done with the V tile
        if (more) load_tile(Vs, Vg, k0 + BN);
        cp_async_commit();
    }
    cp_async_wait<0>();

#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        if (lim[r] < 0) continue;
        const int m = mA + 8 * r, t = row_token(m), h = h0 + m % RB;
        const int64_t row = int64_t(t) * H + h;
        if (direct) {
            const float* gt = gate ? gate + row * 2 * D + D : nullptr;
            float* y = out + row * D;
#pragma unroll
            for (int j = 0; j < DT; ++j) {
                const int c = 8 * j + 2 * t4;
                const float2 gv = gt ? *reinterpret_cast<const float2*>(gt + c) : make_float2(0.f, 0.f);
                float2 v = make_float2(o[j][2 * r] / l_run[r], o[j][2 * r + 1] / l_run[r]);
                if (gt) v = make_float2(v.x * sigmoid_(gv.x), v.y * sigmoid_(gv.y));
                *reinterpret_cast<float2*>(y + c) = v;
            }
        } else {
            const int64_t prow = int64_t(split) * n * H + row;
            float* y = part_acc + prow * D;
#pragma unroll
            for (int j = 0; j < DT; ++j)
                *reinterpret_cast<float2*>(y + 8 * j + 2 * t4) = make_float2(o[j][2 * r], o[j][2 * r + 1]);
            if (t4 == 0) *reinterpret_cast<float2*>(part_ml + prow * 2) = make_float2(m_run[r], l_run[r]);
        }
    }
}

// ---- 3. combine the splits ------------------------------------------------------------------------------------
// One thread per float4 of out [n, H, D]; tokens of query tiles with one live split were written by step 2.
template <int D>
__global__ void __launch_bounds__(kCombineThreads)
    attn_prefill_combine(const float* __restrict__ part_acc, const float* __restrict__ part_ml,
                         const float* __restrict__ gate, const int32_t* __restrict__ pos0_dev, int n, int H, int TB,
                         int64_t cap, int splits, float* __restrict__ out) {
    pdl_trigger();
    pdl_wait();
    constexpr int kC4 = D / 4;
    const int64_t i = int64_t(blockIdx.x) * kCombineThreads + threadIdx.x;
    if (i >= int64_t(n) * H * kC4) return;
    const int c4 = static_cast<int>(i % kC4);
    const int64_t row = i / kC4;  // t · H + h
    const int t = static_cast<int>(row / H);
    const int32_t pos0 = *pos0_dev;
    if (!position_ok(pos0, t, cap)) return;  // NaN from step 2
    const int t_end = (t / TB + 1) * TB < n ? (t / TB + 1) * TB : n;
    const int64_t T = int64_t(pos0) + t_end < cap ? int64_t(pos0) + t_end : cap;
    const int n_live = split_range(T, splits, 0).n_live;
    if (n_live <= 1) return;
    const int64_t step = int64_t(n) * H;  // rows between splits
    float M = -INFINITY;
    for (int s = 0; s < n_live; ++s) M = fmaxf(M, part_ml[(s * step + row) * 2]);
    float L = 0.f;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s = 0; s < n_live; ++s) {
        const float2 ml = *reinterpret_cast<const float2*>(part_ml + (s * step + row) * 2);
        const float w = exp2f(ml.x - M);
        L = fmaf(ml.y, w, L);
        const float4 a = reinterpret_cast<const float4*>(part_acc + (s * step + row) * D)[c4];
        o = make_float4(fmaf(a.x, w, o.x), fmaf(a.y, w, o.y), fmaf(a.z, w, o.z), fmaf(a.w, w, o.w));
    }
    float4 y = make_float4(o.x / L, o.y / L, o.z / L, o.w / L);
    if (gate) {
        const float4 gv = reinterpret_cast<const float4*>(gate + row * 2 * D + D)[c4];
        y = make_float4(y.x * sigmoid_(gv.x), y.y * sigmoid_(gv.y), y.z * sigmoid_(gv.z), y.w * sigmoid_(gv.w));
    }
    reinterpret_cast<float4*>(out + row * D)[c4] = y;
}

size_t align256(size_t x) { return (x + 255) / 256 * 256; }

struct Layout {
    size_t kv16_off, acc_off, ml_off, total;
};
Layout prefill_layout(const GatedAttentionDims& d, int64_t n, const PrefillPlan& pl) {
    const size_t P = d.prefill_bf16 ? 1 : 2;
    Layout L;
    L.kv16_off = 0;
    L.acc_off = align256(2 * size_t(d.n_kv) * size_t(d.capacity) * P * size_t(d.head_dim) * 2);
    const size_t rows = pl.splits > 1 ? size_t(pl.splits) * size_t(n) * size_t(d.n_heads) : 0;
    L.ml_off = L.acc_off + align256(rows * size_t(d.head_dim) * 4);
    L.total = L.ml_off + align256(rows * 2 * 4);
    return L;
}

template <int D>
int occupancy_d(bool bf16, int W) {
    if (W == 8) return bf16 ? blocks_per_sm<D, 1, 8>() : blocks_per_sm<D, 2, 8>();
    return bf16 ? blocks_per_sm<D, 1, 4>() : blocks_per_sm<D, 2, 4>();
}
int occupancy(const GatedAttentionDims& d, int W) {
    switch (d.head_dim) {
        case 16: return occupancy_d<16>(d.prefill_bf16, W);
        case 32: return occupancy_d<32>(d.prefill_bf16, W);
        case 64: return occupancy_d<64>(d.prefill_bf16, W);
        case 96: return occupancy_d<96>(d.prefill_bf16, W);
        case 128: return occupancy_d<128>(d.prefill_bf16, W);
        default: return occupancy_d<256>(d.prefill_bf16, W);
    }
}

// Warps per block: 8 only where instantiated (d = 128, 256; attention_prefill.h).
bool warps_ok(int64_t D, int W) { return W == 4 || (W == 8 && (D == 128 || D == 256)); }
int default_warps(const GatedAttentionDims& d) { return 4; }

template <int D, int P, int W>
void launch(const GatedAttentionDims& d, const float* q_ws, const float* gate, const void* Kc, const void* Vc,
            const int32_t* pos0_dev, int64_t n, float* out, char* ws, cudaStream_t st, unsigned stages,
            const int32_t* pages) {
    const PrefillPlan pl = prefill_plan(d, n, W);
    const Layout L = prefill_layout(d, n, pl);
    const int H = static_cast<int>(d.n_heads), G = static_cast<int>(d.n_kv);
    uint16_t* kv16 = reinterpret_cast<uint16_t*>(ws + L.kv16_off);
    float* part_acc = reinterpret_cast<float*>(ws + L.acc_off);
    float* part_ml = reinterpret_cast<float*>(ws + L.ml_off);
    // A contiguous bf16 cache is already the flash kernel's [G][cap][1][D] layout.
    const bool in_place = d.kv_bf16 && P == 1 && !pages;
    if ((stages & PREFILL_CONVERT) && !in_place) {
        if (d.kv_bf16)
            launch_pdl(kv_to_bf16<D, P, __nv_bfloat16>, dim3(unsigned(kConvertBlocks), unsigned(2 * G)),
                       dim3(kConvertThreads), 0, st, 0, static_cast<const __nv_bfloat16*>(Kc),
                       static_cast<const __nv_bfloat16*>(Vc), reinterpret_cast<uint32_t*>(kv16), pos0_dev, int(n), G,
                       d.capacity, pages);
        else
            launch_pdl(kv_to_bf16<D, P, float>, dim3(unsigned(kConvertBlocks), unsigned(2 * G)), dim3(kConvertThreads),
                       0, st, 0, static_cast<const float*>(Kc), static_cast<const float*>(Vc),
                       reinterpret_cast<uint32_t*>(kv16), pos0_dev, int(n), G, d.capacity, pages);
    }
    if (stages & PREFILL_FLASH) {
        constexpr size_t smem = smem_bytes<D, P, W>();
        static const bool attr_set = [] {  // > 48 KB of dynamic shared memory needs the opt-in
            CUDA_CHECK(cudaFuncSetAttribute(attn_prefill_flash<D, P, W>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            int(smem)));
            return true;
        }();
        (void)attr_set;
        const float q_scale = (d.score_mul / std::sqrt(static_cast<float>(D))) * 1.4426950408889634f;
        const uint16_t* K16 = in_place ? static_cast<const uint16_t*>(Kc) : kv16;
        const uint16_t* V16 = in_place ? static_cast<const uint16_t*>(Vc) : kv16 + size_t(G) * size_t(d.capacity) * P * D;
        launch_pdl(attn_prefill_flash<D, P, W>, dim3(unsigned(pl.splits), unsigned(G * pl.n_sub), unsigned(pl.n_tiles)),
                   dim3(32 * W), smem, st, 0, q_ws, gate, K16, V16, pos0_dev, int(n), H, G, pl.n_sub, pl.heads,
                   pl.tokens, d.capacity, pl.splits, q_scale, part_acc, part_ml, out);
    }
    if ((stages & PREFILL_COMBINE) && pl.splits > 1) {
        const int64_t threads = n * H * (D / 4);
        launch_pdl(attn_prefill_combine<D>, dim3(unsigned((threads + kCombineThreads - 1) / kCombineThreads)),
                   dim3(kCombineThreads), 0, st, 0, part_acc, part_ml, gate, pos0_dev, int(n), H, pl.tokens,
                   d.capacity, pl.splits, out);
    }
}

template <int D, int W>
void launch_w(const GatedAttentionDims& d, const float* q_ws, const float* gate, const void* Kc, const void* Vc,
              const int32_t* pos0_dev, int64_t n, float* out, char* ws, cudaStream_t st, unsigned stages,
              const int32_t* pages) {
    if (d.prefill_bf16) launch<D, 1, W>(d, q_ws, gate, Kc, Vc, pos0_dev, n, out, ws, st, stages, pages);
    else launch<D, 2, W>(d, q_ws, gate, Kc, Vc, pos0_dev, n, out, ws, st, stages, pages);
}
template <int D>
void launch_d(const GatedAttentionDims& d, const float* q_ws, const float* gate, const void* Kc, const void* Vc,
              const int32_t* pos0_dev, int64_t n, float* out, char* ws, cudaStream_t st, unsigned stages, int W,
              const int32_t* pages) {
    if constexpr (D == 128 || D == 256) {
        if (W == 8) return launch_w<D, 8>(d, q_ws, gate, Kc, Vc, pos0_dev, n, out, ws, st, stages, pages);
    }
    launch_w<D, 4>(d, q_ws, gate, Kc, Vc, pos0_dev, n, out, ws, st, stages, pages);
}

}  // namespace

PrefillPlan prefill_plan(const GatedAttentionDims& d, int64_t n, int warps) {
    EMBER_CHECK(d.n_kv > 0 && d.n_heads % d.n_kv == 0 && d.capacity > 0 && n > 0, "bad attention dims");
    const int W = warps ? warps : default_warps(d);
    EMBER_CHECK(warps_ok(d.head_dim, W), "prefill attention: %d warps per block at head dim %lld", W,
                (long long)d.head_dim);
    const int kRows = 16 * W;
    PrefillPlan p;
    p.warps = W;
    const int64_t R = d.n_heads / d.n_kv;
    p.heads = static_cast<int>(R < kRows ? R : kRows);
    p.n_sub = static_cast<int>((R + p.heads - 1) / p.heads);
    p.tokens = kRows / p.heads;
    p.n_tiles = (n + p.tokens - 1) / p.tokens;
    p.key_tile = d.head_dim == 256 ? key_tile<256>() : key_tile<128>();
    const int64_t base = p.n_tiles * d.n_kv * p.n_sub, target = 2 * int64_t(kSMs) * occupancy(d, W);
    int64_t s = base >= target ? 1 : target / base;
    const int64_t by_len = (d.capacity + kMinChunk - 1) / kMinChunk;
    s = std::min<int64_t>({s, by_len, kMaxSplits});
    p.splits = static_cast<int>(s < 1 ? 1 : s);
    return p;
}

size_t prefill_workspace_bytes(const GatedAttentionDims& d, int64_t n) {  // room for either block size
    size_t most = prefill_layout(d, n, prefill_plan(d, n, 4)).total;
    if (warps_ok(d.head_dim, 8)) most = std::max(most, prefill_layout(d, n, prefill_plan(d, n, 8)).total);
    return most;
}

void attention_prefill(const GatedAttentionDims& d, const float* q_ws, const float* gate, const void* K_cache,
                       const void* V_cache, const int32_t* pos0_dev, int64_t n, float* out, void* ws,
                       cudaStream_t st, unsigned stages, int warps, const int32_t* pages) {
    const int W = prefill_plan(d, n, warps).warps;
    EMBER_CHECK(n > 1 && n <= 65535 && (reinterpret_cast<uintptr_t>(ws) & 15u) == 0, "prefill: n = %lld",
                (long long)n);
    char* w = static_cast<char*>(ws);
    switch (d.head_dim) {
        case 16: launch_d<16>(d, q_ws, gate, K_cache, V_cache, pos0_dev, n, out, w, st, stages, W, pages); break;
        case 32: launch_d<32>(d, q_ws, gate, K_cache, V_cache, pos0_dev, n, out, w, st, stages, W, pages); break;
        case 64: launch_d<64>(d, q_ws, gate, K_cache, V_cache, pos0_dev, n, out, w, st, stages, W, pages); break;
        case 96: launch_d<96>(d, q_ws, gate, K_cache, V_cache, pos0_dev, n, out, w, st, stages, W, pages); break;
        case 128: launch_d<128>(d, q_ws, gate, K_cache, V_cache, pos0_dev, n, out, w, st, stages, W, pages); break;
        case 256: launch_d<256>(d, q_ws, gate, K_cache, V_cache, pos0_dev, n, out, w, st, stages, W, pages); break;
        default: EMBER_CHECK(false, "prefill attention: head_dim %lld", (long long)d.head_dim);
    }
}

}  // namespace ember::cuda::detail
