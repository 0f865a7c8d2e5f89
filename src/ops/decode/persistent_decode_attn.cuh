// The ATTN and COMBINE phases of the persistent decode kernel (persistent_decode.h): gated_attention_core with
// n = 1 (attention_cuda.h, attention.cu) as two phases.
// ATTN: task (kv head g, key split j) of the live length T = pos + 1: the R = H / G query heads of g are RMSNormed
//   (q_norm) and RoPEd here (as qk_prologue; every task recomputes them), the task of the last split also the new
//   key, and appends K/V at pos; then flash-decoding over its keys in tiles of 32 (scores by 8-lane groups,
//   online softmax in base 2 by warp r for head r, P·V with a float4 column and an interleaved key subset per
//   thread) and writes its unnormalised partial (acc, max, Σ) per head.
// COMBINE: task h: merges the live splits of head h and applies the sigmoid gate (ungated: factor 1).
// Splits: chunk = max(64, ⌈T / max_splits⌉ rounded up to 64), n_live = ⌈T / chunk⌉ (same in both phases).
#pragma once
#include <cuda_bf16.h>

#include "ops/attention/kv_cache.cuh"
#include "ops/decode/persistent_decode_sync.cuh"

namespace ember::cuda::pd::dev {

// The KV cache's elements (PdAttn::kv_bf16, a uniform runtime flag: one copy of the phase's code, which keeps the
// kernel's registers as they were): fp32 or bf16 (rounded to nearest even when appended, widened exactly when read,
// as ops/attention/kv_cache.cuh), through L2 (__ldcg / __stcg: written by an earlier phase of the launch). p: the
// cache's base, i: the element (i4: the group of four elements).
__device__ __forceinline__ void kv_put(void* p, int64_t i, float x, bool b16) {
    if (b16) __stcg(static_cast<unsigned short*>(p) + i, __bfloat16_as_ushort(__float2bfloat16_rn(x)));
    else __stcg(static_cast<float*>(p) + i, x);
}
__device__ __forceinline__ float4 kv_get4(const void* p, int64_t i4, bool b16) {
    return b16 ? kv_widen4(__ldcg(static_cast<const uint2*>(p) + i4)) : __ldcg(static_cast<const float4*>(p) + i4);
}

constexpr int kAttnTile = 4 * kConsumerWarps;  // keys per tile: 4 per warp in the scores, 1 per lane in the softmax
static_assert(kAttnTile == 32, "the softmax step gives each lane one key");
constexpr int kAttnMaxR = 6;

__device__ __forceinline__ void attn_splits(int64_t T, int max_splits, int64_t& chunk, int& n_live) {
    int64_t c = (T + max_splits - 1) / max_splits;
    c = (c + 63) / 64 * 64;
    chunk = c < 64 ? 64 : c;
    n_live = int((T + chunk - 1) / chunk);
}

// The phase's weights in shared memory, loaded before the wait for the previous phase (they do not depend on it):
// q_norm [D], k_norm [D] (when present), the RoPE table [half] (+ [half] frequency factors). At the end of the
// attention scratch (attn_task's layout below, ≤ 23 KB of kWorkMin).
constexpr int kAttnPre = (2 * kAttnMaxR + 2) * 256 + kAttnMaxR * 32 + 16 + 16 + 2 * kAttnMaxR + 4 * 256;
static_assert((kAttnPre + 3 * 256) * 4 <= kWorkMin, "attention scratch");
struct AttnPre {
    const float *q_norm, *k_norm, *rope;
};
__device__ __forceinline__ AttnPre attn_prefetch(const PdAttn& op, const Smem& S, int tid) {
    float* pre = reinterpret_cast<float*>(S.work) + kAttnPre;
    const int D = op.D, nr = op.has_factor ? 2 * op.half : op.half;
    for (int i = tid; i < D; i += kConsumers) {
        if (op.q_norm) pre[i] = __ldg(op.q_norm + i);
        if (op.k_norm) pre[256 + i] = __ldg(op.k_norm + i);
    }
    for (int i = tid; i < nr; i += kConsumers) pre[512 + i] = __ldg(op.rope + i);
    return AttnPre{op.q_norm ? pre : nullptr, op.k_norm ? pre + 256 : nullptr, pre + 512};
}

// RMSNorm (norm weights or none) then RoPE of `rows` head vectors raw[r][D] → dst[r][D]·mul, as qk_prologue.
// raw (written by any consumer before the call) is normalised in place. pos: the token's position; norm_w and rope
// in shared memory (attn_prefetch). Starts and ends with a barrier.
__device__ __forceinline__ void norm_rope(const PdAttn& op, float* raw, float* dst, int rows, const float* norm_w,
                                          const float* rope, int64_t pos, float mul, float* inv_s, int tid) {
    const int D = op.D, warp = tid >> 5, lane = tid & 31;
    consumer_sync();  // raw was written by other threads
    if (norm_w && warp < rows) {
        float ss = 0.f;
        for (int c = lane; c < D; c += 32) ss += raw[warp * D + c] * raw[warp * D + c];
        ss = warp_sum(ss);
        if (lane == 0) inv_s[warp] = 1.0f / sqrtf(ss / static_cast<float>(D) + op.eps);
    }
    consumer_sync();
    if (norm_w)
        for (int i = tid; i < rows * D; i += kConsumers) raw[i] = raw[i] * inv_s[i / D] * norm_w[i % D];
    consumer_sync();
    const int half = op.half;
    for (int i = tid; i < rows * D; i += kConsumers) {
        const int rr = i / D, c = i % D;
        const float* row = raw + rr * D;
        float y = row[c];
        if (c < 2 * half) {  // product and difference unfused, as the CPU op
            const bool il = op.interleaved != 0;
            const int j = il ? c >> 1 : (c < half ? c : c - half);
            const bool first = il ? (c & 1) == 0 : c < half;
            const float a = il ? row[2 * j] : row[j], b = il ? row[2 * j + 1] : row[j + half];
            float phi = __fmul_rn(static_cast<float>(pos), rope[j]);
            if (op.has_factor) phi = __fdiv_rn(phi, rope[half + j]);
            float sn, cs;
            sincosf(phi, &sn, &cs);
            y = first ? __fsub_rn(__fmul_rn(a, cs), __fmul_rn(b, sn)) : __fadd_rn(__fmul_rn(b, cs), __fmul_rn(a, sn));
        }
        dst[i] = y * mul;
    }
    consumer_sync();
}

__device__ __forceinline__ void attn_task(const PdAttn& op, const Smem& S, const AttnPre& pw, int g, int j,
                                          int64_t chunk, int n_live, int64_t pos, int tid) {
    const int D = op.D, H = op.H, R = H / op.G, h0 = g * R, warp = tid >> 5, lane = tid & 31;
    const bool b16 = op.kv_bf16 != 0;
    const int64_t T = pos + 1, k0 = int64_t(j) * chunk, k1 = min(T, k0 + chunk);
    const bool last = j == n_live - 1;
    // Scratch: raw [R + 1][D] | q_s [R][D] | k_s [D] | p_s [R][tile] | alpha [R] | inv [R + 1] | red
    float* raw = reinterpret_cast<float*>(S.work);
    float* q_s = raw + (kAttnMaxR + 1) * 256;
    float* k_s = q_s + kAttnMaxR * 256;
    float* p_s = k_s + 256;
    float* alpha_s = p_s + kAttnMaxR * kAttnTile;
    float* inv_s = alpha_s + 16;
    float* ml_s = inv_s + 16;
    float4* red = reinterpret_cast<float4*>(ml_s + 2 * kAttnMaxR);
    const int qstride = op.gated ? 2 * D : D;
    for (int i = tid; i < R * D; i += kConsumers) raw[i] = __ldcg(op.qg + int64_t(h0 + i / D) * qstride + i % D);
    if (last)
        for (int c = tid; c < D; c += kConsumers) raw[R * D + c] = __ldcg(op.k + int64_t(g) * D + c);
    norm_rope(op, raw, q_s, R, pw.q_norm, pw.rope, pos, op.q_scale, inv_s, tid);
    if (last) {  // the new key (normed, roped) and value at pos
        norm_rope(op, raw + R * D, k_s, 1, pw.k_norm, pw.rope, pos, 1.f, inv_s + 8, tid);
        const int64_t row = (int64_t(g) * op.cap + pos) * D;
        for (int c = tid; c < D; c += kConsumers) {
            kv_put(op.Kc, row + c, k_s[c], b16);
            kv_put(op.Vc, row + c, __ldcg(op.v + int64_t(g) * D + c), b16);
        }
        consumer_sync();  // the row is read back below (same block: ordered by the barrier)
    }
    const int64_t hb = int64_t(g) * op.cap * D;  // the kv head's first element
    const int nv4 = D / 32;                       // float4 per lane per key row in the scores (D ≥ 64)
    const int kk = lane >> 3, sg = lane & 7;      // scores: 4 keys per warp, 8 lanes per key
    const int kC4 = D / 4, kKQ = min(kConsumers / kC4, kAttnTile), KPT = kAttnTile / kKQ;
    const int c4 = tid % kC4, kq = tid / kC4;     // P·V: float4 column, key subset (kq < kKQ)
    float4 acc[kAttnMaxR];
#pragma unroll
    for (int r = 0; r < kAttnMaxR; ++r) acc[r] = make_float4(0.f, 0.f, 0.f, 0.f);
    float m_run = -INFINITY, l_run = 0.f;  // softmax state of head `warp` (warps < R)
    for (int64_t ts = k0; ts < k1; ts += kAttnTile) {
        // V rows of (c) first: independent of the scores, so their latency overlaps (a) and (b)
        float4 vv[8];  // KPT = 32 / kKQ ≤ 8 (D ≤ 256: kKQ ≥ 4)
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int64_t key = ts + kq + i * kKQ;
            vv[i] = kq < kKQ && i < KPT && key < k1 ? kv_get4(op.Vc, hb / 4 + key * kC4 + c4, b16)
                                                    : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        {   // (a) scores of key ts + warp·4 + kk
            const int kt = warp * 4 + kk;
            const int64_t key = ts + kt;
            const bool kvalid = key < k1;
            const int64_t kr4 = (hb + (kvalid ? key : k0) * D) / 4;
            float4 kv[8];
#pragma unroll
            for (int q = 0; q < 8; ++q)
                kv[q] = q < nv4 && kvalid ? kv_get4(op.Kc, kr4 + sg + 8 * q, b16) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
            for (int r = 0; r < kAttnMaxR; ++r) {
                if (r < R) {
                    const float4* qr = reinterpret_cast<const float4*>(q_s + r * D);
                    float dot = 0.f;
#pragma unroll
                    for (int q = 0; q < 8; ++q) {
                        if (q < nv4) {
                            const float4 q4 = qr[sg + 8 * q];
                            dot = fmaf(q4.x, kv[q].x, dot);
                            dot = fmaf(q4.y, kv[q].y, dot);
                            dot = fmaf(q4.z, kv[q].z, dot);
                            dot = fmaf(q4.w, kv[q].w, dot);
                        }
                    }
                    dot += __shfl_xor_sync(0xffffffffu, dot, 4);
                    dot += __shfl_xor_sync(0xffffffffu, dot, 2);
                    dot += __shfl_xor_sync(0xffffffffu, dot, 1);
                    if (sg == 0) p_s[r * kAttnTile + kt] = kvalid ? dot : -INFINITY;
                }
            }
        }
        consumer_sync();
        if (warp < R) {  // (b) the tile always holds a valid key: the new max is finite
            const float s0 = p_s[warp * kAttnTile + lane];
            const float m_new = fmaxf(m_run, warp_max(s0));
            const float p0 = exp2f(s0 - m_new);
            const float al = exp2f(m_run - m_new);
            l_run = l_run * al + warp_sum(p0);
            m_run = m_new;
            p_s[warp * kAttnTile + lane] = p0;
            if (lane == 0) alpha_s[warp] = al;
        }
        consumer_sync();
        if (kq < kKQ) {  // (c) acc[r] ← α_r·acc[r] + Σ p[r][key]·V[key][4c4 ..]
#pragma unroll
            for (int r = 0; r < kAttnMaxR; ++r) {
                if (r < R) {
                    const float a = alpha_s[r];
                    float4 o = make_float4(acc[r].x * a, acc[r].y * a, acc[r].z * a, acc[r].w * a);
#pragma unroll
                    for (int i = 0; i < 8; ++i) {
                        if (i < KPT) {
                            const float p = p_s[r * kAttnTile + kq + i * kKQ];
                            o.x = fmaf(p, vv[i].x, o.x);
                            o.y = fmaf(p, vv[i].y, o.y);
                            o.z = fmaf(p, vv[i].z, o.z);
                            o.w = fmaf(p, vv[i].w, o.w);
                        }
                    }
                    acc[r] = o;
                }
            }
        }
        consumer_sync();  // p_s / alpha_s are rewritten by the next tile
    }
    if (warp < R && lane == 0) ml_s[2 * warp] = m_run, ml_s[2 * warp + 1] = l_run;
    float* part_acc = op.part;
    float* part_ml = op.part + int64_t(op.max_splits) * H * D;
#pragma unroll
    for (int r = 0; r < kAttnMaxR; ++r) {
        if (r >= R) break;  // R is uniform: every consumer reaches the barriers below
        if (kq > 0 && kq < kKQ) red[(kq - 1) * kC4 + c4] = acc[r];
        consumer_sync();
        if (kq == 0) {
            float4 o = acc[r];
            for (int q = 0; q < kKQ - 1; ++q) {
                const float4 x = red[q * kC4 + c4];
                o.x += x.x, o.y += x.y, o.z += x.z, o.w += x.w;
            }
            const int h = h0 + r;
            __stcg(reinterpret_cast<float4*>(part_acc + (int64_t(j) * H + h) * D) + c4, o);
            if (c4 == 0) {
                __stcg(part_ml + (int64_t(j) * H + h) * 2, ml_s[2 * r]);
                __stcg(part_ml + (int64_t(j) * H + h) * 2 + 1, ml_s[2 * r + 1]);
            }
        }
        consumer_sync();  // red is reused by the next head
    }
}

__device__ __forceinline__ void consume_attn(const PdAttn op, const Smem& S, const int32_t* pos_dev, int tid, int blk,
                                             int grid, const Waiter& W) {
    const int64_t pos = __ldcg(pos_dev);  // set before the launch (no phase writes it): read before the wait
    int64_t chunk;
    int n_live;
    attn_splits(pos + 1, op.max_splits, chunk, n_live);
    int64_t t0, t1;
    task_range(int64_t(op.G) * n_live, grid, blk, t0, t1);
    AttnPre pw{};
    if (t0 < t1) {  // (block-uniform) this block's weights in flight during the wait
        pw = attn_prefetch(op, S, tid);
        consumer_sync();  // (the first phase of a launch has no wait barrier)
    }
    W.wait(tid);
    for (int64_t task = t0; task < t1; ++task)
        attn_task(op, S, pw, int(task / n_live), int(task % n_live), chunk, n_live, pos, tid);
}

__device__ __forceinline__ void consume_combine(const PdAttn op, const Smem& S, const int32_t* pos_dev, int tid,
                                                int blk, int grid, const Waiter& W) {
    W.wait(tid);
    const int64_t pos = __ldcg(pos_dev);
    int64_t chunk;
    int n_live;
    attn_splits(pos + 1, op.max_splits, chunk, n_live);
    const int D = op.D, H = op.H;
    const float* part_acc = op.part;
    const float* part_ml = op.part + int64_t(op.max_splits) * H * D;
    float* m_s = reinterpret_cast<float*>(S.work);
    float* w_s = m_s + 64;
    float* l_s = w_s + 64;
    float* red = l_s + 64;  // [512]
    int64_t h0, h1;
    task_range(H, grid, blk, h0, h1);
    for (int64_t h = h0; h < h1; ++h) {
        if (tid < n_live) {
            m_s[tid] = __ldcg(part_ml + (int64_t(tid) * H + h) * 2);
            l_s[tid] = __ldcg(part_ml + (int64_t(tid) * H + h) * 2 + 1);
        }
        consumer_sync();
        float M = -INFINITY;
        for (int s = 0; s < n_live; ++s) M = fmaxf(M, m_s[s]);
        if (tid < n_live) w_s[tid] = exp2f(m_s[tid] - M);
        consumer_sync();
        float L = 0.f;
        for (int s = 0; s < n_live; ++s) L = fmaf(l_s[s], w_s[s], L);
        const int nsub = kConsumers / D, c = tid % D, sub = tid / D;  // D ≤ 256: ≥ 2 split subsets
        float o = 0.f;
        if (sub < nsub)
            for (int s = sub; s < n_live; s += nsub) o = fmaf(__ldcg(part_acc + (int64_t(s) * H + h) * D + c), w_s[s], o);
        red[tid] = o;
        consumer_sync();
        if (sub == 0) {
            for (int q = 1; q < nsub; ++q) o += red[q * D + c];
            const float gt = op.gated ? __ldcg(op.qg + int64_t(h) * 2 * D + D + c) : 0.f;
            const float gate = op.gated ? 1.0f / (1.0f + expf(-gt)) : 1.f;
            __stcg(op.out + int64_t(h) * D + c, o / L * gate);
        }
        consumer_sync();
    }
}

}  // namespace ember::cuda::pd::dev
