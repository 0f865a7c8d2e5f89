// Chunked GDN prefill, kernel 1 of 3 (gdn_chunked_cuda.h): per (chunk of 64 tokens, value head h), everything
// that does not depend on the recurrent state — conv + SiLU, L2 norms, gates, the within-chunk decays, the Gram
// matrices, (I + A)⁻¹ and the WY right-hand sides — written to the piece's workspace (layout: gdn_chunked.cuh).
//
// Block of 512 threads (16 warps: 4 per SM sub-partition, the latency hiding a one-block-per-SM kernel has),
// shared memory (DK = DV = 128: 146 KB):
//   Qs, Ks [64][DK+4]  q, k of key head map(h) after conv + SiLU, then L2-normalised (q̂ scaled by dk^-0.5)
//   Vs     [64][DV+8]  v of head h after conv + SiLU
//   As, Ts [64][68]    A = strict_lower(β_i k̂_i·k̂_j D_ij), then (I + A)⁻¹
//   Hs     [3][2dk+dv] the three inputs before the chunk (previous chunk, piece, or the conv state)
// Row strides ≡ 4 (mod 32) for matrices read as MMA A operands or as [n][k] B operands, ≡ 8 for [k][n] B
// operands: the fragment loads of a warp hit 32 distinct banks (the [k][n] use of Ks has 2-way conflicts).
// Steps (one __syncthreads between each; Piece::stop_after cuts the kernel short for the benchmark):
//   1. conv + SiLU. Rows 16-byte aligned (Qwen3.5 shapes): the raw inputs copied into Qs | Ks | Vs by cp.async
//      (all in flight at once), then one thread per channel convolves its column in place, from the bottom
//      up in segments of 16 rows (a segment's inputs are read before it is overwritten, the rows above are
//      still raw). Else: per (channel, 16 tokens) from global memory. Gates g = −e^{A_log}·softplus(a + dt_bias),
//      β = σ(b) (as the step kernel) meanwhile.
//   2. L2 norms (8 rows per warp, their sums in flight together); γ = cumsum g in fp64 (a warp scan), so that
//      γ_i − γ_j keeps its digits
//   3. q̂, k̂ (one value head per key head writes them), e^γ and e^{γ_last − γ} to the workspace
//   4. Gram products on tensor cores (gdn_mma.cuh), tiles on or below the diagonal only, 10 tile columns per
//      sub-partition (gram_unit); epilogue: A (shared memory) and P = lower(Q̂K̂ᵀ ⊙ D) (workspace)
//   5. (I + A)⁻¹ by blocked forward substitution on 16×16 blocks: the 4 diagonal blocks by 64 threads (one
//      column each, 16 steps) while the others scale K̂ by β e^γ and V by β; then the block sub-diagonals
//      d = 1, 2, 3: X_ij = −X_ii Σ_{j ≤ m < i} A_im X_mj (fp32 FMA)
//   6. W = (I + A)⁻¹(β e^γ ⊙ K̂), U = (I + A)⁻¹(β ⊙ V) on tensor cores (k-steps stop at the diagonal); warp =
//      (16-row tile, column half of W or U), rows (0, 3) and (1, 2) of the triangle on one sub-partition
// Rows past the chunk's tokens are zeros everywhere (β = 0, g = 0), so the ragged last chunk needs no branch
// in the later kernels.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "ops/gated_delta_rule/gdn_chunked.cuh"
#include "ops/gated_delta_rule/gdn_cuda_device.cuh"
#include "ops/gated_delta_rule/gdn_mma.cuh"

