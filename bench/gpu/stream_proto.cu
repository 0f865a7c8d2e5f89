// bench/gpu/stream_proto.cu: experiment — how fast can a 4-bit affine GEMV (n = 1) stream a large matrix when
// (a) the weights are laid out tile-major (each warp load instruction reads 512 contiguous bytes), and (b) every
// warp owns a fixed K chunk whose x fragments stay in registers across several 16-row tiles (no shared-memory x
// reads in the streaming loop), partial sums reduced over the block's warps through shared memory once per run of
// T tiles. Persistent blocks (one 16-warp block per SM), D tiles of weights in flight per warp.
//
// Same math as the q kernel (linear_gemv_q.cu): codes enter the bf16 MMA as 16 + q, x as hi + lo bf16, per group
// y += s·C + (b − 16 s)·X. Checked against an fp64 reference on the row-major weights. Prints µs, GB/s and % of
// the copy bandwidth. Run: stream_proto [--quick]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "bench_timing.cuh"

namespace {

constexpr int kWarps = 16, kThreads = 32 * kWarps;

__device__ __forceinline__ uint32_t pair16(uint32_t w, int j) {
    const uint32_t v = j == 0 ? (w << 3) : (w >> (4 * j - 3));
    uint32_t r;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(v), "n"(0x00780078), "n"(0x41804180));
    return r;
}

__device__ __forceinline__ void mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma0(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                     uint32_t b1) {
    const float z = 0.f;
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%10,%10,%10};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(z));
}

__device__ __forceinline__ void ldg16(const uint4* p, uint4& v) {
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
}

__device__ __forceinline__ uint32_t split_hi_lo(float a, float b, uint32_t& lo, float& s) {
    uint32_t hi;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(hi) : "f"(b), "f"(a));
    const float ha = __uint_as_float(hi << 16), hb = __uint_as_float(hi & 0xffff0000u);
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(lo) : "f"(b - hb), "f"(a - ha));
    s = (ha + __uint_as_float(lo << 16)) + (hb + __uint_as_float(lo & 0xffff0000u));
    return hi;
}

// Packed layout. Tile = 16 rows, chunk = 128 columns (2 groups of 64). Block (tile, chunk) = 1 KB of codes:
// [h][lane][16 B], lane (g, t) holds row g + 8h, and its word w, nibble p carries column
//   16·(2w + (p%4)/2) + 4t + 2·((p%4)%2) + p/4       (k-step s = 2w + (p%4)/2; see pair16 / the fragments).
// Scales: per block 16 × 8 B, entry 2g + G = bf16 {s(g, G), b(g, G), s(g+8, G), b(g+8, G)} (G = group 0, 1).
struct Args {
    const uint4* w;   // [tiles][nchunks][64]
    const uint4* sc;  // [tiles][nchunks][8]
    const float* x;
    float* y;
    int tiles, nchunks, K, T;
};

// One 16-row × 128-column block. MMA columns: 0 = x hi of group 0, 1 = x lo of group 0, 2/3 = the same for
// group 1 (lane (g, t) supplies column g's B fragment: xf, zero where its group is not the step's). Lane t = G
// (0, 1) ends with group G's sums of rows g, g+8 in its two columns; v0/v1 = the tile's results in lanes t = 0, 1.
__device__ __forceinline__ void tile_math(const uint4& wa, const uint4& wb, const uint2& sc, const uint2 (&xf)[8],
                                          float XG, float& v0, float& v1) {
    const uint32_t wg[4] = {wa.x, wa.y, wa.z, wa.w};
    const uint32_t w8[4] = {wb.x, wb.y, wb.z, wb.w};
    float d0[4], d1[4];
#pragma unroll
    for (int s = 0; s < 8; ++s) {
        const int w = s / 2, jb = 2 * (s % 2);
        const uint32_t a0 = pair16(wg[w], jb), a2 = pair16(wg[w], jb + 1);
        const uint32_t a1 = pair16(w8[w], jb), a3 = pair16(w8[w], jb + 1);
        if (s == 0) mma0(d0, a0, a1, a2, a3, xf[s].x, xf[s].y);
        else if (s == 1) mma0(d1, a0, a1, a2, a3, xf[s].x, xf[s].y);
        else if (s % 2 == 0) mma(d0, a0, a1, a2, a3, xf[s].x, xf[s].y);
        else mma(d1, a0, a1, a2, a3, xf[s].x, xf[s].y);
    }
    const float sg = __uint_as_float(sc.x << 16), bg = __uint_as_float(sc.x & 0xffff0000u);
    const float sh = __uint_as_float(sc.y << 16), bh = __uint_as_float(sc.y & 0xffff0000u);
    const float r0 = fmaf(sg, (d0[0] + d1[0]) + (d0[1] + d1[1]), fmaf(-16.f, sg, bg) * XG);
    const float r1 = fmaf(sh, (d0[2] + d1[2]) + (d0[3] + d1[3]), fmaf(-16.f, sh, bh) * XG);
    v0 = r0 + __shfl_xor_sync(0xffffffffu, r0, 1);
    v1 = r1 + __shfl_xor_sync(0xffffffffu, r1, 1);
}

