// Chunked GDN prefill, kernel 2 of 3 (gdn_chunked_cuda.h): the only sequential part. Per (column block of CB
// columns, value head h) — columns of S evolve independently — the chunks of the piece in order:
//   S_n → workspace (for the output kernel)
//   U' = U − W S_n                      (tensor cores, rows = 64 tokens, K = DK)  → workspace, over U
//   S ← e^{γ_last} S + K̂ᵀ (e^{γ_last − γ} ⊙ U')   (tensor cores, rows = DK, K = 64 tokens)
// The state lives in registers (the accumulators of the second product; a copy in shared memory is the B
// operand of the first). Block of 256 threads (8 warps, 2 per sub-partition): warp w owns token rows
// [16(w%4), +16) of U' and state rows [(w%4)·DK/4, +DK/4), in column half w/4 of the block. Both products keep the
// big·big and the two correction terms in three accumulators (three dependency chains per tile: this kernel is
// latency-bound). The chunk inputs (W, K̂, U's columns, gate factors) come by cp.async:
//   ST = 2: double-buffered, chunk n+1's copies run during all of chunk n; 2 __syncthreads per chunk.
//           Shared memory, DK = 128: 169 KB (CB = 16) / 189 KB (CB = 32): one block per SM.
//   ST = 1: one buffer: W, U, gates of n+1 during the second product of n, K̂ of n+1 during the first product
//           of n+1; 3 __syncthreads per chunk. 94 / 110 KB: two blocks per SM (27B: 192 blocks in one wave).
// (CB = 16: MT × NT = 2 × 1 state tiles and 1 U' tile per warp; CB = 32: 2 × 2 and 2.)
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/pdl.cuh"
#include "core/env.h"
#include "ops/gated_delta_rule/gdn_chunked.cuh"
#include "ops/gated_delta_rule/gdn_mma.cuh"
#include "ops/linear/linear_cuda.h"  // detail::sm_count

