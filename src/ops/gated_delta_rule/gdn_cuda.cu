// Fused Gated DeltaNet step (conv + SiLU, L2 norms, gates, delta rule, gated RMSNorm) for sm_90: one launch of a
// clustered kernel for any T (contract in gdn_cuda.h; math in qwen35.md §2.6).
//
// Work split. One thread-block CLUSTER per key head kh holds every value head h with map(h) = kh (r = nv/nk of
// them) × CS column slices of each: cluster size CL = r·CS ≤ 8, grid = nk·CL blocks. Block (hr, cs) owns value
// head h = head(kh, hr) and the column groups [cs·GB, cs·GB + GB) (4 columns each) of S_h, for all dk rows.
//   2B  (nk = nv = 16, 128×128): CS = 8, 16 columns, 128 threads ×  4 rows, 128 blocks,  8 KiB of state each
//   9B  (nv = 32):               CS = 4, 32 columns, 128 threads ×  8 rows, 128 blocks, 16 KiB
//   27B (nv = 48):               CS = 2, 64 columns, 128 threads × 16 rows,  96 blocks, 32 KiB
// Thread (rg, cg) = (tid / P, tid % P) keeps the float4 S[rg + m·R][4cg .. 4cg+3], m < V, in registers across
// all T tokens: S is read once (coalesced 16-byte loads, all in flight together) and written once. 128-thread
// blocks with ≤ 255 registers: 2 blocks per SM, so that clusters of 8 fit in every GPC.
//
// Prologue: every global load is issued before any is used (a warp stalls at the first use of a pending load);
// one cluster barrier phase per launch (arrive.release after the loads, wait at t = 0).
// Per token t (2 __syncthreads, no cluster barrier):
//   (a) thread i < dk: conv + SiLU of q_i and k_i (window of K−1 inputs in shared memory); thread c < 4·GB: conv
//       + SiLU of v column c and silu(z_c); gates; warp sums of q², k², q·k; prefetch of token t+1's inputs.
//   #1
//   (c) one pass over the register tile with the raw q, k: Sᵀk and Sᵀq (shuffles, then per-warp partials in
//       shared memory); the L2 factors fq = dk^-0.5/‖q‖, fk = 1/‖k‖ are scalars applied after the sums.
//   #2
//   (d) every warp sums the partials of its lanes' column groups (redundantly: saves a barrier) and forms
//       δ = β(v − e^g fk·Sᵀk), broadcast by shuffle; S ← e^g S + (fk·k) δᵀ in registers. The last warp also forms
//       o = e^g fq·Sᵀq + (k̂·q̂)δ (= S_newᵀq̂: one pass over S) and pushes its Σo² into slot[t&3][cs] of the CS
//       blocks of this head (st.async into their shared memory, counted on their mbarrier bar[t&3]).
//   y_t = norm_w·o/rms(o)·silu(z) is written one token later (in (d) of t+1, or after the loop) by the column
//   threads: by then the remote partials have arrived. All slices sum the CS slots in the same order (bit-equal).
// Conv state: each block reads the old rows it needs in its prologue. v channels are read and written only by
// their owning block. The q/k channels of kh are read by every block of the cluster (and of no other cluster),
// and written only by cluster rank 0 after the loop, after the t = 0 wait of the barrier that every block
// arrived at (release) after those loads — so no block can see a half-updated conv state. No scratch memory.
//
// Batched rows (gated_delta_net_step_rows): grid (nk·CL, n_rows), cluster (CL, 1, 1), so a cluster never spans
// rows. The kernel's ROWS = true instantiation offsets the input / y pointers to row blockIdx.y and the state
// pointers to slot rows[2·row] (read after pdl_wait: one extra dependent load before the prologue), then runs the
// same code with T = 1. Distinct slots: no two clusters touch the same state. ROWS = false folds the offsets
// away: the single-sequence kernel's PTX is unchanged (same registers, no spills). The rows launches of
// 128-thread plans use instantiations with a smaller register budget (MINB blocks per SM; launch_k).
//
// Measured on H200 (DISABLED_DecodeBench, graph of back-to-back calls, state from HBM): decode 4.5 / 5.4 / 6.2 µs
// per layer for 2B / 9B / 27B shapes (launch ≈ 0.6 µs, prologue ≈ 2 µs of latency, one token ≈ 1.4 µs); prefill
// ≈ 1.6 µs per token (token-sequential). The state traffic alone would take 0.5 / 1.0 / 1.5 µs.
#include "ops/gated_delta_rule/gdn_cuda.h"