namespace ember::cuda::gdn_chunked {

namespace {

using namespace gdn_detail;
using namespace gdn_mma;

constexpr int kThreads = 512;
constexpr int LT = kBT + 4;  // stride of the 64×64 matrices

template <int DK, int DV>
constexpr size_t prep_smem_floats() {
    // Qs, Ks | Vs | As, Ts | Ys [3][256] | g, β, βe^γ [64] | γ [64] fp64 | Hs [3][2·DK + DV]
    return 2 * kBT * (DK + 4) + kBT * (DV + 8) + 2 * kBT * LT + 3 * 256 + 3 * kBT + 2 * kBT + 3 * (2 * DK + DV);
}

// The Gram products' work of warp w = 4q + j (j: its sub-partition): matrix (0: K̂K̂ᵀ, 1: Q̂K̂ᵀ), 16-row tile mi,
// first 8-column tile and tile count. Row tile mi has 2(mi + 1) tiles on or left of the diagonal block: 40 in
// all, 10 per sub-partition (q = 0, 1: four, q = 2: two, q = 3: none).
struct GramUnit {
    int which, mi, t0, cnt;
};
__device__ __forceinline__ GramUnit gram_unit(int w) {
    const int q = w >> 2, j = w & 3;
    if (q < 2) return {q, j < 3 ? j + 1 : 3, j < 3 ? 0 : 4, 4};
    if (q == 2) return {j >> 1, (j & 1) ? 2 : 0, (j & 1) ? 4 : 0, 2};
    return {0, 0, 0, 0};
}

// out[16·mi + ·, n0 + ·] = Ts[16·mi + ·, 0 .. 8·ks) · B[0 .. 8·ks, n0 + ·) for NT tiles of 8 columns (3xTF32),
// B row-major in shared memory, out row-major in global memory.
template <int NT>
__device__ __forceinline__ void rhs_product(const float* Ts, const float* B, int ldb, int mi, int n0, int ks, float* out,
                                            int ldo) {
    Acc<1, NT> acc;
    zero(acc);
    for (int kk = 0; kk < ks; ++kk) mma3_kstep<1, NT>(acc, acc, acc, RowMajor{Ts, LT}, RowMajor{B, ldb}, 16 * mi, n0, 8 * kk);
    for_each_acc<1, NT>([&](int, int ni, int r) {
        __stcg(out + (16 * mi + acc_row(0, r)) * ldo + n0 + acc_col(ni, r), acc[0][ni][r]);
    });
}

template <int DK, int DV>
__global__ void __launch_bounds__(kThreads, 1) gdn_prep_kernel(const GdnDecodeArgs p, const Piece pc) {
    pdl_trigger();
    pdl_wait();
    constexpr int LQ = DK + 4, LV = DV + 8;
    extern __shared__ float4 smem4[];
    float* Qs = reinterpret_cast<float*>(smem4);
    float* Ks = Qs + kBT * LQ;
    float* Vs = Ks + kBT * LQ;
    float* As = Vs + kBT * LV;
    float* Ts = As + kBT * LT;
    float* Ys = Ts + kBT * LT;  // [3][16][16] block products of step 5
    float* gs = Ys + 3 * 256;   // g
    float* bs = gs + kBT;       // β
    float* ebs = bs + kBT;      // β e^γ
    double* gam = reinterpret_cast<double*>(ebs + kBT);  // γ (offset is a multiple of 4 floats)
    float* Hs = reinterpret_cast<float*>(gam + kBT);     // [3][2dk + dv]

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int n = blockIdx.x, h = blockIdx.y;
    const GdnShape& s = p.shape;
    const int nk = static_cast<int>(s.nk), nv = static_cast<int>(s.nv), dk = static_cast<int>(s.dk),
              dv = static_cast<int>(s.dv), K = p.K;
    const int kh = key_head_of(s, h);
    const int64_t kd = static_cast<int64_t>(nk) * dk, C = 2 * kd + static_cast<int64_t>(nv) * dv;
    const int64_t tc0 = pc.t0 + static_cast<int64_t>(n) * kBT;                          // chunk's first token
    const int c = static_cast<int>(std::min<int64_t>(kBT, pc.T - static_cast<int64_t>(n) * kBT));  // its tokens

    // ---- 1. conv + SiLU (w[3] multiplies the current token; taps before a K < 4 kernel are 0) ----
    const int nch = 2 * dk + dv;
    auto column = [&](int ch, int64_t& cg, float*& dst, int& ld) {  // channel ch of this head: source, column
        if (ch < dk) {
            cg = static_cast<int64_t>(kh) * dk + ch, dst = Qs + ch, ld = LQ;
        } else if (ch < 2 * dk) {
            cg = kd + static_cast<int64_t>(kh) * dk + (ch - dk), dst = Ks + (ch - dk), ld = LQ;
        } else {
            cg = 2 * kd + static_cast<int64_t>(h) * dv + (ch - 2 * dk), dst = Vs + (ch - 2 * dk), ld = LV;
        }
    };
    auto taps = [&](int64_t cg, float (&w)[4]) {
#pragma unroll
        for (int j = 0; j < 4; ++j) w[j] = j >= 4 - K ? __ldg(p.conv_w + cg * K + j - (4 - K)) : 0.f;
    };
    auto input = [&](int64_t tg, int64_t cg) -> float {  // row tg of [conv_state ; qkv]; 0 before the state
        return tg >= 0 ? __ldg(p.qkv + tg * C + cg)
                       : (tg >= -(K - 1) ? __ldcg(p.conv_state + (K - 1 + tg) * C + cg) : 0.f);
    };
    if (pc.vec) {
        const float* row0 = p.qkv + tc0 * C;  // the chunk's first token
        if (dk == DK && dv == DV) {            // (Qwen3.5 shapes) compile-time copy loops
            copy_tile_async<kBT, DK, LQ, kThreads>(Qs, row0 + static_cast<int64_t>(kh) * dk, C, tid, c);
            copy_tile_async<kBT, DK, LQ, kThreads>(Ks, row0 + kd + static_cast<int64_t>(kh) * dk, C, tid, c);
            copy_tile_async<kBT, DV, LV, kThreads>(Vs, row0 + 2 * kd + static_cast<int64_t>(h) * dv, C, tid, c);
        } else {
            const int n4 = nch / 4;  // 16-byte pieces per token (dk, dv % 4 == 0)
            for (int e = tid; e < c * n4; e += kThreads) {
                const int i = e / n4, ch = 4 * (e % n4);
                int64_t cg;
                float* dst;
                int ld;
                column(ch, cg, dst, ld);
                cp_async16(dst + i * ld, row0 + i * C + cg);
            }
        }
        cp_async_commit();
        for (int e = tid; e < 3 * nch; e += kThreads) {  // the three older inputs
            int64_t cg;
            float* dst;
            int ld;
            column(e % nch, cg, dst, ld);
            Hs[e] = input(tc0 - 3 + e / nch, cg);
        }
        for (int e = tid; e < (kBT - c) * nch; e += kThreads) {  // rows past the chunk's tokens
            int64_t cg;
            float* dst;
            int ld;
            column(e % nch, cg, dst, ld);
            dst[(c + e / nch) * ld] = 0.f;
        }
    } else {  // per (channel, 16 tokens) from global memory, two items in flight per thread
        struct Item {
            int64_t cg;
            float* dst;
            int ld, i0;
            float w[4], x[19];  // taps; inputs of rows i0 − 3 .. i0 + 15 (0 past the chunk's tokens)
        };
        auto load = [&](int item, Item& it) {
            column(item % nch, it.cg, it.dst, it.ld);
            it.i0 = 16 * (item / nch);
            taps(it.cg, it.w);
#pragma unroll
            for (int j = 0; j < 19; ++j) it.x[j] = it.i0 + j - 3 < c ? input(tc0 + it.i0 - 3 + j, it.cg) : 0.f;
        };
        auto store = [&](const Item& it) {
#pragma unroll
            for (int i = 0; i < 16; ++i) {
                const float a = fmaf(it.w[0], it.x[i], fmaf(it.w[1], it.x[i + 1], fmaf(it.w[2], it.x[i + 2], it.w[3] * it.x[i + 3])));
                it.dst[(it.i0 + i) * it.ld] = it.i0 + i < c ? silu(a) : 0.f;
            }
        };
        for (int item = tid; item < 4 * nch; item += 2 * kThreads) {
            Item a, b;
            const bool two = item + kThreads < 4 * nch;
            load(item, a);
            if (two) load(item + kThreads, b);
            store(a);
            if (two) store(b);
        }
    }
    for (int e = tid; e < kBT * (DK - dk); e += kThreads) {  // padding columns
        const int i = e / (DK - dk), d = dk + e % (DK - dk);
        Qs[i * LQ + d] = 0.f;
        Ks[i * LQ + d] = 0.f;
    }
    for (int e = tid; e < kBT * (DV - dv); e += kThreads) Vs[(e / (DV - dv)) * LV + dv + e % (DV - dv)] = 0.f;
    if (tid < kBT) {  // gates (accurate functions, as the step kernel); tokens past the chunk: g = 0, β = 0
        float g = 0.f, beta = 0.f;
        if (tid < c) {
            const int64_t t = tc0 + tid;
            const float xg = __ldg(p.a + t * nv + h) + __ldg(p.dt_bias + h);
            g = -expf(__ldg(p.A_log + h)) * (xg > 20.f ? xg : log1pf(expf(xg)));
            beta = 1.0f / (1.0f + expf(-__ldg(p.b + t * nv + h)));
        }
        gs[tid] = g;
        bs[tid] = beta;
    }
    if (pc.vec) {  // convolve each column in place, bottom segment first
        cp_async_wait<0>();
        __syncthreads();
        for (int ch = tid; ch < nch; ch += kThreads) {
            int64_t cg;
            float* col;
            int ld;
            column(ch, cg, col, ld);
            float w[4];
            taps(cg, w);
            for (int s0 = 16 * ((c - 1) / 16); s0 >= 0; s0 -= 16) {
                float x[19];  // rows s0 − 3 .. s0 + 15 (rows < 0: Hs; rows ≥ c: zeros)
#pragma unroll
                for (int j = 0; j < 19; ++j) {
                    const int r = s0 - 3 + j;
                    x[j] = r >= 0 ? col[r * ld] : Hs[(3 + r) * nch + ch];
                }
#pragma unroll
                for (int i = 0; i < 16; ++i)
                    if (s0 + i < c)
                        col[(s0 + i) * ld] =
                            silu(fmaf(w[0], x[i], fmaf(w[1], x[i + 1], fmaf(w[2], x[i + 2], w[3] * x[i + 3]))));
            }
        }
    }
    __syncthreads();
    if (pc.stop_after == 1) return;

    // ---- 2. L2 norms: rows 0..63 of Qs, then of Ks, 8 per warp (their sums in flight together); γ = cumsum g
    // (fp64 warp scan) ----
    {
        const float q_scale = 1.0f / sqrtf(static_cast<float>(dk));
        float* x0 = warp < 8 ? Qs + warp * 8 * LQ : Ks + (warp - 8) * 8 * LQ;  // this warp's 8 rows
        float ss[8];
#pragma unroll
        for (int rr = 0; rr < 8; ++rr) {
            ss[rr] = 0.f;
#pragma unroll
            for (int d = lane; d < DK; d += 32) ss[rr] = fmaf(x0[rr * LQ + d], x0[rr * LQ + d], ss[rr]);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
#pragma unroll
            for (int rr = 0; rr < 8; ++rr) ss[rr] += __shfl_xor_sync(0xffffffffu, ss[rr], o);
#pragma unroll
        for (int rr = 0; rr < 8; ++rr) {
            const float f = rsqrtf(ss[rr] + kL2Eps) * (warp < 8 ? q_scale : 1.0f);
#pragma unroll
            for (int d = lane; d < DK; d += 32) x0[rr * LQ + d] *= f;
        }
    }
    if (warp == 0) {
        double a0 = gs[lane], a1 = gs[lane + 32];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const double y0 = __shfl_up_sync(0xffffffffu, a0, o), y1 = __shfl_up_sync(0xffffffffu, a1, o);
            if (lane >= o) a0 += y0, a1 += y1;
        }
        a1 += __shfl_sync(0xffffffffu, a0, 31);
        gam[lane] = a0;
        gam[lane + 32] = a1;
    }
    __syncthreads();
    if (pc.stop_after == 2) return;

    // ---- 3. q̂, k̂ (by the first value head of the key head), e^γ, e^{γ_last − γ}, βe^γ ----
    const int64_t hn = static_cast<int64_t>(h) * pc.nc + n;  // (value head, chunk) index
    if (tid < kBT) {
        const float eg = expf(static_cast<float>(gam[tid]));
        float* gate = pc.ws.gate + hn * 2 * kBT;
        __stcg(gate + tid, eg);
        __stcg(gate + kBT + tid, expf(static_cast<float>(gam[kBT - 1] - gam[tid])));
        ebs[tid] = bs[tid] * eg;
    }
    if (s.map == KeyHeadMap::GROUPED ? h % (nv / nk) == 0 : h < nk) {
        const int64_t kn = (static_cast<int64_t>(kh) * pc.nc + n) * kBT * DK;
        for (int e = tid; e < kBT * DK / 4; e += kThreads) {
            const int i = e / (DK / 4), d = 4 * (e % (DK / 4));
            __stcg(reinterpret_cast<float4*>(pc.ws.q + kn + i * DK + d), *reinterpret_cast<const float4*>(Qs + i * LQ + d));
            __stcg(reinterpret_cast<float4*>(pc.ws.k + kn + i * DK + d), *reinterpret_cast<const float4*>(Ks + i * LQ + d));
        }
    }

    // ---- 4. K̂K̂ᵀ → A and Q̂K̂ᵀ → P, lower tiles only ----
    {
        const GramUnit u = gram_unit(warp);
        Acc<1, 4> acc;
        zero(acc);
        const RowMajor Am{u.which ? Qs : Ks, LQ};
        const ColMajor Bm{Ks, LQ};  // B(d, j) = k̂_j[d]
        if (u.cnt > 0) {
#pragma unroll 4
            for (int k0 = 0; k0 < DK; k0 += 8) mma3_kstep<1, 4>(acc, acc, acc, Am, Bm, 16 * u.mi, 8 * u.t0, k0, u.cnt);
        }
        float* P = pc.ws.p + hn * kBT * kBT;
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
            if (ni >= u.cnt) break;
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int i = 16 * u.mi + acc_row(0, r), j = 8 * u.t0 + acc_col(ni, r);
                const float D = j <= i ? expf(static_cast<float>(gam[i] - gam[j])) : 0.f;  // D = 0 above
                if (u.which == 0) As[i * LT + j] = j < i ? bs[i] * acc[0][ni][r] * D : 0.f;
                else __stcg(P + i * kBT + j, acc[0][ni][r] * D);
            }
        }
    }
    __syncthreads();
    if (pc.stop_after == 4) return;

