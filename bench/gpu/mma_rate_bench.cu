// bench/gpu/mma_rate_bench.cu: the multiply-add rates a warp-level (mma.sync) kernel can reach on this GPU — the
// ceilings behind the chunked GDN prefill's choice of product (ops/gated_delta_rule/gdn_mma.cuh): mma.sync
// m16n8k8 TF32, m16n8k16 BF16 and FP16 (fp32 accumulation), and plain FFMA. One block per SM, W warps, each
// warp C independent accumulator chains (C = 1: the dependent-issue latency). Reported per SM and clock (the
// clock64() cycles of block 0) and as TFLOP/s. Run: mma_rate_bench. Prints a Markdown table.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "bench_timing.cuh"

namespace {

constexpr int kIters = 4096;

enum Op { TF32, BF16, FP16, FFMA };

template <Op OP, int C>
__global__ void rate_kernel(float* out, long long* cycles, uint32_t seed) {
    const long long t0 = clock64();
    float d[C][4];
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
        for (int r = 0; r < 4; ++r) d[c][r] = 0.f;
    const uint32_t a0 = seed ^ threadIdx.x, a1 = a0 * 3u, a2 = a0 * 5u, a3 = a0 * 7u, b0 = a0 * 11u, b1 = a0 * 13u;
    for (int it = 0; it < kIters; ++it) {
#pragma unroll
        for (int c = 0; c < C; ++c) {
            if constexpr (OP == TF32)
                asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                             "{%8,%9}, {%0,%1,%2,%3};\n"
                             : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
            else if constexpr (OP == BF16)
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                             "{%8,%9}, {%0,%1,%2,%3};\n"
                             : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
            else if constexpr (OP == FP16)
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                             "{%8,%9}, {%0,%1,%2,%3};\n"
                             : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
                             : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
            else
#pragma unroll
                for (int r = 0; r < 4; ++r)
                    asm volatile("fma.rn.f32 %0, %1, %2, %0;\n" : "+f"(d[c][r]) : "f"(__uint_as_float(a0)), "f"(__uint_as_float(b0)));
        }
    }
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < C; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
    if (s == 1.2345f) out[threadIdx.x] = s;  // keeps the work; practically never taken
    if (threadIdx.x == 0 && blockIdx.x == 0) *cycles = clock64() - t0;
}

// multiply-adds per instruction and warp
double fmas(Op op) { return op == TF32 ? 16 * 8 * 8 : op == FFMA ? 32 : 16 * 8 * 16; }

template <Op OP, int C>
void row(const char* name, int warps, int sms, float* out, long long* cycles_dev) {
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const double s = ember::bench::graph_seconds_per_launch(
        st, 4, [&](int) { rate_kernel<OP, C><<<sms, 32 * warps, 0, st>>>(out, cycles_dev, 1u); });
    long long cycles = 0;
    CUDA_CHECK(cudaMemcpy(&cycles, cycles_dev, sizeof cycles, cudaMemcpyDeviceToHost));
    const double instrs = double(kIters) * C * (OP == FFMA ? 4 : 1);  // per warp
    const double per_sm = instrs * fmas(OP) * warps;
    std::printf("| %-5s | %2d | %2d | %8.1f | %8.2f | %6.1f |\n", name, warps, C, per_sm / double(cycles),
                double(cycles) / (instrs * warps / 4.0), 2 * per_sm * sms / s / 1e12);
    CUDA_CHECK(cudaStreamDestroy(st));
}

}  // namespace

int main() {
    int dev = 0, sms = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    float* out;
    long long* cycles;
    CUDA_CHECK(cudaMalloc(&out, 4096));
    CUDA_CHECK(cudaMalloc(&cycles, sizeof(long long)));
    std::printf("%s, %d SMs; cycles from clock64() of block 0\n\n", ember::cuda::device_name().c_str(), sms);
    std::printf("| op | warps/SM | chains/warp | FMA per SM-clock | clocks per instr per sub-partition | TFLOP/s |\n");
    std::printf("|---|---|---|---|---|---|\n");
    for (int w : {4, 8, 16}) {
        row<TF32, 1>("tf32", w, sms, out, cycles);
        row<TF32, 8>("tf32", w, sms, out, cycles);
        row<BF16, 1>("bf16", w, sms, out, cycles);
        row<BF16, 8>("bf16", w, sms, out, cycles);
        row<FP16, 8>("fp16", w, sms, out, cycles);
        row<FFMA, 8>("ffma", w, sms, out, cycles);
    }
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaFree(cycles));
    return 0;
}
