// bench/gpu/read_bench.cu: the read-only streaming ceiling of the GPU for the byte counts of the decode GEMVs
// (docs: performance.md). A GEMV reads its weights once and writes almost nothing, so the most it can reach is
// what a kernel that only reads (and XORs) the same bytes reaches, launched the same way (graph replay, rotating
// copies so that L2 stays cold). Reported against the copy bandwidth (D2D, read + written bytes) measured by
// ember::cuda::copy_bandwidth_gbs.
//
// Variants: blocks per SM (1, 2, 4) × 16-byte loads in flight per thread (2, 4, 8), 512 threads per block,
// grid-stride over 16-byte words; plus a persistent version that splits the bytes into one contiguous range per
// block (how the GEMV splits rows). Run: read_bench [--quick]. Prints a Markdown table.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "bench_timing.cuh"

namespace {

template <int U>
__global__ void __launch_bounds__(512) read_grid(const uint4* __restrict__ p, size_t n16, uint32_t* out) {
    uint32_t acc = 0;
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    for (; i + (U - 1) * stride < n16; i += U * stride) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
            asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                         : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                         : "l"(p + i + u * stride));
#pragma unroll
        for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n16; i += stride) {
        const uint4 v = p[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) out[0] = acc;  // keeps the loads; practically never taken
}

// One contiguous range per block (as the GEMV's row ranges), U loads in flight per thread.
template <int U>
__global__ void __launch_bounds__(512) read_ranges(const uint4* __restrict__ p, size_t n16, uint32_t* out) {
    const size_t b0 = blockIdx.x * n16 / gridDim.x, b1 = (blockIdx.x + 1) * n16 / gridDim.x;
    uint32_t acc = 0;
    size_t i = b0 + threadIdx.x;
    for (; i + (U - 1) * blockDim.x < b1; i += U * blockDim.x) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
            asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                         : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                         : "l"(p + i + u * blockDim.x));
#pragma unroll
        for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < b1; i += blockDim.x) {
        const uint4 v = p[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) out[0] = acc;
}


// The decode GEMV's access pattern (linear_gemv_q.cu): block b owns a contiguous range of 16-row tiles, warp w
// tile w of each round of 16; per iteration lane (g, t) reads rows g and g + 8 at bytes t·16 + p·64 (p = 0, 1) of
// the tile's next 128-byte column; R iterations in flight. PACKED: the same bytes laid out tile-major, so that one
// iteration of a warp is 2 KB contiguous (the 4 loads of the warp read 512 contiguous bytes each).
// MODE 0: rows (as the GEMV), 1: packed, 2: rows with the L2::256B prefetch-size hint on every load, 3: rows
// plus cp.async.bulk.prefetch.L2 of each row's bytes PD iterations ahead (lanes 0..15, one row each, 512 bytes per
// 4 iterations).
template <int R, int MODE>
__global__ void __launch_bounds__(512, 1) read_tiles(const uint4* __restrict__ p16, size_t n16, uint32_t* out) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(p16);
    constexpr int RB = 2048;  // row bytes (K = 4096 at 4 bits)
    const int64_t rows = int64_t(n16 * 16 / RB), tiles = rows / 16;
    const int64_t tb0 = blockIdx.x * tiles / gridDim.x, tb1 = (blockIdx.x + 1) * tiles / gridDim.x;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    uint32_t acc = 0;
    for (int64_t tile = tb0 + warp; tile < tb1; tile += 16) {
        const uint8_t* base = p + tile * 16 * RB;
        constexpr int PD = 8;
        if (MODE == 3 && lane < 16) {  // prologue: the first PD iterations
            const uint8_t* a = base + int64_t(lane) * RB;
            asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(a), "n"(PD * 128) : "memory");
        }
        for (int c = 0; c < RB / 128; c += R) {
            if (MODE == 3 && lane < 16 && c % 4 == 0 && c + PD < RB / 128) {
                const uint8_t* a = base + int64_t(lane) * RB + (c + PD) * 128;
                asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(a), "n"(512) : "memory");
            }
            uint4 v[R][4];
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int q = 0; q < 4; ++q) {  // q: piece p = q & 1, row g + 8·(q >> 1)
                    const uint8_t* a = MODE == 1 ? base + (c + r) * 2048 + q * 512 + lane * 16
                                              : base + int64_t(g + 8 * (q >> 1)) * RB + (c + r) * 128 + (q & 1) * 64 + t * 16;
                    if (MODE == 2)
                        asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                                     : "=r"(v[r][q].x), "=r"(v[r][q].y), "=r"(v[r][q].z), "=r"(v[r][q].w)
                                     : "l"(a));
                    else
                        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                                     : "=r"(v[r][q].x), "=r"(v[r][q].y), "=r"(v[r][q].z), "=r"(v[r][q].w)
                                     : "l"(a));
                }