// Lane (g, t)'s B fragments of a chunk from the staged {hi, hi, lo, lo} words.
__device__ __forceinline__ void load_xf(const uint4* xs, int ch, int g, int t, uint2 (&xf)[8]) {
#pragma unroll
    for (int s = 0; s < 8; ++s) {
        const uint4 v = xs[(ch * 8 + s) * 4 + t];
        const int col = 2 * (s / 4);
        xf[s] = g == col ? make_uint2(v.x, v.y) : g == col + 1 ? make_uint2(v.z, v.w) : make_uint2(0u, 0u);
    }
}

// Stage x: thread i handles columns 4i..4i+3 → chunk, step, t (B fragments hi, hi, lo, lo) and group sums.
__device__ __forceinline__ void stage_x(const Args& a, uint4* xs, float* xsum) {
    for (int i = threadIdx.x; i < a.K / 4; i += blockDim.x) {  // K/4 multiple of 16: shuffles below are safe
        const float4 v = reinterpret_cast<const float4*>(a.x)[i];
        const int col = 4 * i, ch = col / 128, s = (col % 128) / 16, tt = (col % 16) / 4;
        uint32_t l0, l1;
        float s0, s1;
        const uint32_t h0 = split_hi_lo(v.x, v.y, l0, s0), h1 = split_hi_lo(v.z, v.w, l1, s1);
        xs[(ch * 8 + s) * 4 + tt] = make_uint4(h0, h1, l0, l1);
        float sum = s0 + s1;
#pragma unroll
        for (int m = 1; m < 16; m <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, m);
        if ((i & 15) == 0) xsum[col / 64] = sum;
    }
    __syncthreads();
}

// Item cursor of a warp: runs blockIdx.x + k·grid, its chunks ci, tiles tt.
template <int T, int W>
struct Cursor {
    int run, ci = 0, tt = 0;
    __device__ void next(int nmy) {
        if (++tt == T) {
            tt = 0;
            if (++ci == nmy) ci = 0, run += gridDim.x;
        }
    }
    __device__ bool ok(const Args& a, int nruns) const { return run < nruns && run * T + tt < a.tiles; }
    __device__ int64_t blk(const Args& a, int warp) const {
        return (int64_t(run) * T + tt) * a.nchunks + warp + W * ci;
    }
};

// Sum the run's per-warp partials (red[warp][T·16], complete after the barrier) in warp order and store y.
template <int T, int W>
__device__ __forceinline__ void reduce_run(const Args& a, const float* r, int run) {
    __syncthreads();
    for (int e = threadIdx.x; e < T * 16; e += 32 * W) {
        float s = 0.f;
        for (int q = 0; q < W; ++q) s += r[q * T * 16 + e];
        if (int64_t(run) * T * 16 + e < int64_t(a.tiles) * 16) a.y[int64_t(run) * T * 16 + e] = s;
    }
}

