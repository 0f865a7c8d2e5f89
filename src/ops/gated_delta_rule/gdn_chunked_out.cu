// Chunked GDN prefill, kernel 3 of 3 (gdn_chunked_cuda.h): per (chunk, value head h), the output
//   O = (e^γ ⊙ Q̂) S_n + P U'      (tensor cores: K = DK, then K = 64 tokens up to the diagonal)
//   y = norm_w · O / rms(O) · silu(z)   (gated RMSNorm over the dv columns of each token)
// and, in the last piece, the conv state = the last K−1 rows of [conv_state ; qkv] (every kernel of the call
// that reads the old state has finished: stream order).
// Block of 512 threads (16 warps): warp 4q + j = (16-row tile 0, 3, 1, 2 for q = 0..3, column quarter j for
// q < 2, j + 2 mod 4 else): every sub-partition gets the same share of the triangular second product. Q̂ and
// S_n are copied first (cp.async group 0), P, U' and e^γ next (group 1, in flight during the first product).
// Shared memory, DK = DV = 128: 157 KB.
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
constexpr int LT = kBT + 4;

template <int DK, int DV>
constexpr size_t out_smem_floats() {
    // Qs [64][DK+4] | Ss [DK][DV+8] | Ps [64][68] | Us [64][DV+8] | e^γ [64] | row sums [4][64]
    return kBT * (DK + 4) + DK * (DV + 8) + kBT * LT + kBT * (DV + 8) + 5 * kBT;
}

template <int DK, int DV>
__global__ void __launch_bounds__(kThreads, 1) gdn_out_kernel(const GdnDecodeArgs p, const Piece pc) {
    pdl_trigger();
    pdl_wait();
    constexpr int LQ = DK + 4, LS = DV + 8, NT = DV / 32;
    extern __shared__ float4 smem4[];
    float* Qs = reinterpret_cast<float*>(smem4);
    float* Ss = Qs + kBT * LQ;
    float* Ps = Ss + DK * LS;
    float* Us = Ps + kBT * LT;
    float* egs = Us + kBT * LS;
    float* red = egs + kBT;  // [column quarter][row] Σo²

    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int n = blockIdx.x, h = blockIdx.y;
    const GdnShape& s = p.shape;
    const int nv = static_cast<int>(s.nv), dv = static_cast<int>(s.dv), kh = key_head_of(s, h);
    const int64_t hn = static_cast<int64_t>(h) * pc.nc + n;

    copy_tile_async<kBT, DK, LQ, kThreads>(Qs, pc.ws.q + (static_cast<int64_t>(kh) * pc.nc + n) * kBT * DK, DK, tid);
    copy_tile_async<DK, DV, LS, kThreads>(Ss, pc.ws.s + hn * DK * DV, DV, tid);
    cp_async_commit();
    copy_tile_async<kBT, kBT, LT, kThreads>(Ps, pc.ws.p + hn * kBT * kBT, kBT, tid);
    copy_tile_async<kBT, DV, LS, kThreads>(Us, pc.ws.u + hn * kBT * DV, DV, tid);
    copy_tile_async<1, kBT, kBT, kThreads>(egs, pc.ws.gate + hn * 2 * kBT, kBT, tid);
    cp_async_commit();

    const int q = warp >> 2, j4 = warp & 3;
    const int mi = (0x2130 >> (4 * q)) & 15, nq = q < 2 ? j4 : (j4 + 2) & 3, n0 = nq * DV / 4;
    Acc<1, NT> acc;
    zero(acc);
    cp_async_wait<1>();
    __syncthreads();
#pragma unroll 4
    for (int k0 = 0; k0 < DK; k0 += 8) mma3_kstep<1, NT>(acc, acc, acc, RowMajor{Qs, LQ}, RowMajor{Ss, LS}, 16 * mi, n0, k0);
    cp_async_wait<0>();
    __syncthreads();
    for_each_acc<1, NT>([&](int, int ni, int r) { acc[0][ni][r] *= egs[16 * mi + acc_row(0, r)]; });
    // P is lower triangular: k-steps up to the end of this row tile (P's tiles above are never read)
    for (int kk = 0; kk < 2 * (mi + 1); ++kk)
        mma3_kstep<1, NT>(acc, acc, acc, RowMajor{Ps, LT}, RowMajor{Us, LS}, 16 * mi, n0, 8 * kk);

    // gated RMSNorm: Σo² of rows g and g+8 over this warp's columns, the quad, then the four column quarters
    float ss[2] = {0.f, 0.f};
    for_each_acc<1, NT>([&](int, int ni, int r) { ss[r >> 1] = fmaf(acc[0][ni][r], acc[0][ni][r], ss[r >> 1]); });
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        ss[j] += __shfl_xor_sync(0xffffffffu, ss[j], 1);
        ss[j] += __shfl_xor_sync(0xffffffffu, ss[j], 2);
    }
    if ((lane & 3) == 0) {
        red[nq * kBT + 16 * mi + (lane >> 2)] = ss[0];
        red[nq * kBT + 16 * mi + (lane >> 2) + 8] = ss[1];
    }
    __syncthreads();
    const float inv_dv = 1.0f / static_cast<float>(dv);
    const int64_t vd = static_cast<int64_t>(nv) * dv;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int i = 16 * mi + acc_row(0, r);
        if (static_cast<int64_t>(n) * kBT + i >= pc.T) continue;
        const int64_t t = pc.t0 + static_cast<int64_t>(n) * kBT + i;
        const float tot = (red[i] + red[kBT + i]) + (red[2 * kBT + i] + red[3 * kBT + i]);  // one order for all
        const float inv = rsqrtf(tot * inv_dv + p.eps);
#pragma unroll
        for (int ni = 0; ni < NT; ++ni) {
            const int col = n0 + acc_col(ni, r);
            if (col >= dv) continue;
            const int64_t off = t * vd + static_cast<int64_t>(h) * dv + col;
            __stcg(p.y + off, (__ldg(p.norm_w + col) * (acc[0][ni][r] * inv)) * silu(__ldg(p.z + off)));
        }
    }

    if (pc.last) {  // conv state ← rows T−K+1 .. T−1 of [conv_state ; qkv], one channel per thread
        const int Km1 = p.K - 1;
        const int64_t C = 2 * s.nk * s.dk + vd;
        const int64_t nthr = static_cast<int64_t>(gridDim.x) * gridDim.y * kThreads;
        for (int64_t ch = (static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x) * kThreads + tid; ch < C; ch += nthr) {
            float v[3];
#pragma unroll
            for (int j = 0; j < 3; ++j) {
                const int64_t row = pc.T_all - Km1 + j;  // token index; < 0: a row of the old state
                v[j] = j >= Km1 ? 0.f : row >= 0 ? __ldg(p.qkv + row * C + ch) : __ldcg(p.conv_state + (Km1 + row) * C + ch);
            }
#pragma unroll
            for (int j = 0; j < 3; ++j)
                if (j < Km1) __stcg(p.conv_state + j * C + ch, v[j]);
        }
    }
}

}  // namespace

void launch_out(const GdnDecodeArgs& a, const Piece& pc, cudaStream_t st) {
    with_padded_dims(a.shape, [&]<int DK, int DV>() {
        launch_with_smem<gdn_out_kernel<DK, DV>>(dim3(static_cast<unsigned>(pc.nc), static_cast<unsigned>(a.shape.nv)),
                                                 dim3(kThreads), out_smem_floats<DK, DV>() * sizeof(float), st, a, pc);
    });
}

}  // namespace ember::cuda::gdn_chunked