    // ---- 5. Ts = (I + A)⁻¹, blocked; meanwhile the right-hand sides β e^γ K̂ and β V (in place) ----
    if (tid < 64) {  // diagonal block b, column cc: x = (I + A_bb)⁻¹ e_cc by forward substitution
        const int b = tid >> 4, cc = tid & 15;
        const float* Ab = As + 16 * b * LT + 16 * b;
        float x[16];
#pragma unroll
        for (int rr = 0; rr < 16; ++rr) {
            float sum = 0.f;
#pragma unroll
            for (int m = 0; m < rr; ++m) sum = fmaf(Ab[rr * LT + m], x[m], sum);
            x[rr] = rr < cc ? 0.f : (rr == cc ? 1.f : -sum);
        }
#pragma unroll
        for (int rr = 0; rr < 16; ++rr) Ts[(16 * b + rr) * LT + 16 * b + cc] = x[rr];
    } else {
        for (int e = tid - 64; e < kBT * DK; e += kThreads - 64) Ks[(e / DK) * LQ + e % DK] *= ebs[e / DK];
        for (int e = tid - 64; e < kBT * DV; e += kThreads - 64) Vs[(e / DV) * LV + e % DV] *= bs[e / DV];
    }
    __syncthreads();
    for (int d = 1; d < 4; ++d) {  // blocks (i, j = i − d): Y = Σ_{j ≤ m < i} A_im X_mj, then X_ij = −X_ii Y
        const int nb = 4 - d;
        for (int e = tid; e < nb * 256; e += kThreads) {
            const int j = e >> 8, rr = (e >> 4) & 15, cc = e & 15, i = j + d;
            const float* a = As + (16 * i + rr) * LT;
            const float* t = Ts + 16 * j + cc;
            float y[4] = {0.f, 0.f, 0.f, 0.f};  // 4 partial sums (latency), added in a fixed order
            for (int m0 = 16 * j; m0 < 16 * i; m0 += 16)
#pragma unroll
                for (int m = 0; m < 16; ++m) y[m & 3] = fmaf(a[m0 + m], t[(m0 + m) * LT], y[m & 3]);
            Ys[e] = (y[0] + y[1]) + (y[2] + y[3]);
        }
        __syncthreads();
        for (int e = tid; e < nb * 256; e += kThreads) {
            const int j = e >> 8, rr = (e >> 4) & 15, cc = e & 15, i = j + d;
            const float* xi = Ts + (16 * i + rr) * LT + 16 * i;  // row rr of X_ii (zeros right of the diagonal)
            float x[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int m = 0; m < 16; ++m) x[m & 3] = fmaf(xi[m], Ys[(j << 8) + m * 16 + cc], x[m & 3]);
            Ts[(16 * i + rr) * LT + 16 * j + cc] = -((x[0] + x[1]) + (x[2] + x[3]));
        }
        __syncthreads();
    }
    if (pc.stop_after == 5) return;

