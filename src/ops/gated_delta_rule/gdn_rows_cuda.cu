// Batched GDN decode, one block per (row, value head): the head's whole state in registers (contract:
// gated_delta_net_step_rows in gdn_cuda.h; math: qwen35.md §2.6; the single-sequence kernel: gdn_cuda.cu).
//
// Why a second kernel. The cluster kernel of gdn_cuda.cu splits a head into CS column slices (2B: 8 blocks of
// 128 threads, 8 KiB of state each) so that one sequence's 16 heads fill the GPU; their Σo² crosses blocks
// through st.async, and each block pays a cluster barrier and a prologue of dependent loads for 8 KiB of state.
// With n_rows sequences there is parallelism enough without slicing: here a 256-thread block owns a whole
// [dk ≤ 128, dv ≤ 128] head (64 KiB of fp32 state, 16 float4 per thread, all loads in flight at once), and the
// only cross-thread exchanges are two __syncthreads.
//
// Block (kh·r + hr, row), r = nv / nk: value head h = map(kh, hr) of row `row`, state slot rows[2·row].
// Thread (warp w, lane l) holds S[w + 8m][4l .. 4l + 3], m < V (8V ≥ dk). Thread c < 128 runs the causal conv of
// q channel c and of v column c; thread 128 + c the conv of k channel c and silu(z_c).
//   #1 (q, k, v, silu(z) in shared memory) → one pass over the tile: Sᵀk and Sᵀq with the raw q, k (per-warp
//   partials), warps 0-3 the sums Σq², Σk², Σq·k → #2 → every warp sums the 8 partials of its lanes' columns (in
//   warp order: every warp gets the same bits), forms δ = β(v − e^g fk·Sᵀk) and S ← e^g S + (fk·k) δᵀ, stores
//   S; warp 0 also forms o = e^g fq·Sᵀq + (k̂·q̂)δ (= S_newᵀq̂), Σo² over the head (all dv columns are its lanes')
//   and y = norm_w·o/rms(o)·silu(z).
// The q / k conv channels of key head kh are read by the r blocks of its value heads: those r blocks form a
// cluster (r > 1), every block arrives (release) after its conv loads, and rank 0 waits before it writes the new
// q / k windows. v channels belong to one block. Numerics: the same operations as the cluster kernel, other
// summation orders (fp32 rounding apart, not bit-equal to the single-sequence call); deterministic.
#include "ops/gated_delta_rule/gdn_rows_cuda.h"

#include <cooperative_groups.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "core/check.h"
#include "ops/gated_delta_rule/gdn_cuda_device.cuh"