// Lanes t = 0 store the tile's results into the warp's partials (added over the warp's chunks).
__device__ __forceinline__ void keep(float* rw, int ci, int t, float v0, float v1) {
    if (t != 0) return;
    if (ci == 0) rw[0] = v0, rw[8] = v1;
    else rw[0] += v0, rw[8] += v1;
}

// Register ring: D (2 or 4) tiles of codes in flight per warp, scales DS tiles ahead.
template <int T, int D, int DS>
__global__ void __launch_bounds__(kThreads, 1) stream_kernel(const Args a) {
    static_assert(4 % D == 0 && 4 % DS == 0 && T % 4 == 0, "ring");
    extern __shared__ __align__(16) uint8_t smem[];
    uint4* xs = reinterpret_cast<uint4*>(smem);
    float* xsum = reinterpret_cast<float*>(smem + a.nchunks * 8 * 4 * 16);
    float* red = xsum + 2 * a.nchunks;  // [2][16 warps][T·16]
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    stage_x(a, xs, xsum);
    const int nmy = a.nchunks / kWarps, nruns = (a.tiles + T - 1) / T;
    Cursor<T, kWarps> wc{int(blockIdx.x)}, scur{int(blockIdx.x)};
    uint4 wa[D], wb[D];
    uint2 sv[DS];
    auto loadw = [&](int slot) {
        if (wc.ok(a, nruns)) {
            const int64_t blk = wc.blk(a, warp);
            ldg16(a.w + blk * 64 + lane, wa[slot]);
            ldg16(a.w + blk * 64 + 32 + lane, wb[slot]);
        }
        wc.next(nmy);
    };
    auto loads = [&](int slot) {
        if (scur.ok(a, nruns)) sv[slot] = __ldg(reinterpret_cast<const uint2*>(a.sc + scur.blk(a, warp) * 8) + 2 * g + (t & 1));
        scur.next(nmy);
    };
#pragma unroll
    for (int s = 0; s < D; ++s) loadw(s);
#pragma unroll
    for (int s = 0; s < DS; ++s) loads(s);
    int par = 0;
    for (int run = blockIdx.x; run < nruns; run += gridDim.x) {
        float* rw = red + par * kWarps * T * 16 + warp * T * 16 + g;
        for (int ci = 0; ci < nmy; ++ci) {
            const int ch = warp + kWarps * ci;
            uint2 xf[8];
            load_xf(xs, ch, g, t, xf);
            const float XG = xsum[2 * ch + (t & 1)];
#pragma unroll 1
            for (int j = 0; j < T / 4; ++j) {
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    float v0, v1;
                    tile_math(wa[u % D], wb[u % D], sv[u % DS], xf, XG, v0, v1);
                    loadw(u % D);
                    loads(u % DS);
                    keep(rw + (4 * j + u) * 16, ci, t, v0, v1);
                }
            }
        }
        reduce_run<T, kWarps>(a, red + par * kWarps * T * 16, run);
        par ^= 1;
    }
}

__device__ __forceinline__ void cp_async16(void* s, const void* g) {
    const uint32_t sa = uint32_t(__cvta_generic_to_shared(s));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(g));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Shared-memory ring per warp filled by cp.async: R items of P tiles (1 KB codes + 128 B scales each) in flight.