    // ---- 6. W = Ts·(βe^γ ⊙ K̂) [64, DK] and U = Ts·(β ⊙ V) [64, DV]; warp 4q + j: row tile 0, 3, 1, 2 (q = 0..3)
    // and column half (q < 2: j, else j + 2 mod 4) of W (halves 0, 1) or U (2, 3): 10 k-steps per sub-partition ----
    {
        const int q = warp >> 2, j = warp & 3;
        const int mi = (0x2130 >> (4 * q)) & 15, half = q < 2 ? j : (j + 2) & 3, ks = 2 * (mi + 1);
        if (half < 2)
            rhs_product<DK / 16>(Ts, Ks, LQ, mi, half * DK / 2, ks, pc.ws.w + hn * kBT * DK, DK);
        else
            rhs_product<DV / 16>(Ts, Vs, LV, mi, (half - 2) * DV / 2, ks, pc.ws.u + hn * kBT * DV, DV);
    }
}

}  // namespace

void launch_prep(const GdnDecodeArgs& a, const Piece& pc, cudaStream_t st) {
    with_padded_dims(a.shape, [&]<int DK, int DV>() {
        launch_with_smem<gdn_prep_kernel<DK, DV>>(dim3(static_cast<unsigned>(pc.nc), static_cast<unsigned>(a.shape.nv)),
                                                  dim3(kThreads), prep_smem_floats<DK, DV>() * sizeof(float), st, a, pc);
    });
}

}  // namespace ember::cuda::gdn_chunked