namespace ember::cuda {
namespace {

namespace cg = cooperative_groups;
using namespace gdn_detail;

constexpr int kThreads = 256;     // 8 warps = 8 row groups; 32 lanes × 4 columns = 128 columns
constexpr int kMaxDim = 128;      // dk, dv ≤ 128
constexpr float kL2Eps = 1e-6f;   // HF/FLA l2norm eps (as gdn_cuda.cu)

struct HeadRows {
    const int32_t* rows;  // [n_rows][2] (slot, position)
    int64_t conv_stride, S_stride;
    int r;     // value heads per key head (cluster size when > 1)
    bool vec;  // every slot's S rows 16-byte aligned: float4 accesses
};

template <int K, int V>
__global__ void __launch_bounds__(kThreads, 2) gdn_rows_head_kernel(const GdnDecodeArgs p, const HeadRows hr_) {
    pdl_trigger();
    pdl_wait();  // rows, inputs and states may be written by earlier kernels
    __shared__ float qks[2 * kMaxDim];  // silu(conv) of q | k (raw, unnormalised; 0 past dk)
    __shared__ float vsm[kMaxDim], zsm[kMaxDim];  // silu(conv v), silu(z) (0 past dv)
    __shared__ float4 red[8][32][2];    // per-warp partial (Sᵀk, Sᵀq) of each column group
    __shared__ float4 red3[4];          // (Σq², Σk², Σq·k) of warps 0-3

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t row = blockIdx.y;
    const int64_t slot = __ldcg(hr_.rows + 2 * row);
    const int nk = static_cast<int>(p.shape.nk), nv = static_cast<int>(p.shape.nv);
    const int dk = static_cast<int>(p.shape.dk), dv = static_cast<int>(p.shape.dv);
    const int64_t kd = static_cast<int64_t>(nk) * dk, vd = static_cast<int64_t>(nv) * dv, C = 2 * kd + vd;
    const int r = hr_.r, kh = static_cast<int>(blockIdx.x) / r, hr = static_cast<int>(blockIdx.x) % r;
    const int h = p.shape.map == KeyHeadMap::GROUPED ? kh * r + hr : hr * nk + kh;
    float* cst = p.conv_state + slot * hr_.conv_stride;

    // ---- every load first (a warp stalls only at the first use of a pending load) ----
    const int col0 = 4 * lane;
    const bool colv = col0 < dv;
    float* S_tile = p.S + slot * hr_.S_stride + static_cast<int64_t>(h) * dk * dv + static_cast<int64_t>(warp) * dv + col0;
    const int64_t S_step = 8 * static_cast<int64_t>(dv);
    float4 s[V];
#pragma unroll
    for (int m = 0; m < V; ++m) s[m] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (hr_.vec) {
#pragma unroll
        for (int m = 0; m < V; ++m)
            if (colv && warp + 8 * m < dk) s[m] = __ldcg(reinterpret_cast<const float4*>(S_tile + m * S_step));
    } else {
#pragma unroll
        for (int m = 0; m < V; ++m)
            if (colv && warp + 8 * m < dk) s[m] = load4(S_tile + m * S_step, dv - col0);
    }
    const int c = tid & (kMaxDim - 1);
    const bool is_k = tid >= kMaxDim, own_qk = c < dk, own_v = c < dv;
    const int64_t qkc = (is_k ? kd : 0) + static_cast<int64_t>(kh) * dk + (own_qk ? c : 0);  // q or k channel
    const int64_t vch = 2 * kd + static_cast<int64_t>(h) * dv + (own_v ? c : 0);          // v channel
    const float* in_qkv = p.qkv + row * C;
    float w1[K], x1[K - 1], w2[K], x2[K - 1];  // conv weights / window of q|k, and of v (threads < 128)
#pragma unroll
    for (int j = 0; j < K; ++j) {
        w1[j] = __ldg(p.conv_w + qkc * K + j);
        w2[j] = is_k ? 0.f : __ldg(p.conv_w + vch * K + j);
        if (j < K - 1) {
            x1[j] = __ldcg(cst + j * C + qkc);
            x2[j] = is_k ? 0.f : __ldcg(cst + j * C + vch);
        }
    }
    const float cur1 = __ldg(in_qkv + qkc);
    // threads < 128: v input; threads ≥ 128: z
    const float cur2 = is_k ? __ldg(p.z + row * vd + static_cast<int64_t>(h) * dv + (own_v ? c : 0)) : __ldg(in_qkv + vch);
    const float A_log = __ldg(p.A_log + h), dt_bias = __ldg(p.dt_bias + h);
    const float na = __ldg(p.a + row * nv + h), nb = __ldg(p.b + row * nv + h);
    if (r > 1) cluster_arrive();  // this block's reads of the shared q / k windows are done (release)

    // ---- conv + SiLU; gates ----
    {
        float a1 = w1[K - 1] * cur1, a2 = w2[K - 1] * cur2;
#pragma unroll
        for (int j = 0; j < K - 1; ++j) {
            a1 = fmaf(w1[j], x1[j], a1);
            a2 = fmaf(w2[j], x2[j], a2);
        }
        qks[tid] = own_qk ? silu(a1) : 0.f;
        if (is_k) zsm[c] = own_v ? silu(cur2) : 0.f;
        else vsm[c] = own_v ? silu(a2) : 0.f;
    }
    // New conv windows: the v columns (this block's own) now; the q / k channels now when no other block reads
    // them (r = 1), else by rank 0 after every block of the cluster read them (below).
    auto write_window = [&](int64_t ch, const float (&x)[K - 1], float cur) {
#pragma unroll
        for (int j = 0; j < K - 2; ++j) __stcg(cst + j * C + ch, x[j + 1]);
        __stcg(cst + (K - 2) * C + ch, cur);
    };
    if (!is_k && own_v) write_window(vch, x2, cur2);
    if (r == 1 && own_qk) write_window(qkc, x1, cur1);
    const float xg = na + dt_bias;
    const float decay = expf(-expf(A_log) * (xg > 20.f ? xg : log1pf(expf(xg))));
    const float beta = 1.0f / (1.0f + expf(-nb));
    const float q_scale = 1.0f / sqrtf(static_cast<float>(dk));
    __syncthreads();  // #1: qks, vsm, zsm

    // ---- Sᵀk, Sᵀq over this thread's rows with the raw k, q; the norms' sums ----
    if (warp < 4) {
        const float q = qks[tid], k = qks[kMaxDim + tid];
        const float sq = warp_sum(q * q), sk = warp_sum(k * k), sqk = warp_sum(q * k);
        if (lane == 0) red3[warp] = make_float4(sq, sk, sqk, 0.f);
    }
    {
        float4 pu = make_float4(0.f, 0.f, 0.f, 0.f), pw = pu;
#pragma unroll
        for (int m = 0; m < V; ++m) {
            const int i = min(warp + 8 * m, kMaxDim - 1);  // rows ≥ dk: s = 0 and qks = 0
            pu = fma4(s[m], qks[kMaxDim + i], pu);
            pw = fma4(s[m], qks[i], pw);
        }
        red[warp][lane][0] = pu;
        red[warp][lane][1] = pw;
    }
    __syncthreads();  // #2: red, red3

    float4 u = make_float4(0.f, 0.f, 0.f, 0.f), wq = u;
#pragma unroll
    for (int w = 0; w < 8; ++w) {
        u = u + red[w][lane][0];
        wq = wq + red[w][lane][1];
    }
    float sq = 0.f, sk = 0.f, sqk = 0.f;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
        const float4 e = red3[w];
        sq += e.x, sk += e.y, sqk += e.z;
    }
    const float fq = q_scale * rsqrtf(sq + kL2Eps), fk = rsqrtf(sk + kL2Eps);  // q̂ = q·fq, k̂ = k·fk
    float d[4];
#pragma unroll
    for (int e = 0; e < 4; ++e)  // β(v − e^g Sᵀk̂); vsm = 0 and the sums = 0 past dv
        d[e] = colv && col0 + e < dv ? beta * (vsm[col0 + e] - decay * (fk * get(u, e))) : 0.f;
    // S ← e^g S + k̂ δᵀ, stored
#pragma unroll
    for (int m = 0; m < V; ++m) {
        const float kh_ = qks[kMaxDim + min(warp + 8 * m, kMaxDim - 1)] * fk;
        s[m].x = fmaf(kh_, d[0], decay * s[m].x);
        s[m].y = fmaf(kh_, d[1], decay * s[m].y);
        s[m].z = fmaf(kh_, d[2], decay * s[m].z);
        s[m].w = fmaf(kh_, d[3], decay * s[m].w);
    }
    if (hr_.vec) {
#pragma unroll
        for (int m = 0; m < V; ++m)
            if (colv && warp + 8 * m < dk) __stcg(reinterpret_cast<float4*>(S_tile + m * S_step), s[m]);
    } else {
#pragma unroll
        for (int m = 0; m < V; ++m)
            if (colv && warp + 8 * m < dk) store4(S_tile + m * S_step, s[m], dv - col0);
    }
    if (r > 1) {
        cluster_wait();
        if (hr == 0 && own_qk) write_window(qkc, x1, cur1);
    }
    if (warp == 0) {  // o and y of the whole head (lane l: columns 4l .. 4l + 3)
        const float kq = sqk * fq * fk;  // k̂·q̂
        float o[4], part = 0.f;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            o[e] = colv && col0 + e < dv ? fmaf(kq, d[e], decay * (fq * get(wq, e))) : 0.f;
            part = fmaf(o[e], o[e], part);
        }
        const float inv = rsqrtf(warp_sum(part) / static_cast<float>(dv) + p.eps);
        float* y = p.y + row * vd + static_cast<int64_t>(h) * dv;
#pragma unroll
        for (int e = 0; e < 4; ++e)
            if (colv && col0 + e < dv) __stcg(y + col0 + e, (__ldg(p.norm_w + col0 + e) * (o[e] * inv)) * zsm[col0 + e]);
    }
}