template <int T, int R, int W, int MB, int P = 1>
__global__ void __launch_bounds__(32 * W, MB) stream_cp_kernel(const Args a) {
    static_assert(T % 4 == 0 && 4 % P == 0, "T, P");
    constexpr int SL = 72 * P;  // uint4 per slot
    extern __shared__ __align__(16) uint8_t smem[];
    uint4* xs = reinterpret_cast<uint4*>(smem);
    float* xsum = reinterpret_cast<float*>(smem + a.nchunks * 8 * 4 * 16);
    float* red = xsum + 2 * a.nchunks;
    uint4* ring = reinterpret_cast<uint4*>(red + 2 * W * T * 16);  // [warp][R][SL]
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    stage_x(a, xs, xsum);
    uint4* my = ring + warp * R * SL;
    const int nmy = a.nchunks / W, nruns = (a.tiles + T - 1) / T;
    int lrun = blockIdx.x, lci = 0, ltt = 0, islot = 0;
    auto issue = [&]() {
#pragma unroll
        for (int p = 0; p < P; ++p) {
            const int64_t tile = int64_t(lrun) * T + ltt + p;
            if (lrun < nruns && tile < a.tiles) {
                const int64_t blk = tile * a.nchunks + warp + W * lci;
                uint4* d = my + islot * SL + p * 72;
                cp_async16(d + lane, a.w + blk * 64 + lane);
                cp_async16(d + 32 + lane, a.w + blk * 64 + 32 + lane);
                if (lane < 8) cp_async16(d + 64 + lane, a.sc + blk * 8 + lane);
            }
        }
        cp_commit();
        if ((ltt += P) == T) {
            ltt = 0;
            if (++lci == nmy) lci = 0, lrun += gridDim.x;
        }
        islot = islot + 1 == R ? 0 : islot + 1;
    };
#pragma unroll
    for (int s = 0; s < R - 1; ++s) issue();
    int par = 0, slot = 0;
    for (int run = blockIdx.x; run < nruns; run += gridDim.x) {
        float* rw = red + par * W * T * 16 + warp * T * 16 + g;
        for (int ci = 0; ci < nmy; ++ci) {
            const int ch = warp + W * ci;
            uint2 xf[8];
            load_xf(xs, ch, g, t, xf);
            const float XG = xsum[2 * ch + (t & 1)];
#pragma unroll 1
            for (int j = 0; j < T / 4; ++j) {
#pragma unroll
                for (int u = 0; u < 4; u += P) {
                    __syncwarp();
                    issue();  // into the slot consumed last
                    cp_wait<R - 1>();
                    __syncwarp();
#pragma unroll
                    for (int p = 0; p < P; ++p) {
                        const uint4* b = my + slot * SL + p * 72;
                        float v0, v1;
                        tile_math(b[lane], b[32 + lane], reinterpret_cast<const uint2*>(b + 64)[2 * g + (t & 1)], xf,
                                  XG, v0, v1);
                        keep(rw + (4 * j + u + p) * 16, ci, t, v0, v1);
                    }
                    slot = slot + 1 == R ? 0 : slot + 1;
                }
            }
        }
        reduce_run<T, W>(a, red + par * W * T * 16, run);
        par ^= 1;
    }
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// Balanced rows (block b: tiles [b·tiles/grid, (b+1)·tiles/grid), runs of T tiles) and either cp.async per lane
// (BULK = false: codes and scales from separate arrays) or one cp.async.bulk of the interleaved 1152-byte block by
// lane 0 per tile, completion on a per-slot mbarrier (BULK = true).
template <int T, int R, int W, int MB, bool BULK>
__global__ void __launch_bounds__(32 * W, MB) stream_bal_kernel(const Args a) {
    static_assert(T % 4 == 0 && R <= 32, "T, R");
    extern __shared__ __align__(128) uint8_t smem[];
    uint4* ring = reinterpret_cast<uint4*>(smem);                      // [warp][R][72]
    uint64_t* bars = reinterpret_cast<uint64_t*>(ring + W * R * 72);   // [warp][R]
    uint4* xs = reinterpret_cast<uint4*>(bars + W * R);
    float* xsum = reinterpret_cast<float*>(xs + a.nchunks * 32);
    float* red = xsum + 2 * a.nchunks;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    uint4* my = ring + warp * R * 72;
    uint64_t* mybar = bars + warp * R;
    if (BULK && lane < R) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_u32(mybar + lane)));
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::);
    }
    stage_x(a, xs, xsum);  // ends with a barrier
    const int64_t tb0 = int64_t(blockIdx.x) * a.tiles / gridDim.x, tb1 = int64_t(blockIdx.x + 1) * a.tiles / gridDim.x;
    const int nr = int((tb1 - tb0 + T - 1) / T);
    const int nmy = a.nchunks / W;
    int lr = 0, lci = 0, ltt = 0, islot = 0;
    auto issue = [&]() {
        const int64_t tile = tb0 + int64_t(lr) * T + ltt;
        const bool ok = lr < nr && tile < tb1;
        const int64_t blk = tile * a.nchunks + warp + W * lci;
        if constexpr (BULK) {
            if (lane == 0) {
                const uint32_t bar = smem_u32(mybar + islot);
                if (ok) {
                    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 1152;\n" ::"r"(bar));
                    asm volatile(
                        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 1152, [%2];\n" ::"r"(
                            smem_u32(my + islot * 72)),
                        "l"(a.w + blk * 72), "r"(bar)
                        : "memory");
                } else {
                    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar));
                }
            }
        } else {
            if (ok) {
                cp_async16(my + islot * 72 + lane, a.w + blk * 64 + lane);
                cp_async16(my + islot * 72 + 32 + lane, a.w + blk * 64 + 32 + lane);
                if (lane < 8) cp_async16(my + islot * 72 + 64 + lane, a.sc + blk * 8 + lane);
            }
            cp_commit();
        }
        if (++ltt == T) {
            ltt = 0;
            if (++lci == nmy) lci = 0, ++lr;
        }
        islot = islot + 1 == R ? 0 : islot + 1;
    };