namespace ember::cuda::gdn_chunked {

namespace {

using namespace gdn_mma;

constexpr int kThreads = 256;

template <int DK, int CB, int ST>
constexpr size_t state_smem_floats() {
    // per stage: Ws [64][DK+4] | Ks [64][DK+8] | Us [64][CB+8] | gate [2][64]; then Ups [64][CB+8] | Ss [DK][CB+8]
    return ST * (kBT * (DK + 4) + kBT * (DK + 8) + kBT * (CB + 8) + 2 * kBT) + kBT * (CB + 8) + DK * (CB + 8);
}

template <int DK, int CB, int ST>
__global__ void __launch_bounds__(kThreads, 3 - ST) gdn_state_kernel(const GdnDecodeArgs p, const Piece pc, const int DV) {
    pdl_trigger();
    pdl_wait();
    constexpr int LW = DK + 4, LK = DK + 8, LC = CB + 8;
    constexpr int MT = DK / 64, NT = CB / 16;  // state tiles per warp: MT × 16 rows, NT × 8 columns
    extern __shared__ float4 smem4[];
    constexpr int SF = kBT * LW + kBT * LK + kBT * LC + 2 * kBT;  // floats per stage
    float* stage0 = reinterpret_cast<float*>(smem4);
    auto Ws = [&](int b) { return stage0 + b * SF; };
    auto Ks = [&](int b) { return stage0 + b * SF + kBT * LW; };
    auto Us = [&](int b) { return stage0 + b * SF + kBT * (LW + LK); };
    auto gts = [&](int b) { return stage0 + b * SF + kBT * (LW + LK + LC); };  // e^γ [64] | e^{γ_last − γ} [64]
    float* Ups = stage0 + ST * SF;
    float* Ss = Ups + kBT * LC;

    const int tid = threadIdx.x, warp = tid >> 5;
    const int h = blockIdx.y, col0 = blockIdx.x * CB;
    const GdnShape& s = p.shape;
    const int dk = static_cast<int>(s.dk), dv = static_cast<int>(s.dv), kh = key_head_of(s, h);
    const int r0 = (warp & 3) * (DK / 4), c0 = (warp >> 2) * (CB / 2);  // this warp's first state row, column

    // state block → registers (and Ss); zeros past dk / dv
    Acc<MT, NT> S_hi, S_lo, S_lo2;
    float* Sg = p.S + static_cast<int64_t>(h) * dk * dv;
    for_each_acc<MT, NT>([&](int mi, int ni, int r) {
        const int row = r0 + acc_row(mi, r), col = c0 + acc_col(ni, r);
        const float v = row < dk && col0 + col < dv ? __ldcg(Sg + static_cast<int64_t>(row) * dv + col0 + col) : 0.f;
        S_hi[mi][ni][r] = v;
        S_lo[mi][ni][r] = S_lo2[mi][ni][r] = 0.f;
        Ss[row * LC + col] = v;
    });
    auto S = [&](int mi, int ni, int r) { return S_hi[mi][ni][r] + (S_lo[mi][ni][r] + S_lo2[mi][ni][r]); };

    auto issue_wu = [&](int n) {  // W, U (this block's columns) and the gate factors of chunk n
        const int b = n % ST;
        const int64_t hn = static_cast<int64_t>(h) * pc.nc + n;
        copy_tile_async<kBT, DK, LW, kThreads>(Ws(b), pc.ws.w + hn * kBT * DK, DK, tid);
        copy_tile_async<kBT, CB, LC, kThreads>(Us(b), pc.ws.u + hn * kBT * DV + col0, DV, tid);
        copy_tile_async<2, kBT, kBT, kThreads>(gts(b), pc.ws.gate + hn * 2 * kBT, kBT, tid);
    };
    auto issue_k = [&](int n) {  // K̂ of chunk n
        copy_tile_async<kBT, DK, LK, kThreads>(Ks(n % ST), pc.ws.k + (static_cast<int64_t>(kh) * pc.nc + n) * kBT * DK,
                                                DK, tid);
    };
    issue_wu(0);
    if (ST == 1) cp_async_commit();  // ST = 1: two groups (W·U·gates, K̂); ST = 2: one per chunk
    issue_k(0);
    cp_async_commit();

    for (int n = 0; n < pc.nc; ++n) {
        const int b = n % ST;
        const int64_t hn = static_cast<int64_t>(h) * pc.nc + n;
        if (ST == 1) cp_async_wait<1>();  // W, U, gates of chunk n (K̂ may still be in flight)
        else cp_async_wait<0>();          // all of chunk n
        __syncthreads();  // [A] chunk n's inputs visible; Ss holds S_n; every read of chunk n−1 is done
        if (ST == 2 && n + 1 < pc.nc) {
            issue_wu(n + 1);
            issue_k(n + 1);
            cp_async_commit();
        }

        float* Sn = pc.ws.s + hn * DK * DV + col0;  // S_n for the output kernel
        for_each_acc<MT, NT>([&](int mi, int ni, int r) {
            if (r & 1) return;  // pairs of adjacent columns
            __stcg(reinterpret_cast<float2*>(Sn + (r0 + acc_row(mi, r)) * DV + c0 + acc_col(ni, r)),
                   make_float2(S(mi, ni, r), S(mi, ni, r + 1)));
        });

        // U' = U − W S_n (token rows 16·(warp % 4) .., columns c0 ..)
        const int i0 = 16 * (warp & 3);
        Acc<1, NT> x_hi, x_lo, x_lo2;
        zero(x_hi);
        zero(x_lo);
        zero(x_lo2);
#pragma unroll 4
        for (int k0 = 0; k0 < DK; k0 += 8)
            mma3_kstep<1, NT>(x_hi, x_lo, x_lo2, RowMajor{Ws(b), LW}, RowMajor{Ss, LC}, i0, c0, k0);
        float* Ug = pc.ws.u + hn * kBT * DV + col0;
        const float* U_s = Us(b);
        const float* g_s = gts(b);
        for_each_acc<1, NT>([&](int, int ni, int r) {
            if (r & 1) return;  // pairs of adjacent columns
            const int i = i0 + acc_row(0, r), col = c0 + acc_col(ni, r);
            const float u0 = U_s[i * LC + col] - (x_hi[0][ni][r] + (x_lo[0][ni][r] + x_lo2[0][ni][r]));
            const float u1 = U_s[i * LC + col + 1] - (x_hi[0][ni][r + 1] + (x_lo[0][ni][r + 1] + x_lo2[0][ni][r + 1]));
            __stcg(reinterpret_cast<float2*>(Ug + i * DV + col), make_float2(u0, u1));
            const float f = g_s[kBT + i];
            Ups[i * LC + col] = f * u0;
            Ups[i * LC + col + 1] = f * u1;
        });
        const float eg_last = g_s[kBT - 1];
        if (ST == 1) cp_async_wait<0>();  // K̂ of chunk n
        __syncthreads();                  // [B] Ups complete (ST = 1: Ws, Us, gates free)
        if (ST == 1 && n + 1 < pc.nc) {
            issue_wu(n + 1);
            cp_async_commit();
        }

        // S ← e^{γ_last} S + K̂ᵀ Ups (state rows r0 .., columns c0 ..)
        for_each_acc<MT, NT>([&](int mi, int ni, int r) {
            S_hi[mi][ni][r] = eg_last * S(mi, ni, r);
            S_lo[mi][ni][r] = S_lo2[mi][ni][r] = 0.f;
        });
#pragma unroll
        for (int k0 = 0; k0 < kBT; k0 += 8)
            mma3_kstep<MT, NT>(S_hi, S_lo, S_lo2, ColMajor{Ks(b), LK}, RowMajor{Ups, LC}, r0, c0, k0);
        // (Ss and Ups are next written after the next [A]/[B]: every read of them here is done by then)
        for_each_acc<MT, NT>([&](int mi, int ni, int r) {
            Ss[(r0 + acc_row(mi, r)) * LC + c0 + acc_col(ni, r)] = S(mi, ni, r);
        });
        if (ST == 1) {
            __syncthreads();  // [C] Ks free
            if (n + 1 < pc.nc) {
                issue_k(n + 1);
                cp_async_commit();
            }
        }
    }

    // final state of the piece → S
    for_each_acc<MT, NT>([&](int mi, int ni, int r) {
        const int row = r0 + acc_row(mi, r), col = col0 + c0 + acc_col(ni, r);
        if (row < dk && col < dv) __stcg(Sg + static_cast<int64_t>(row) * dv + col, S(mi, ni, r));
    });
}

template <int DK, int CB, int ST>
void launch_state_t(const GdnDecodeArgs& a, const Piece& pc, cudaStream_t st) {
    const int DV = padded_dv(a.shape.dv);
    launch_with_smem<gdn_state_kernel<DK, CB, ST>>(
        dim3(static_cast<unsigned>(DV / CB), static_cast<unsigned>(a.shape.nv)), dim3(kThreads),
        state_smem_floats<DK, CB, ST>() * sizeof(float), st, a, pc, DV);
}


}  // namespace

StatePlan state_plan(const GdnShape& s) {
    static const int forced_cb = env_int("EMBER_GDN_CB"), forced_st = env_int("EMBER_GDN_STAGES");
    const int DV = padded_dv(s.dv);
    StatePlan p;
    // 32-column blocks once they give ≥ 96 blocks (9B: 128, 27B: 192), else 16 (2B: 128 blocks); two stages
    // when the blocks fit one per SM (2B, 9B), else one (27B: two blocks per SM)
    p.cb = forced_cb == 16 || forced_cb == 32 ? forced_cb : (s.nv * (DV / 32) >= 96 ? 32 : 16);
    const int64_t blocks = s.nv * (DV / p.cb);
    p.stages = forced_st == 1 || forced_st == 2 ? forced_st : (blocks <= detail::sm_count() ? 2 : 1);
    return p;
}

void launch_state(const GdnDecodeArgs& a, const Piece& pc, const StatePlan& plan, cudaStream_t st) {
    auto go = [&]<int DK>() {
        if (plan.cb == 16) plan.stages == 1 ? launch_state_t<DK, 16, 1>(a, pc, st) : launch_state_t<DK, 16, 2>(a, pc, st);
        else plan.stages == 1 ? launch_state_t<DK, 32, 1>(a, pc, st) : launch_state_t<DK, 32, 2>(a, pc, st);
    };
    padded_dk(a.shape.dk) == 64 ? go.template operator()<64>() : go.template operator()<128>();
}

}  // namespace ember::cuda::gdn_chunked