#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "core/check.h"
#include "core/env.h"
#include "ops/gated_delta_rule/gdn_cuda_device.cuh"
#include "ops/gated_delta_rule/gdn_rows_cuda.h"
#include "ops/linear/linear_cuda.h"

namespace ember::cuda {

namespace {

namespace cg = cooperative_groups;
using namespace gdn_detail;

constexpr int kMaxThreads = 256;        // __launch_bounds__(256, 1): up to 255 registers per thread
constexpr int kPreferredThreads = 128;  // ... so that 128-thread blocks still fit 2 per SM (clusters of 8 per GPC)
constexpr int kMaxCluster = 8;    // portable cluster size
constexpr float kL2Eps = 1e-6f;   // HF/FLA l2norm eps (fixed, not the config eps)

struct Plan {
    int r;       // value heads per key head
    int CS;      // column slices (blocks) per value head
    int CL;      // cluster size = r·CS
    int G;       // column groups of 4 per head = ⌈dv/4⌉
    int GB;      // column groups per block (≤ P ≤ 32)
    int P;       // threads per tile row, power of two ≥ GB
    int lP;      // log2(P)
    int R;       // tile rows per pass = NT / P
    int NT;      // threads per block
    int V;       // tile rows per thread (R·V ≥ dk)
    bool vec;    // S rows 16-byte aligned: float4 loads/stores
    size_t smem; // dynamic shared memory bytes
};

int next_pow2(int x) {
    int p = 1;
    while (p < x) p *= 2;
    return p;
}

Plan make_plan(const GdnDecodeArgs& a) {
    const GdnShape& s = a.shape;
    EMBER_CHECK(s.nk > 0 && s.nv > 0 && s.dk > 0 && s.dv > 0 && s.nv % s.nk == 0, "gdn cuda: bad shape");
    EMBER_CHECK(a.K >= 2 && a.K <= 4, "gdn cuda: conv kernel K=%d not in 2..4", a.K);
    Plan p{};
    p.r = static_cast<int>(s.nv / s.nk);
    EMBER_CHECK(p.r <= kMaxCluster, "gdn cuda: nv/nk = %d > %d unsupported", p.r, kMaxCluster);
    EMBER_CHECK(s.dk <= kMaxThreads && s.dv <= 4096, "gdn cuda: dk=%lld dv=%lld too large", (long long)s.dk,
                (long long)s.dv);
    const int dk = static_cast<int>(s.dk);
    p.G = static_cast<int>((s.dv + 3) / 4);
    p.CS = std::min(kMaxCluster / p.r, p.G);
    p.GB = (p.G + p.CS - 1) / p.CS;
    p.CS = (p.G + p.GB - 1) / p.GB;  // no empty slice
    EMBER_CHECK(p.GB <= 32, "gdn cuda: dv=%lld too wide for nv/nk=%d", (long long)s.dv, p.r);
    p.CL = p.r * p.CS;
    p.P = next_pow2(p.GB);
    for (p.lP = 0; (1 << p.lP) < p.P; ++p.lP) {
    }
    // Fewest rows per thread that fit the head in 128 threads (2 blocks/SM with up to 255 registers each); else
    // 256 threads (1 block/SM).
    for (int limit : {kPreferredThreads, kMaxThreads}) {
        for (int V : {4, 8, 16}) {
            p.V = V;
            // threads: the tile (P per row), one per q/k channel, one per v column, a full warp
            p.NT = std::max({p.P * next_pow2((dk + V - 1) / V), next_pow2(dk), next_pow2(4 * p.GB), 32});
            if (p.NT <= limit) break;
        }
        if (p.NT <= limit) break;
    }
    EMBER_CHECK(p.NT <= kMaxThreads, "gdn cuda: dk=%d with %d column groups per block needs > %d threads", dk, p.GB,
                kMaxThreads);
    p.R = p.NT / p.P;
    p.vec = s.dv % 4 == 0 && reinterpret_cast<uintptr_t>(a.S) % 16 == 0;
    // float4 redu[8][P][2] | float4 red3[8] | u64 bar[4] | float slot[4][8] | float qk[2][dk] | float qkp[dk][4K−1]
    // | float vst[4P][2K+7]   (layout in gdn_step_kernel; ≤ 34 KiB: no opt-in beyond 48 KiB needed)
    p.smem = sizeof(float) * (4 * (2 * 8 * p.P + 8) + 8 + 32 + 2 * dk + (4 * a.K - 1) * dk + 4 * p.P * (2 * a.K + 7));
    return p;
}

// Batched decode (gated_delta_net_step_rows): block row blockIdx.y, its sequence's state in slot rows[2·row].
struct Rows {
    const int32_t* rows;  // [n_rows][2] (slot, position)
    int64_t conv_stride;  // floats between the slots' conv states
    int64_t S_stride;     // floats between the slots' S
};

// ROWS = false: one sequence, T tokens (row = slot = 0: the offsets below fold away and the code is the
// single-sequence kernel as before). ROWS = true (launched with T = 1): row blockIdx.y of qkv / z / a / b / y,
// state slot rows[2·row].
template <int K, int V, bool ROWS, int MINB = 1>
__global__ void __launch_bounds__(MINB > 1 ? kPreferredThreads : kMaxThreads, MINB)
    gdn_step_kernel(const GdnDecodeArgs p, const int64_t T, const Plan pl, const Rows rw) {
    pdl_trigger();  // the output projection's GEMV may start prefetching its weights
    pdl_wait();
    int64_t row = 0, sslot = 0;
    if constexpr (ROWS) {  // rows may be written by an earlier kernel: read after pdl_wait
        row = blockIdx.y;
        sslot = __ldcg(rw.rows + 2 * row);
    }
    constexpr int W8 = kMaxThreads / 32;  // reductions always sum W8 warp slots (unused ones hold zeros): no branches
    extern __shared__ float4 smem4[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;
    const int w_o = nwarps - 1;  // the warp that forms o and pushes Σo²
    const int nk = static_cast<int>(p.shape.nk), nv = static_cast<int>(p.shape.nv);
    const int dk = static_cast<int>(p.shape.dk), dv = static_cast<int>(p.shape.dv);
    const int64_t kd = static_cast<int64_t>(nk) * dk, vd = static_cast<int64_t>(nv) * dv, C = 2 * kd + vd;
    auto cst = [&]() { return p.conv_state + sslot * rw.conv_stride; };  // this sequence's conv state

    const int rank = static_cast<int>(cg::this_cluster().block_rank());
    const int kh = blockIdx.x / pl.CL, hr = rank / pl.CS, cs = rank % pl.CS;
    const int h = p.shape.map == KeyHeadMap::GROUPED ? kh * pl.r + hr : hr * nk + kh;

    // Shared memory. Per-thread conv weights/windows and per-column values live here rather than in registers
    // (≈ 50 registers in every thread otherwise → spills at 2 blocks/SM). Per-thread rows have an odd,
    // compile-time stride: one base register plus immediate offsets, and a warp's accesses hit distinct banks.
    constexpr int QS = 4 * K - 1;  // wq[K] | wk[K] | q window[K−1] | k window[K−1]
    constexpr int VR = 2 * K + 7;  // per local v column: {VW.. VO} (+1: odd stride)
    constexpr int VW = 0, VX = K, VN = 2 * K - 1, VV = 2 * K, VZ = 2 * K + 2, VO = 2 * K + 4;  // VV/VZ/VO: ×2
    float4* redu = smem4;                                    // [W8][P][2]  partial (Sᵀk, Sᵀq) per column group
    float4* red3 = redu + 2 * W8 * pl.P;                     // [W8]        partial (Σq², Σk², Σqk)
    uint64_t* bar = reinterpret_cast<uint64_t*>(red3 + W8);  // [4]         mbarriers of slot[0..3]
    float* slot = reinterpret_cast<float*>(bar + 4);         // [4][8]      Σo² of each slice of this head
    float* qk_s = slot + 32;                                 // [2][dk]     silu(conv) of q | k (unnormalised)
    float* vst = qk_s + 2 * dk + dk * QS;                    // [4P][VR]    this block's v columns
    float* qkp = qk_s + 2 * dk + tid * QS;                   // this thread's q/k conv data (tid < dk)
    auto QW = [&](int j) -> float& { return qkp[j]; };
    auto KW = [&](int j) -> float& { return qkp[K + j]; };
    auto QX = [&](int j) -> float& { return qkp[2 * K + j]; };  // oldest first
    auto KX = [&](int j) -> float& { return qkp[3 * K - 1 + j]; };
    auto VP = [&](int lc, int e) -> float& { return vst[lc * VR + e]; };  // local column lc

    // ---- prologue: issue every load first (one memory round trip), then stash them in shared memory ----
    const int cgi = tid & (pl.P - 1), rg = tid >> pl.lP;  // tile column group (== lane % P) and row group
    const int gcg = cs * pl.GB + cgi, col0 = 4 * gcg;
    const bool colv = cgi < pl.GB && gcg < pl.G;
    float* Sh = p.S + sslot * rw.S_stride + static_cast<int64_t>(h) * dk * dv;
    // A warp stalls at the first instruction that uses a pending load, so nothing below consumes a loaded value
    // before cluster_arrive(): predicated loads into zeroed registers, clamped addresses, masks applied later.
    float4 s[V];
    const float* S_tile = Sh + static_cast<int64_t>(rg) * dv + col0;  // row rg + m·R at S_tile + m·R·dv
    const int64_t S_step = static_cast<int64_t>(pl.R) * dv;
#pragma unroll
    for (int m = 0; m < V; ++m) s[m] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (pl.vec) {  // (the two loops keep the V loads back to back: no per-load branches)
#pragma unroll
        for (int m = 0; m < V; ++m)
            if (colv && rg + m * pl.R < dk) s[m] = __ldcg(reinterpret_cast<const float4*>(S_tile + m * S_step));
    } else {
#pragma unroll
        for (int m = 0; m < V; ++m)
            if (colv && rg + m * pl.R < dk) s[m] = load4(S_tile + m * S_step, dv - col0);
    }
    // q/k channel i = tid (threads ≥ dk load channel 0 and never use it)
    const bool own_qk = tid < dk;
    const int64_t qc = static_cast<int64_t>(kh) * dk + (own_qk ? tid : 0), kc = kd + qc;
    float wq[K], wk[K], xq[K - 1], xk[K - 1];
#pragma unroll
    for (int j = 0; j < K; ++j) {
        wq[j] = __ldg(p.conv_w + qc * K + j);
        wk[j] = __ldg(p.conv_w + kc * K + j);
        if (j < K - 1) {
            xq[j] = __ldcg(cst() + j * C + qc);
            xk[j] = __ldcg(cst() + j * C + kc);
        }
    }
    // Per-token inputs (pointers advanced each token): q/k for thread tid; v/z of local column lc = tid for the
    // threads tid < 4·GB (the v conv, silu(z) and y of one column each).
    const int col_base = 4 * cs * pl.GB, nvc = 4 * pl.GB, nvw = (nvc + 31) / 32;  // columns; warps holding them
    const bool own_v = tid < nvc && col_base + tid < dv;
    const int vcol = col_base + (own_v ? tid : 0);
    const int64_t vch = 2 * kd + static_cast<int64_t>(h) * dv + vcol;  // conv channel of column vcol
    const int64_t zo = static_cast<int64_t>(h) * dv + vcol;            // z / y offset of column vcol
    const float* in_qkv = p.qkv + row * C;
    const float* in_z = p.z + row * vd + zo;
    float nxq = __ldg(in_qkv + qc), nxk = __ldg(in_qkv + kc), nxv = 0.f, nz = 0.f;
    if (own_v) {
        nxv = __ldg(in_qkv + vch);
        nz = __ldg(in_z);
    }
    // v-column data staged by all threads: element e = (local column lc, field f); f < K: conv weight f;
    // f < 2K−1: window row f−K; f = 2K−1: norm weight — f is also the offset in the VP layout (VW, VX, VN).
    constexpr int VF = 2 * K, VU = 4;  // fields per column; loads in flight per thread
    const int n_vel = nvc * VF;
    auto v_src = [&](int e) -> const float* {  // branch-free address; nullptr for columns past dv
        const int lc = e / VF, f = e % VF, col = col_base + lc;
        const int64_t ch = 2 * kd + static_cast<int64_t>(h) * dv + col;
        const float* src = f < K ? p.conv_w + ch * K + f
                                 : (f < 2 * K - 1 ? cst() + (f - K) * C + ch : p.norm_w + col);
        return col < dv ? src : nullptr;
    };
    auto v_dst = [&](int e) -> float& { return vst[(e / VF) * VR + e % VF]; };
    float vstage[VU];
    unsigned vvalid = 0;  // bit u: element tid + u·NT exists and its column is < dv
#pragma unroll
    for (int u = 0; u < VU; ++u) {
        const float* src = tid + u * pl.NT < n_vel ? v_src(tid + u * pl.NT) : nullptr;
        vvalid |= src ? 1u << u : 0u;
        vstage[u] = __ldcg(src ? src : p.norm_w);
    }
    const float A_log = __ldg(p.A_log + h), dt_bias = __ldg(p.dt_bias + h);
    float na = __ldg(p.a + row * nv + h), nb = __ldg(p.b + row * nv + h);
    const float q_scale = 1.0f / sqrtf(static_cast<float>(dk)), inv_dv = 1.0f / static_cast<float>(dv);

    if (tid == 0) {
#pragma unroll
        for (int b = 0; b < 4; ++b) mbar_init(&bar[b], 1);  // per phase: 1 local arrive (+expect_tx) + CS·4 bytes
        fence_mbar_init();
    }
    if (tid < 32) slot[tid] = 0.f;  // slots ≥ CS stay 0 (they are summed unconditionally)
    for (int e = tid; e < 2 * W8 * pl.P; e += pl.NT)
        if (e / (2 * pl.P) >= nwarps) redu[e] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (tid < W8 && tid >= nwarps) red3[tid] = make_float4(0.f, 0.f, 0.f, 0.f);
    // The one cluster barrier phase of the launch (waited for at t = 0): every block has started and initialised
    // its mbarriers and slots (before any remote store into it), and has read its old conv-state rows (before
    // rank 0 overwrites the q/k rows at the end). Release orders this thread's loads and stores above; it waits
    // for the loads, which the stores to shared memory below would do anyway.
    cluster_arrive();
    if (own_qk) {
#pragma unroll
        for (int j = 0; j < K; ++j) {
            QW(j) = wq[j];
            KW(j) = wk[j];
            if (j < K - 1) {
                QX(j) = xq[j];
                KX(j) = xk[j];
            }
        }
    }
    const float A = expf(A_log);
#pragma unroll
    for (int u = 0; u < VU; ++u)
        if (tid + u * pl.NT < n_vel) v_dst(tid + u * pl.NT) = vvalid >> u & 1u ? vstage[u] : 0.f;
    for (int e = VU * pl.NT + tid; e < n_vel; e += pl.NT) {  // only when NT < 4·GB·2K / VU (tiny heads)
        const float* src = v_src(e);
        v_dst(e) = src ? __ldcg(src) : 0.f;
    }
    __syncthreads();  // staged data and zeroed slots visible

    // y of token tt (threads tid < 4·GB, one column each) from Σo² of all CS slices of this head in slot[tt & 3].
    // Called one token late (and after the state stores at the end), so the remote stores have long arrived.
    auto finish_y = [&](int64_t tt) {
        const int b = static_cast<int>(tt & 3), pb = static_cast<int>(tt & 1);
        mbar_wait(&bar[b], static_cast<unsigned>(tt >> 2) & 1u);
        if (own_v) {
            float tot = 0.f;
#pragma unroll
            for (int c = 0; c < kMaxCluster; ++c) tot += slot[b * 8 + c];  // same order in every slice
            const float inv = rsqrtf(tot * inv_dv + p.eps);
            __stcg(p.y + (row + tt) * vd + zo, (VP(tid, VN) * (VP(tid, VO + pb) * inv)) * VP(tid, VZ + pb));
        }
    };

    for (int64_t t = 0; t < T; ++t) {
        const int par = static_cast<int>(t & 1), b4 = static_cast<int>(t & 3);

        // (a) conv + SiLU of this token (window = the K−1 previous inputs, then this one); gates; prefetch t+1
        float q = 0.f, k = 0.f;
        if (own_qk) {
            float w_[2][K], x_[2][K - 1];
#pragma unroll
            for (int j = 0; j < K; ++j) {
                w_[0][j] = QW(j);
                w_[1][j] = KW(j);
                if (j < K - 1) {
                    x_[0][j] = QX(j);
                    x_[1][j] = KX(j);
                }
            }
            float aq = w_[0][K - 1] * nxq, ak = w_[1][K - 1] * nxk;
#pragma unroll
            for (int j = 0; j < K - 1; ++j) {
                aq = fmaf(w_[0][j], x_[0][j], aq);
                ak = fmaf(w_[1][j], x_[1][j], ak);
            }
#pragma unroll
            for (int j = 0; j < K - 2; ++j) {
                QX(j) = x_[0][j + 1];
                KX(j) = x_[1][j + 1];
            }
            QX(K - 2) = nxq;
            KX(K - 2) = nxk;
            q = silu(aq);
            k = silu(ak);
            qk_s[tid] = q;
            qk_s[dk + tid] = k;
        }
        if (own_v) {
            float w_[K], x_[K - 1];
#pragma unroll
            for (int j = 0; j < K; ++j) {
                w_[j] = VP(tid, VW + j);
                if (j < K - 1) x_[j] = VP(tid, VX + j);
            }
            float acc = w_[K - 1] * nxv;
#pragma unroll
            for (int j = 0; j < K - 1; ++j) acc = fmaf(w_[j], x_[j], acc);
#pragma unroll
            for (int j = 0; j < K - 2; ++j) VP(tid, VX + j) = x_[j + 1];
            VP(tid, VX + K - 2) = nxv;
            VP(tid, VV + par) = silu(acc);  // read by every warp in (d); double-buffered
            VP(tid, VZ + par) = silu(nz);
        }
        // gates: g = −exp(A_log)·softplus(a + dt_bias) (torch threshold 20), β = σ(b) — accurate functions
        const float xg = na + dt_bias;
        const float decay = expf(-A * (xg > 20.f ? xg : log1pf(expf(xg))));
        const float beta = 1.0f / (1.0f + expf(-nb));
        pin(decay);  // computed here, where the other warps' conv hides it, not sunk past barrier #1
        pin(beta);
        if (t + 1 < T) {
            in_qkv += C;
            in_z += vd;
            nxq = __ldg(in_qkv + qc);
            nxk = __ldg(in_qkv + kc);
            if (own_v) {
                nxv = __ldg(in_qkv + vch);
                nz = __ldg(in_z);
            }
            na = __ldg(p.a + (t + 1) * nv + h);
            nb = __ldg(p.b + (t + 1) * nv + h);
        }
        {
            const float sq = warp_sum(q * q), sk = warp_sum(k * k), sqk = warp_sum(q * k);
            if (lane == 0) red3[warp] = make_float4(sq, sk, sqk, 0.f);
        }
        __syncthreads();  // #1: qk_s, red3, VP(·, VV + par) written
        if (t == 0) cluster_wait();

        // (c) Sᵀk and Sᵀq with the raw (unnormalised) k, q over this thread's rows; the L2 factors are scalars
        // applied after the reduction, off the critical path. Rows ≥ dk: s = 0, k = 0 (clamped, branch-free).
        float4 pu = make_float4(0.f, 0.f, 0.f, 0.f), pw = pu;
        float kr[V];
#pragma unroll
        for (int m = 0; m < V; ++m) {
            const int i = rg + m * pl.R, ic = min(i, dk - 1);
            kr[m] = qk_s[dk + ic] * (i < dk ? 1.f : 0.f);
            pu = fma4(s[m], kr[m], pu);
            pw = fma4(s[m], qk_s[ic], pw);
        }
        for (int o = pl.P; o < 32; o <<= 1) {  // lanes with the same column group (lane % P) hold the same columns
            pu.x += __shfl_xor_sync(0xffffffffu, pu.x, o);
            pu.y += __shfl_xor_sync(0xffffffffu, pu.y, o);
            pu.z += __shfl_xor_sync(0xffffffffu, pu.z, o);
            pu.w += __shfl_xor_sync(0xffffffffu, pu.w, o);
            pw.x += __shfl_xor_sync(0xffffffffu, pw.x, o);
            pw.y += __shfl_xor_sync(0xffffffffu, pw.y, o);
            pw.z += __shfl_xor_sync(0xffffffffu, pw.z, o);
            pw.w += __shfl_xor_sync(0xffffffffu, pw.w, o);
        }
        if (lane < pl.P) {
            redu[2 * (warp * pl.P + lane)] = pu;
            redu[2 * (warp * pl.P + lane) + 1] = pw;
        }
        float sq = 0.f, sk = 0.f, sqk = 0.f;
#pragma unroll
        for (int w = 0; w < W8; ++w) {
            const float4 e = red3[w];
            sq += e.x;
            sk += e.y;
            sqk += e.z;
        }
        const float fq = q_scale * rsqrtf(sq + kL2Eps), fk = rsqrtf(sk + kL2Eps);  // q̂ = q·fq, k̂ = k·fk
        pin(fq);
        pin(fk);
        __syncthreads();  // #2: redu written

        // (d) every warp: δ for column group (lane % P) from the summed partials (redundant across warps: saves
        // a barrier), broadcast by shuffle; warp w_o also forms o = e^g S_oldᵀq̂ + (k̂·q̂)δ and pushes Σo².
        float4 d4 = make_float4(0.f, 0.f, 0.f, 0.f);
        float part = 0.f;
        if (lane < pl.P && colv) {  // this lane's group cgi = lane is a valid one
            float4 u = d4, w4 = d4;
#pragma unroll
            for (int w = 0; w < W8; ++w) {
                u = u + redu[2 * (w * pl.P + lane)];
                w4 = w4 + redu[2 * (w * pl.P + lane) + 1];
            }
            const float kq = sqk * fq * fk;  // k̂·q̂
            float d[4];
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const bool ok = col0 + c < dv;
                d[c] = ok ? beta * (VP(4 * lane + c, VV + par) - decay * (fk * get(u, c))) : 0.f;  // β(v − e^g Sᵀk̂)
                if (warp == w_o) {
                    const float o = ok ? fmaf(kq, d[c], decay * (fq * get(w4, c))) : 0.f;
                    VP(4 * lane + c, VO + par) = o;
                    part = fmaf(o, o, part);
                }
            }
            d4 = make_float4(d[0], d[1], d[2], d[3]);
        }
        d4.x = __shfl_sync(0xffffffffu, d4.x, lane & (pl.P - 1));
        d4.y = __shfl_sync(0xffffffffu, d4.y, lane & (pl.P - 1));
        d4.z = __shfl_sync(0xffffffffu, d4.z, lane & (pl.P - 1));
        d4.w = __shfl_sync(0xffffffffu, d4.w, lane & (pl.P - 1));
        // S ← e^g S + k̂ δᵀ
#pragma unroll
        for (int m = 0; m < V; ++m) {
            const float kh_ = kr[m] * fk;
            s[m].x = fmaf(kh_, d4.x, decay * s[m].x);
            s[m].y = fmaf(kh_, d4.y, decay * s[m].y);
            s[m].z = fmaf(kh_, d4.z, decay * s[m].z);
            s[m].w = fmaf(kh_, d4.w, decay * s[m].w);
        }
        if (warp < nvw && t > 0) finish_y(t - 1);
        if (warp == w_o) {
            // Push Σo² of this slice into slot[t&3][cs] of every block of this head (4 buffers): a sender pushes
            // t+4 after its barrier #1 of t+4, after its y threads waited (token t+3) for the pushes of t+2 —
            // ours of t+2 follow our barrier #1 of t+2, after our y threads read slot[t&3] for y_t (token t+1).
            // So slot[t&3] is free again, and our expect_tx on bar[t&3] at t+4 follows our wait for its phase t.
            part = warp_sum(part);
            if (lane == 0) mbar_arrive_expect_tx(&bar[b4], 4u * pl.CS);
            if (lane < pl.CS) st_async_f32(slot + b4 * 8 + cs, &bar[b4], hr * pl.CS + lane, part);
        }
    }
    // ---- write back (before the last y, so that these stores overlap its remote round trip): state tile;
    // conv state = the windows (rows T .. T+K−2 of [state ; x]) ----
    float* S_out = Sh + static_cast<int64_t>(rg) * dv + col0;
    if (pl.vec) {
#pragma unroll
        for (int m = 0; m < V; ++m)
            if (colv && rg + m * pl.R < dk) __stcg(reinterpret_cast<float4*>(S_out + m * S_step), s[m]);
    } else {
#pragma unroll
        for (int m = 0; m < V; ++m)
            if (colv && rg + m * pl.R < dk) store4(S_out + m * S_step, s[m], dv - col0);
    }
    if (rank == 0 && own_qk) {  // every block of the cluster read its old rows before the barrier waited at t = 0
#pragma unroll
        for (int j = 0; j < K - 1; ++j) {
            __stcg(cst() + j * C + qc, QX(j));
            __stcg(cst() + j * C + kc, KX(j));
        }
    }
    if (own_v) {
#pragma unroll
        for (int j = 0; j < K - 1; ++j) __stcg(cst() + j * C + vch, VP(tid, VX + j));
    }
    __syncthreads();                     // VO of token T−1 (written by warp w_o)
    if (warp < nvw) finish_y(T - 1);  // also: no remote store into this block is in flight any more at exit
}

// n_rows = 0: single sequence (grid.y = 1, the ROWS = false kernel); else batched rows (grid.y = n_rows, T = 1).
template <int K>
void launch_k(const GdnDecodeArgs& a, int64_t T, const Plan& pl, const Rows& rw, int64_t n_rows, cudaStream_t st) {
    const dim3 grid(static_cast<unsigned>(a.shape.nk * pl.CL), static_cast<unsigned>(n_rows > 0 ? n_rows : 1)),
        block(static_cast<unsigned>(pl.NT));
    auto pick = [&](auto rows_tag) {
        constexpr bool R = decltype(rows_tag)::value;
        return pl.V == 4 ? gdn_step_kernel<K, 4, R> : pl.V == 8 ? gdn_step_kernel<K, 8, R> : gdn_step_kernel<K, 16, R>;
    };
    auto kernel = n_rows > 0 ? pick(std::true_type{}) : pick(std::false_type{});
    // Batched rows of a 128-thread plan: an instantiation compiled for more resident blocks (V = 4: 5 per SM, ≤ 96
    // registers; V = 8: 4 per SM, ≤ 128), since the rows grid is n_rows × nk·CL small blocks whose time is set by
    // how many run at once, not by one block's latency (H100, ember bench --batch 64: 2B 12,700 → 13,262 tok/s,
    // 9B 5,100 → 5,597; 4 blocks at V = 4: 12,528, 3 at V = 8: 5,504). EMBER_GDN_ROWS_MINB=1: the single-sequence
    // register budget, for A/B.
    static const bool dense = env_int("EMBER_GDN_ROWS_MINB", 0) != 1;
    if (n_rows > 0 && dense && pl.NT <= kPreferredThreads) {
        if (pl.V == 4) kernel = gdn_step_kernel<K, 4, true, 5>;
        if (pl.V == 8) kernel = gdn_step_kernel<K, 8, true, 4>;
    }
    // smem ≤ 34 KiB: below the 48 KiB default, no attribute call needed
    launch_pdl(kernel, grid, block, pl.smem, st, static_cast<unsigned>(pl.CL), a, T, pl, rw);
}

void check_pointers(const GdnDecodeArgs& args) {
    EMBER_CHECK(args.qkv && args.z && args.a && args.b && args.conv_w && args.A_log && args.dt_bias && args.norm_w &&
                    args.conv_state && args.S && args.y,
                "gdn cuda: null pointer");
}

void launch(const GdnDecodeArgs& args, int64_t T, const Plan& pl, const Rows& rw, int64_t n_rows,
            cudaStream_t stream) {
    switch (args.K) {
        case 2: launch_k<2>(args, T, pl, rw, n_rows, stream); break;
        case 3: launch_k<3>(args, T, pl, rw, n_rows, stream); break;
        default: launch_k<4>(args, T, pl, rw, n_rows, stream); break;
    }
}

}  // namespace

void gated_delta_net_step(const GdnDecodeArgs& args, int64_t T, cudaStream_t stream) {
    EMBER_CHECK(T >= 0, "gdn cuda: T=%lld", (long long)T);
    const Plan pl = make_plan(args);
    if (T == 0) return;
    check_pointers(args);
    launch(args, T, pl, Rows{nullptr, 0, 0}, 0, stream);
}

void gated_delta_net_step_rows(const GdnDecodeArgs& args, const int32_t* rows_dev, int64_t conv_stride,
                               int64_t S_stride, int64_t n_rows, cudaStream_t stream, GdnRowsKernel kernel) {
    EMBER_CHECK(n_rows >= 0 && n_rows <= 65535, "gdn cuda: n_rows=%lld not in 0..65535", (long long)n_rows);
    Plan pl = make_plan(args);
    const GdnShape& s = args.shape;
    const int64_t conv_floats = (args.K - 1) * (2 * s.nk * s.dk + s.nv * s.dv), S_floats = s.nv * s.dk * s.dv;
    EMBER_CHECK(conv_stride >= conv_floats && S_stride >= S_floats,
                "gdn cuda: slot strides conv=%lld S=%lld below the state sizes %lld, %lld", (long long)conv_stride,
                (long long)S_stride, (long long)conv_floats, (long long)S_floats);
    if (n_rows == 0) return;
    check_pointers(args);
    EMBER_CHECK(rows_dev != nullptr, "gdn cuda: null rows");
    if (kernel == GdnRowsKernel::AUTO) {  // the head kernel once its blocks (nearly) fill every SM
        static const int forced = env_is("EMBER_GDN_ROWS", "head") ? 2 : env_is("EMBER_GDN_ROWS", "slice") ? 1 : 0;
        kernel = forced == 2 ? GdnRowsKernel::HEAD
                 : forced == 1 ? GdnRowsKernel::SLICE
                 : 16 * n_rows * s.nv >= 15 * int64_t(detail::sm_count()) ? GdnRowsKernel::HEAD
                                                                           : GdnRowsKernel::SLICE;
    }
    if (kernel == GdnRowsKernel::HEAD && gdn_rows_head_supported(args)) {
        gdn_rows_head(args, rows_dev, conv_stride, S_stride, n_rows, stream);
        return;
    }
    pl.vec = pl.vec && S_stride % 4 == 0;  // every slot's S 16-byte aligned, not only slot 0's
    launch(args, 1, pl, Rows{rows_dev, conv_stride, S_stride}, n_rows, stream);
}

}  // namespace ember::cuda