#pragma unroll
    for (int s = 0; s < R - 1; ++s) issue();
    int par = 0, slot = 0;
    uint32_t phases = 0;
    for (int r = 0; r < nr; ++r) {
        float* rw = red + par * W * T * 16 + warp * T * 16 + g;
        for (int ci = 0; ci < nmy; ++ci) {
            const int ch = warp + W * ci;
            uint2 xf[8];
            load_xf(xs, ch, g, t, xf);
            const float XG = xsum[2 * ch + (t & 1)];
#pragma unroll 1
            for (int j = 0; j < T / 4; ++j) {
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    __syncwarp();
                    issue();  // into the slot consumed last
                    if constexpr (BULK) {
                        const uint32_t bar = smem_u32(mybar + slot), ph = (phases >> slot) & 1u;
                        uint32_t done = 0;
                        while (!done)
                            asm volatile(
                                "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, "
                                "0, p; }\n"
                                : "=r"(done)
                                : "r"(bar), "r"(ph)
                                : "memory");
                        phases ^= 1u << slot;
                    } else {
                        cp_wait<R - 1>();
                        __syncwarp();
                    }
                    const uint4* b = my + slot * 72;
                    float v0, v1;
                    tile_math(b[lane], b[32 + lane], reinterpret_cast<const uint2*>(b + 64)[2 * g + (t & 1)], xf, XG,
                              v0, v1);
                    slot = slot + 1 == R ? 0 : slot + 1;
                    keep(rw + (4 * j + u) * 16, ci, t, v0, v1);
                }
            }
        }
        const float* rr = red + par * W * T * 16;
        __syncthreads();
        for (int e = threadIdx.x; e < T * 16; e += 32 * W) {
            float sum = 0.f;
            for (int q = 0; q < W; ++q) sum += rr[q * T * 16 + e];
            const int64_t row = (tb0 + int64_t(r) * T) * 16 + e;
            if (row < tb1 * 16) a.y[row] = sum;
        }
        par ^= 1;
    }
}

// fp64 reference on the row-major MLX layout: one warp per row.
__global__ void ref_kernel(const uint8_t* w, const uint16_t* s, const uint16_t* b, const float* x, double* y, int rows,
                           int K) {
    const int row = blockIdx.x * 8 + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (row >= rows) return;
    double acc = 0;
    for (int c = lane; c < K; c += 32) {
        const int q = (w[int64_t(row) * (K / 2) + c / 2] >> (4 * (c & 1))) & 15;
        const double sc = __uint_as_float(uint32_t(s[int64_t(row) * (K / 64) + c / 64]) << 16);
        const double bi = __uint_as_float(uint32_t(b[int64_t(row) * (K / 64) + c / 64]) << 16);
        acc += (sc * q + bi) * double(x[c]);
    }
    for (int o = 16; o; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[row] = acc;
}

__global__ void read_kernel(const uint4* __restrict__ p, size_t n16, uint32_t* out) {
    uint32_t acc = 0;
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        uint4 v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) ldg16(p + i + u * stride, v[u]);
#pragma unroll
        for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n16; i += stride) acc ^= p[i].x;
    if (acc == 0x9e3779b9u) out[0] = acc;
}