template <int K>
void launch_k(const GdnDecodeArgs& a, const HeadRows& hr, int64_t n_rows, cudaStream_t st) {
    const int dk = static_cast<int>(a.shape.dk);
    auto kernel = dk <= 32 ? gdn_rows_head_kernel<K, 4> : dk <= 64 ? gdn_rows_head_kernel<K, 8> : gdn_rows_head_kernel<K, 16>;
    const dim3 grid(static_cast<unsigned>(a.shape.nv), static_cast<unsigned>(n_rows));
    launch_pdl(kernel, grid, dim3(kThreads), 0, st, static_cast<unsigned>(hr.r > 1 ? hr.r : 0), a, hr);
}

}  // namespace

bool gdn_rows_head_supported(const GdnDecodeArgs& a) {
    const GdnShape& s = a.shape;
    return s.nk > 0 && s.nv > 0 && s.nv % s.nk == 0 && s.nv / s.nk <= 8 && s.dk >= 1 && s.dk <= kMaxDim &&
           s.dv >= 1 && s.dv <= kMaxDim && a.K >= 2 && a.K <= 4;
}

void gdn_rows_head(const GdnDecodeArgs& a, const int32_t* rows_dev, int64_t conv_stride, int64_t S_stride,
                   int64_t n_rows, cudaStream_t stream) {
    EMBER_CHECK(gdn_rows_head_supported(a), "gdn rows head kernel: unsupported shape");
    HeadRows hr{rows_dev, conv_stride, S_stride, static_cast<int>(a.shape.nv / a.shape.nk),
                a.shape.dv % 4 == 0 && S_stride % 4 == 0 && reinterpret_cast<uintptr_t>(a.S) % 16 == 0};
    switch (a.K) {
        case 2: launch_k<2>(a, hr, n_rows, stream); break;
        case 3: launch_k<3>(a, hr, n_rows, stream); break;
        default: launch_k<4>(a, hr, n_rows, stream); break;
    }
}

}  // namespace ember::cuda