#pragma unroll
            for (int r = 0; r < R; ++r)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc ^= v[r][q].x ^ v[r][q].y ^ v[r][q].z ^ v[r][q].w;
        }
    }
    if (acc == 0x9e3779b9u) out[0] = acc;
}

using Kern = void (*)(const uint4*, size_t, uint32_t*);

// Per-launch seconds of a graph of launches rotating through the copies (bench_timing.cuh).
double time_graph(Kern k, int grid, const std::vector<uint4*>& bufs, size_t n16, uint32_t* out, cudaStream_t st) {
    return ember::bench::graph_seconds_per_launch(st, std::max<int>(int(bufs.size()), 20), [&](int i) {
        k<<<grid, 512, 0, st>>>(bufs[size_t(i) % bufs.size()], n16, out);
    });
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && !std::strcmp(argv[1], "--quick");
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    auto bwr = ember::cuda::copy_bandwidth_gbs();  // the engine's own probe (ember bench uses it too)
    if (!bwr.is_ok()) {
        std::fprintf(stderr, "read_bench: %s\n", bwr.message().c_str());
        return 1;
    }
    const double bw = bwr.value() * 1e9;
    std::printf("# read_bench — %s, %d SMs, L2 %.0f MB; copy bandwidth %.0f GB/s\n\n", prop.name, sms,
                prop.l2CacheSize / 1e6, bw / 1e9);
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    uint32_t* out;
    CUDA_CHECK(cudaMalloc(&out, 64));
    // Byte counts of the q4 g64 shapes (weights + scales + biases): 2B 2048², 6144×2048, 9B 4096², 8192×4096,
    // 12288×4096, 2B / 9B LM heads.
    const double mbs[] = {2.4, 7.1, 9.5, 18.9, 28.4, 50.2, 287.1, 573.1};  // (gemv variants: whole 16 × 2048-byte tiles)
    struct V {
        const char* name;
        Kern k;
        int bps;  // blocks per SM
    };
    const V vs[] = {{"grid U2 ×1", read_grid<2>, 1},   {"grid U4 ×1", read_grid<4>, 1},   {"grid U8 ×1", read_grid<8>, 1},
                    {"grid U2 ×2", read_grid<2>, 2},   {"grid U4 ×2", read_grid<4>, 2},   {"grid U8 ×2", read_grid<8>, 2},
                    {"grid U4 ×4", read_grid<4>, 4},   {"ranges U4 ×1", read_ranges<4>, 1},
                    {"ranges U8 ×1", read_ranges<8>, 1}, {"ranges U8 ×2", read_ranges<8>, 2},
                    {"gemv rows R2", read_tiles<2, 0>, 1}, {"gemv packed R2", read_tiles<2, 1>, 1},
                    {"gemv rows L2::256B R2", read_tiles<2, 2>, 1}, {"gemv rows bulk-prefetch R2", read_tiles<2, 3>, 1}};
    std::printf("| MB | variant | µs | floor µs | %% of copy bw |\n|---|---|---|---|---|\n");
    std::vector<double> best(sizeof mbs / sizeof mbs[0], 0);
    for (size_t si = 0; si < sizeof mbs / sizeof mbs[0]; ++si) {
        if (quick && mbs[si] > 300) continue;
        const size_t bytes = size_t(mbs[si] * 1e6) / 32768 * 32768, n16 = bytes / 16;
        const int ncopies = int(std::max<size_t>(3, (4 * size_t(prop.l2CacheSize) + bytes - 1) / bytes));
        std::vector<uint4*> bufs;
        for (int i = 0; i < ncopies; ++i) {
            uint4* p;
            CUDA_CHECK(cudaMalloc(&p, bytes));
            CUDA_CHECK(cudaMemset(p, 0x5a + i, bytes));
            bufs.push_back(p);
        }
        const double floor = double(bytes) / bw;
        for (const V& v : vs) {
            const double t = time_graph(v.k, v.bps * sms, bufs, n16, out, st);
            best[si] = std::max(best[si], floor / t);
            std::printf("| %.1f | %s | %.2f | %.2f | %.0f %% |\n", mbs[si], v.name, t * 1e6, floor * 1e6,
                        100.0 * floor / t);
            std::fflush(stdout);
        }
        for (uint4* p : bufs) CUDA_CHECK(cudaFree(p));
    }
    std::printf("\n## best read-only ceiling per size (%% of copy bw)\n\n| MB | best |\n|---|---|\n");
    for (size_t si = 0; si < best.size(); ++si)
        if (best[si] > 0) std::printf("| %.1f | %.0f %% |\n", mbs[si], 100.0 * best[si]);
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaStreamDestroy(st));
    return 0;
}