uint16_t bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

struct Shape {
    const char* name;
    int rows, K;
};

template <class Kern>
void run_variant(const char* vname, Kern kern, int T, int W, size_t ring_bytes, const uint4* bulk_w,
                 const Shape& sh, const std::vector<uint4*>& dw, const std::vector<uint4*>& dsc, const float* dx, float* dy,
                 const std::vector<double>& ref, double bytes, double copy_gbs, int sms, size_t bulk_stride) {
    Args a{};
    a.tiles = sh.rows / 16, a.nchunks = sh.K / 128, a.K = sh.K, a.T = T, a.x = dx, a.y = dy;
    const size_t smem = size_t(a.nchunks) * 8 * 4 * 16 + 2 * a.nchunks * 4 + 2 * W * T * 16 * 4 + ring_bytes +
                        8 * 32 * W;
    if (smem > 227 * 1024) {
        std::printf("| %s | %s | smem %zu too big |\n", sh.name, vname, smem);
        return;
    }
    CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    cudaFuncAttributes fa;
    CUDA_CHECK(cudaFuncGetAttributes(&fa, kern));
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, 32 * W, smem));
    const int grid = std::min(sms * per_sm, (a.tiles + T - 1) / T);
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreate(&st));
    a.w = bulk_w ? bulk_w : dw[0], a.sc = dsc[0];
    CUDA_CHECK(cudaMemset(dy, 0xff, sh.rows * 4));
    kern<<<grid, 32 * W, smem, st>>>(a);
    CUDA_CHECK(cudaStreamSynchronize(st));
    std::vector<float> y(sh.rows);
    CUDA_CHECK(cudaMemcpy(y.data(), dy, sh.rows * 4, cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (int r = 0; r < sh.rows; ++r) {
        const double e = y[r] - ref[r];
        num += e * e, den += ref[r] * ref[r];
    }
    const int copies = int(dw.size());
    const double sec = ember::bench::graph_seconds_per_launch(st, 20, [&](int i) {
        Args b = a;
        b.w = dw[i % copies], b.sc = dsc[i % copies];
        if (bulk_w) b.w = bulk_w + (i % copies) * bulk_stride;
        kern<<<grid, 32 * W, smem, st>>>(b);
    });
    std::printf("| %s | %s | %d regs, %d B spill, %d/SM | %.1f | %.1f | %.0f | %.1f %% | rel L2 %.1e |\n", sh.name, vname,
                fa.numRegs, int(fa.localSizeBytes), per_sm, sec * 1e6, bytes / copy_gbs * 1e-3, bytes / sec * 1e-9,
                100.0 * bytes / sec * 1e-9 / copy_gbs, std::sqrt(num / den));
    CUDA_CHECK(cudaStreamDestroy(st));
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    auto bw = ember::cuda::copy_bandwidth_gbs();
    if (!bw.is_ok()) {
        std::fprintf(stderr, "copy bandwidth: %s\n", bw.message().c_str());
        return 1;
    }
    const double copy_gbs = bw.value();
    int dev = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    std::printf("copy bandwidth %.0f GB/s, %d SMs\n\n", copy_gbs, sms);
    std::printf("| shape | variant | regs | µs | floor µs | GB/s | %% of copy bw | check |\n|---|---|---|---|---|---|---|---|\n");
    std::vector<Shape> shapes = {{"2B lm head 248320x2048", 248320, 2048},
                                 {"Llama-8B lm head 128256x4096", 128256, 4096},
                                 {"9B lm head 248320x4096", 248320, 4096},
                                 {"9B gate/up 12288x4096", 12288, 4096},
                                 {"27B-like 17408x4096", 17408, 4096}};
    if (quick) shapes.resize(2);
    std::mt19937 rng(7);
    for (const Shape& sh : shapes) {
        const int rows = sh.rows, K = sh.K, tiles = rows / 16, nch = K / 128, ng = K / 64;
        // row-major MLX data
        std::vector<uint8_t> w(size_t(rows) * K / 2);
        std::vector<uint16_t> s(size_t(rows) * ng), b(size_t(rows) * ng);
        std::vector<float> x(K);
        for (auto& v : w) v = uint8_t(rng());
        std::uniform_real_distribution<float> us(0.001f, 0.02f), ub(-0.1f, 0.1f), ux(-2.f, 2.f);
        for (auto& v : s) v = bf16(us(rng));
        for (auto& v : b) v = bf16(ub(rng));
        for (auto& v : x) v = ux(rng);
        // pack
        std::vector<uint32_t> pw(size_t(tiles) * nch * 256, 0u);
        std::vector<uint16_t> ps(size_t(tiles) * nch * 64);
        for (int tile = 0; tile < tiles; ++tile)
            for (int ch = 0; ch < nch; ++ch) {
                const size_t blk = size_t(tile) * nch + ch;
                for (int h = 0; h < 2; ++h)
                    for (int lane = 0; lane < 32; ++lane) {
                        const int g = lane / 4, t = lane % 4, row = tile * 16 + g + 8 * h;
                        for (int wi = 0; wi < 4; ++wi) {
                            uint32_t word = 0;
                            for (int p = 0; p < 8; ++p) {
                                const int j = p % 4, col = ch * 128 + 16 * (2 * wi + j / 2) + 4 * t + 2 * (j % 2) + p / 4;
                                const int q = (w[size_t(row) * (K / 2) + col / 2] >> (4 * (col & 1))) & 15;
                                word |= uint32_t(q) << (4 * p);
                            }
                            pw[blk * 256 + (h * 32 + lane) * 4 + wi] = word;
                        }
                    }
                for (int g = 0; g < 8; ++g)
                    for (int gi = 0; gi < 2; ++gi)
                        for (int h = 0; h < 2; ++h) {
                            const int row = tile * 16 + g + 8 * h, grp = 2 * ch + gi;
                            ps[blk * 64 + (g * 2 + gi) * 4 + h * 2] = s[size_t(row) * ng + grp];
                            ps[blk * 64 + (g * 2 + gi) * 4 + h * 2 + 1] = b[size_t(row) * ng + grp];
                        }
            }
        const double bytes = double(pw.size()) * 4 + double(ps.size()) * 2;
        const int copies = std::max(2, int(std::ceil(200e6 / bytes)));
        std::vector<uint4*> dw(copies), dsc(copies);
        for (int c = 0; c < copies; ++c) {
            CUDA_CHECK(cudaMalloc(&dw[c], pw.size() * 4));
            CUDA_CHECK(cudaMalloc(&dsc[c], ps.size() * 2));
            CUDA_CHECK(cudaMemcpy(dw[c], pw.data(), pw.size() * 4, cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaMemcpy(dsc[c], ps.data(), ps.size() * 2, cudaMemcpyHostToDevice));
        }
        // interleaved layout for the bulk kernel: [tile][chunk][1024 B codes | 128 B scales], `copies` copies
        const size_t nblk = size_t(tiles) * nch, bstride = nblk * 72;
        uint4* dbulk;
        {
            std::vector<uint4> pi(bstride);
            for (size_t k = 0; k < nblk; ++k) {
                std::memcpy(&pi[k * 72], &pw[k * 256], 1024);
                std::memcpy(&pi[k * 72 + 64], &ps[k * 64], 128);
            }
            CUDA_CHECK(cudaMalloc(&dbulk, bstride * 16 * copies));
            for (int c = 0; c < copies; ++c)
                CUDA_CHECK(cudaMemcpy(dbulk + c * bstride, pi.data(), bstride * 16, cudaMemcpyHostToDevice));
        }
        uint8_t* dwr;
        uint16_t *dsr, *dbr;
        float *dx, *dy;
        double* dref;
        CUDA_CHECK(cudaMalloc(&dwr, w.size()));
        CUDA_CHECK(cudaMalloc(&dsr, s.size() * 2));
        CUDA_CHECK(cudaMalloc(&dbr, b.size() * 2));
        CUDA_CHECK(cudaMalloc(&dx, K * 4));
        CUDA_CHECK(cudaMalloc(&dy, rows * 4));
        CUDA_CHECK(cudaMalloc(&dref, rows * 8));
        CUDA_CHECK(cudaMemcpy(dwr, w.data(), w.size(), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dsr, s.data(), s.size() * 2, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dbr, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dx, x.data(), K * 4, cudaMemcpyHostToDevice));
        ref_kernel<<<(rows + 7) / 8, 256>>>(dwr, dsr, dbr, dx, dref, rows, K);
        std::vector<double> ref(rows);
        CUDA_CHECK(cudaMemcpy(ref.data(), dref, rows * 8, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaFree(dwr));
        // read-only ceiling on the same bytes
        {
            cudaStream_t st;
            CUDA_CHECK(cudaStreamCreate(&st));
            uint32_t* o;
            CUDA_CHECK(cudaMalloc(&o, 4));
            const size_t n16 = pw.size() / 4;
            const double sec = ember::bench::graph_seconds_per_launch(st, 20, [&](int i) {
                read_kernel<<<sms * 4, 512, 0, st>>>(dw[i % copies], n16, o);
            });
            const double b2 = double(pw.size()) * 4;
            std::printf("| %s | read-only (codes only) | — | %.1f | %.1f | %.0f | %.1f %% | — |\n", sh.name, sec * 1e6,
                        b2 / copy_gbs * 1e-3, b2 / sec * 1e-9, 100.0 * b2 / sec * 1e-9 / copy_gbs);
            CUDA_CHECK(cudaFree(o));
            CUDA_CHECK(cudaStreamDestroy(st));
        }
        auto rv = [&](const char* n, auto k, int T, int W, size_t ring, bool bulk) {
            run_variant(n, k, T, W, ring, bulk ? dbulk : nullptr, sh, dw, dsc, dx, dy, ref, bytes, copy_gbs, sms,
                        bstride);
        };
        rv("cp W=16 T=16 R=4", stream_cp_kernel<16, 4, 16, 1>, 16, 16, 16 * 4 * 1152, false);
        rv("cp W=16 T=16 R=5", stream_cp_kernel<16, 5, 16, 1>, 16, 16, 16 * 5 * 1152, false);
        rv("cp W=16 T=16 R=2 P=2", stream_cp_kernel<16, 2, 16, 1, 2>, 16, 16, 16 * 2 * 2304, false);
        rv("cp W=16 T=16 R=3 P=2", stream_cp_kernel<16, 3, 16, 1, 2>, 16, 16, 16 * 3 * 2304, false);
        rv("cp W=16 T=8 R=3 P=2", stream_cp_kernel<8, 3, 16, 1, 2>, 8, 16, 16 * 3 * 2304, false);
        rv("cp W=16 T=16 R=2 P=4", stream_cp_kernel<16, 2, 16, 1, 4>, 16, 16, 16 * 2 * 4608, false);
        rv("cp W=8 T=16 R=4 MB=3", stream_cp_kernel<16, 4, 8, 3>, 16, 8, 8 * 4 * 1152, false);
        rv("cp W=8 T=16 R=3 MB=3 P=2", stream_cp_kernel<16, 3, 8, 3, 2>, 16, 8, 8 * 3 * 2304, false);
        CUDA_CHECK(cudaFree(dbulk));
        for (int c = 0; c < copies; ++c) {
            CUDA_CHECK(cudaFree(dw[c]));
            CUDA_CHECK(cudaFree(dsc[c]));
        }
        CUDA_CHECK(cudaFree(dsr));
        CUDA_CHECK(cudaFree(dbr));
        CUDA_CHECK(cudaFree(dx));
        CUDA_CHECK(cudaFree(dy));
        CUDA_CHECK(cudaFree(dref));
    }
    return 0;
}
