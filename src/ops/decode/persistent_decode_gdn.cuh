// The GDN phase of the persistent decode kernel (persistent_decode.h): gated_delta_net_step with T = 1
// (gdn_cuda.h, math in qwen35.md §2.6), one value head h per task, the same operation order as gdn_cuda.cu.
// Thread roles (256 consumers): conv channel ci = tid, tid + 256 of [q (dk) | k (dk) | v (dv)] (v threads also
// silu(z)); the state tile: thread (rg = warp, cq = lane) holds S[rg + 8m][4cq .. 4cq + 3] (m < 16) in registers,
// so dk ≤ 128, dv ≤ 128, dv % 4 == 0 (pd_gdn_supported).
// The q/k conv-state rows of key head kh are read by every value head of kh in this phase: when nv > nk the
// first value head of kh keeps the new rows in PendingConv and writes them after the next phase's wait.
#pragma once
#include "ops/decode/persistent_decode_sync.cuh"

namespace ember::cuda::pd::dev {

constexpr float kL2Eps = 1e-6f;  // HF/FLA l2norm eps (as gdn_cuda.cu)

__device__ __forceinline__ float fast_silu(float x) { return __fdividef(x, 1.0f + __expf(-x)); }

constexpr int kGdnRows = 128 / kConsumerWarps;  // state rows per thread (dk ≤ 128)
constexpr int kGdnCh = (2 * 128 + 128 + kConsumers - 1) / kConsumers;  // conv channels per thread (2dk + dv ≤ 384)

// first: this block's first head of the phase, which calls W.wait() once the loads that do not depend on the
// previous phase (state tile, conv windows and weights, the gates' parameters) are in flight.
__device__ __forceinline__ void gdn_head(const PdGdn& op, const Smem& S, int h, int tid, const Waiter& W, bool first) {
    const int warp = tid >> 5, lane = tid & 31;
    const int nk = op.nk, nv = op.nv, dk = op.dk, dv = op.dv, K = op.K, r = nv / nk;
    const int kh = op.tiled_map ? h % nk : h / r, hr = op.tiled_map ? h / nk : h % r;
    const int64_t kd = int64_t(nk) * dk, vd = int64_t(nv) * dv, C = 2 * kd + vd;
    float* qk = reinterpret_cast<float*>(S.work);  // [2][dk] silu(conv) of q | k (raw)
    float* vv = qk + 2 * 128;                      // [dv] silu(conv) of v
    float* zz = vv + 128;                          // [dv] silu(z)
    float* dl = zz + 128;                          // [dv] δ
    float* oo = dl + 128;                          // [dv] o
    float* sc = oo + 128;                          // per-warp sums: [4w..4w+2] Σq², Σk², Σqk; [32 + w] Σo²
    float4* red = reinterpret_cast<float4*>(sc + 64);  // [2][warps][32] partial Sᵀk, Sᵀq per (row group, column quad)

    // State tile (rows warp + 8m, columns 4·lane ..): loaded first, all in flight while the rest runs.
    const int rg = warp, cq = lane, col0 = 4 * cq;
    const bool colv = col0 < dv;
    float* Sh = op.S + int64_t(h) * dk * dv;
    float4 st[kGdnRows];
#pragma unroll
    for (int m = 0; m < kGdnRows; ++m) {
        const int i = rg + kConsumerWarps * m;
        st[m] = colv && i < dk ? __ldcg(reinterpret_cast<const float4*>(Sh + int64_t(i) * dv + col0))
                               : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    // Conv channel ci = tid + 256·u (< 2dk + dv): q channel ci, k channel ci − dk, v column ci − 2dk.
    auto channel = [&](int ci) -> int64_t {
        if (ci < dk) return int64_t(kh) * dk + ci;
        if (ci < 2 * dk) return kd + int64_t(kh) * dk + (ci - dk);
        return 2 * kd + int64_t(h) * dv + (ci - 2 * dk);
    };
    const int nch = 2 * dk + dv;
    float win[kGdnCh][4], cw[kGdnCh][3], cwl[kGdnCh];  // window (+1 spare), taps on it, the current token's tap
#pragma unroll
    for (int u = 0; u < kGdnCh; ++u) {
        const int ci = tid + kConsumers * u;
        const int64_t ch = ci < nch ? channel(ci) : 0;
#pragma unroll
        for (int j = 0; j < 3; ++j) {
            win[u][j] = ci < nch && j < K - 1 ? __ldcg(op.conv_state + int64_t(j) * C + ch) : 0.f;
            cw[u][j] = ci < nch && j < K - 1 ? __ldg(op.conv_w + ch * K + j) : 0.f;
        }
        win[u][3] = 0.f;
        cwl[u] = ci < nch ? __ldg(op.conv_w + ch * K + (K - 1)) : 0.f;
    }
    const float A = expf(__ldg(op.A_log + h)), dtb = __ldg(op.dt_bias + h);
    const float nwc = tid < dv ? __ldg(op.norm_w + tid) : 0.f;
    if (first) W.wait(tid);  // qkv, z, a, b come from the previous phase
#pragma unroll
    for (int u = 0; u < kGdnCh; ++u) {
        const int ci = tid + kConsumers * u;
        if (ci >= nch) break;
        const int64_t ch = channel(ci);
        const float nx = __ldcg(op.qkv + ch);
        float acc = cwl[u] * nx;
#pragma unroll
        for (int j = 0; j < 3; ++j)
            if (j < K - 1) acc = fmaf(cw[u][j], win[u][j], acc);
        const float out = fast_silu(acc);
        float nw[3];  // the new window: win[1 .. K−2], nx
#pragma unroll
        for (int j = 0; j < 3; ++j) nw[j] = j < K - 2 ? win[u][j + 1] : nx;
        if (ci < 2 * dk) {
            qk[ci] = out;
            if (r == 1) {
#pragma unroll
                for (int j = 0; j < 3; ++j)
                    if (j < K - 1) __stcg(op.conv_state + int64_t(j) * C + ch, nw[j]);
            } else if (hr == 0) {
#pragma unroll
                for (int j = 0; j < 3; ++j)
                    if (j < K - 1) S.pend->vals[ci * (K - 1) + j] = nw[j];
            }
        } else {
            const int c = ci - 2 * dk;
            vv[c] = out;
            zz[c] = fast_silu(__ldcg(op.z + int64_t(h) * dv + c));
#pragma unroll
            for (int j = 0; j < 3; ++j)
                if (j < K - 1) __stcg(op.conv_state + int64_t(j) * C + ch, nw[j]);
        }
    }
    if (r > 1 && hr == 0 && tid == 0) {
        PendingConv& p = *S.pend;
        p.base = op.conv_state, p.kh = kh, p.dk = dk, p.kd = int(kd), p.C = int(C), p.K = K, p.active = 1;
    }
    // gates: g = −exp(A_log)·softplus(a + dt_bias) (torch threshold 20), β = σ(b) — accurate functions
    const float xg = __ldcg(op.a + h) + dtb;
    const float decay = expf(-A * (xg > 20.f ? xg : log1pf(expf(xg))));
    const float beta = 1.0f / (1.0f + expf(-__ldcg(op.b + h)));
    consumer_sync();  // qk, vv, zz

    // Σq², Σk², Σqk (warps holding q/k channels), and the partial Sᵀk, Sᵀq of this thread's tile.
    if (warp * 32 < dk) {
        const float q = tid < dk ? qk[tid] : 0.f, k = tid < dk ? qk[dk + tid] : 0.f;
        const float a = warp_sum(q * q), b = warp_sum(k * k), c = warp_sum(q * k);
        if (lane == 0) sc[warp * 4 + 0] = a, sc[warp * 4 + 1] = b, sc[warp * 4 + 2] = c;
    }
    float4 pu = make_float4(0.f, 0.f, 0.f, 0.f), pw = pu;
#pragma unroll
    for (int m = 0; m < kGdnRows; ++m) {
        const int i = rg + kConsumerWarps * m;
        if (i < dk) {
            const float kr = qk[dk + i], qr = qk[i];
            pu.x = fmaf(st[m].x, kr, pu.x), pu.y = fmaf(st[m].y, kr, pu.y);
            pu.z = fmaf(st[m].z, kr, pu.z), pu.w = fmaf(st[m].w, kr, pu.w);
            pw.x = fmaf(st[m].x, qr, pw.x), pw.y = fmaf(st[m].y, qr, pw.y);
            pw.z = fmaf(st[m].z, qr, pw.z), pw.w = fmaf(st[m].w, qr, pw.w);
        }
    }
    red[rg * 32 + cq] = pu;
    red[kConsumerWarps * 32 + rg * 32 + cq] = pw;
    consumer_sync();

    float sq = 0.f, sk = 0.f, sqk = 0.f;
    for (int w = 0; w * 32 < dk; ++w) sq += sc[w * 4], sk += sc[w * 4 + 1], sqk += sc[w * 4 + 2];
    const float fq = rsqrtf(sq + kL2Eps) * (1.0f / sqrtf(static_cast<float>(dk)));
    const float fk = rsqrtf(sk + kL2Eps);
    const float kq = sqk * fq * fk;  // k̂·q̂
    float part = 0.f;
    if (tid < dv) {  // column c = tid: δ and o from the summed partials (fixed order over row groups)
        const int c = tid, q4 = c >> 2, e = c & 3;
        float u = 0.f, w = 0.f;
        for (int g2 = 0; g2 < kConsumerWarps; ++g2) {
            const float4 a = red[g2 * 32 + q4], b = red[kConsumerWarps * 32 + g2 * 32 + q4];
            u += e == 0 ? a.x : e == 1 ? a.y : e == 2 ? a.z : a.w;
            w += e == 0 ? b.x : e == 1 ? b.y : e == 2 ? b.z : b.w;
        }
        const float d = beta * (vv[c] - decay * (fk * u));  // β(v − e^g Sᵀk̂)
        const float o = fmaf(kq, d, decay * (fq * w));     // S_newᵀq̂
        dl[c] = d;
        oo[c] = o;
        part = o * o;
    }
    // Σo² over the dv columns (warps 0 .. ⌈dv/32⌉ − 1)
    part = warp_sum(part);
    if (lane == 0 && warp * 32 < dv) sc[32 + warp] = part;
    consumer_sync();  // dl, oo, sc[32..]

    // S ← e^g S + k̂ δᵀ, stored back.
    if (colv) {
        const float4 d4 = make_float4(dl[col0], dl[col0 + 1], dl[col0 + 2], dl[col0 + 3]);
#pragma unroll
        for (int m = 0; m < kGdnRows; ++m) {
            const int i = rg + kConsumerWarps * m;
            if (i < dk) {
                const float kh_ = qk[dk + i] * fk;
                float4 v = st[m];
                v.x = fmaf(kh_, d4.x, decay * v.x), v.y = fmaf(kh_, d4.y, decay * v.y);
                v.z = fmaf(kh_, d4.z, decay * v.z), v.w = fmaf(kh_, d4.w, decay * v.w);
                __stcg(reinterpret_cast<float4*>(Sh + int64_t(i) * dv + col0), v);
            }
        }
    }
    // y = norm_w·(o / rms(o))·silu(z)
    if (tid < dv) {
        float tot = 0.f;
        for (int w = 0; w * 32 < dv; ++w) tot += sc[32 + w];
        const float inv = rsqrtf(tot * (1.0f / static_cast<float>(dv)) + op.eps);
        __stcg(op.y + int64_t(h) * dv + tid, (nwc * (oo[tid] * inv)) * zz[tid]);
    }
    consumer_sync();  // the work area is reused by the next head / phase
}

__device__ __forceinline__ void consume_gdn(const PdGdn op, const Smem& S, int tid, int blk, int grid,
                                            const Waiter& W) {
    int64_t h0, h1;
    task_range(op.nv, grid, blk, h0, h1);
    if (h0 == h1) W.wait(tid);
    for (int64_t h = h0; h < h1; ++h) gdn_head(op, S, int(h), tid, W, h == h0);
}

}  // namespace ember::cuda::pd::dev
