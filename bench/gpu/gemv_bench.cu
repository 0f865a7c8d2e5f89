// bench/gpu/gemv_bench.cu: ember::cuda::linear for decode (n = 1, 4, 8: GEMV) on Qwen3.5 2B/9B/27B projection
// shapes (MLX 4-bit group 64, bf16 scales — the checkpoints' format — plus some 8-bit and dense bf16 rows) and
// a few prefill GEMMs (n = 512), against the speed of light measured in the same run (docs: performance.md).
//
// Build and run on the GPU machine, from the repository root (one line each):
//   nvcc -O3 -std=c++20 -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Isrc bench/gpu/gemv_bench.cu
//        src/ops/linear/linear_cuda.cu src/ops/linear/linear_gemv_affine.cu src/ops/linear/linear_gemv_simple.cu
//        src/ops/linear/linear_gemm.cu src/core/dtype.cpp src/quant/affine.cpp -lcublas -o build-gpu/gemv_bench
//   build-gpu/gemv_bench [--quick] [--only "9B lm"] [--n 1]
//
// Method: copy bandwidth = a 2 GiB device-to-device cudaMemcpy, (read + written bytes) / time, median of 9.
// Each shape gets enough copies of its weights (≥ 3, together ≥ 4× the L2) that successive calls rotate through
// them and read HBM, never L2. Per (shape, n): warm-up, then 100 launches each between two CUDA events
// (median), and a CUDA graph of the same rotating launches replayed 5× (median per launch: what a decode
// graph sees). bytes = weights + scales + biases + x + y; floor = bytes / copy bandwidth; ratio = time / floor.
// Random data (hashed bits; scales of either sign), never zeros.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "ops/linear/linear_cuda.h"

using namespace ember;
using ember::cuda::linear;
using ember::cuda::linear_gemv_describe;
using ember::cuda::linear_workspace_bytes;

namespace {

__device__ __forceinline__ uint32_t hash32(uint64_t i, uint64_t seed) {
    uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return uint32_t(z ^ (z >> 31));
}
__global__ void fill_bits(uint32_t* p, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        p[i] = hash32(i, seed);
}
// Uniform in [-amp, amp], stored as bf16 (u16) or f32.
__global__ void fill_bf16(uint16_t* p, size_t n, uint64_t seed, float amp) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const float v = amp * (float(hash32(i, seed) >> 8) * (2.0f / 16777216.0f) - 1.0f);
        p[i] = uint16_t(__float_as_uint(v) >> 16);
    }
}
__global__ void fill_f32(float* p, size_t n, uint64_t seed, float amp) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        p[i] = amp * (float(hash32(i, seed) >> 8) * (2.0f / 16777216.0f) - 1.0f);
}

void* dmalloc(size_t b) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(b, 256)));
    return p;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

double copy_bandwidth() {  // bytes/s, read + write
    const size_t bytes = size_t(2) << 30;
    void* a = dmalloc(bytes);
    void* b = dmalloc(bytes);
    CUDA_CHECK(cudaMemset(a, 1, bytes));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    std::vector<double> t;
    for (int i = 0; i < 10; ++i) {
        CUDA_CHECK(cudaEventRecord(e0));
        CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
        CUDA_CHECK(cudaEventRecord(e1));
        CUDA_CHECK(cudaEventSynchronize(e1));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (i) t.push_back(ms * 1e-3);
    }
    CUDA_CHECK(cudaFree(a));
    CUDA_CHECK(cudaFree(b));
    return 2.0 * double(bytes) / median(t);
}

struct Shape {
    const char* model;
    const char* name;
    int64_t rows, cols;
};

// Qwen3.5 projections (rows = out features, cols = in features); qwen35_config.cpp presets.
const Shape kShapes[] = {
    {"2B", "gdn qkv", 6144, 2048},   {"2B", "gdn z / out", 2048, 2048}, {"2B", "mlp gate/up", 6144, 2048},
    {"2B", "mlp down", 2048, 6144},  {"2B", "attn k/v", 512, 2048},     {"2B", "lm head", 248320, 2048},
    {"9B", "gdn qkv", 8192, 4096},   {"9B", "gdn z / out", 4096, 4096}, {"9B", "mlp gate/up", 12288, 4096},
    {"9B", "mlp down", 4096, 12288}, {"9B", "lm head", 248320, 4096},   {"27B", "gdn qkv", 10240, 5120},
    {"27B", "gdn z", 6144, 5120},    {"27B", "gdn out", 5120, 6144},    {"27B", "mlp gate/up", 17408, 5120},
    {"27B", "mlp down", 5120, 17408}, {"27B", "lm head", 248320, 5120},
};

struct Fmt {
    const char* name;
    bool affine;
    int bits, gs;
};

// Device copies of one random weight, rotated through to keep L2 cold.
struct Copies {
    std::vector<Weight> w;
    std::vector<void*> bufs;
    int64_t bytes = 0;  // one copy (weights + scales + biases)
    ~Copies() {
        for (void* p : bufs) cudaFree(p);
    }
};

void make_copies(Copies& C, const Fmt& f, int64_t rows, int64_t cols, size_t l2) {
    Weight W;
    W.rows = rows, W.cols = cols;
    if (f.affine) {
        W.format = WeightFormat::AFFINE, W.bits = f.bits, W.group_size = f.gs, W.sb_dtype = DType::BF16;
    } else {
        W.format = WeightFormat::DENSE, W.dtype = DType::BF16;
    }
    C.bytes = W.total_bytes();
    const int ncopies = int(std::max<int64_t>(3, (4 * int64_t(l2) + C.bytes - 1) / C.bytes));
    const size_t data_b = size_t(W.rows * W.row_bytes());
    const size_t sb_n = f.affine ? size_t(rows * (cols / f.gs)) : 0;
    for (int i = 0; i < ncopies; ++i) {
        Weight w = W;
        void* d = dmalloc(data_b);
        C.bufs.push_back(d);
        fill_bits<<<1024, 256>>>(static_cast<uint32_t*>(d), data_b / 4, 1000 + i);
        w.data = d;
        if (f.affine) {
            void* s = dmalloc(sb_n * 2);
            void* b = dmalloc(sb_n * 2);
            C.bufs.push_back(s), C.bufs.push_back(b);
            fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(s), sb_n, 2000 + i, 0.05f);
            fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(b), sb_n, 3000 + i, 0.4f);
            w.scales = s, w.biases = b;
        } else {
            fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(d), data_b / 2, 1000 + i, 0.03f);
        }
        C.w.push_back(w);
    }
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaDeviceSynchronize());
}

struct Timing {
    double event_s, graph_s;
};

// Median over `reps` individually event-timed launches, and per-launch time of a replayed graph.
template <class Launch>
Timing time_it(int ncopies, int reps, cudaStream_t st, Launch&& launch) {
    for (int i = 0; i < std::max(ncopies, 5); ++i) launch(i % ncopies);  // warm-up (and lazy init)
    CUDA_CHECK(cudaStreamSynchronize(st));
    std::vector<cudaEvent_t> ev(2 * size_t(reps));
    for (auto& e : ev) CUDA_CHECK(cudaEventCreate(&e));
    for (int i = 0; i < reps; ++i) {
        CUDA_CHECK(cudaEventRecord(ev[2 * i], st));
        launch(i % ncopies);
        CUDA_CHECK(cudaEventRecord(ev[2 * i + 1], st));
    }
    CUDA_CHECK(cudaStreamSynchronize(st));
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
        t.push_back(ms * 1e-3);
    }
    for (auto& e : ev) CUDA_CHECK(cudaEventDestroy(e));
    Timing r{median(t), 0};
    // Graph: `per` launches rotating through the copies, replayed.
    const int per = std::max(ncopies, 20);
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < per; ++i) launch(i % ncopies);
    CUDA_CHECK(cudaStreamEndCapture(st, &g));
    CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
    CUDA_CHECK(cudaGraphLaunch(ge, st));
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    std::vector<double> gt;
    for (int i = 0; i < 5; ++i) {
        CUDA_CHECK(cudaEventRecord(a, st));
        CUDA_CHECK(cudaGraphLaunch(ge, st));
        CUDA_CHECK(cudaEventRecord(b, st));
        CUDA_CHECK(cudaEventSynchronize(b));
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        gt.push_back(ms * 1e-3 / per);
    }
    r.graph_s = median(gt);
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    CUDA_CHECK(cudaGraphExecDestroy(ge));
    CUDA_CHECK(cudaGraphDestroy(g));
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    // --quick: fewer formats and reps; --only SUBSTR: shapes whose "model shape" contains SUBSTR (e.g. "9B lm");
    // --n K: only n = K (for profiling one kernel with ncu)
    bool quick = false;
    const char* only = nullptr;
    int only_n = 0;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--quick")) quick = true;
        else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!std::strcmp(argv[i], "--n") && i + 1 < argc) only_n = std::atoi(argv[++i]);
    }
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const double bw = copy_bandwidth();
    std::printf("# gemv_bench — %s, %d SMs, L2 %.0f MB\n\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6);
    std::printf("copy bandwidth (2 GiB D2D, read+write): **%.0f GB/s**\n\n", bw / 1e9);

    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const int64_t max_cols = 17408, max_rows = 248320, gemm_n = 512;
    float* x = static_cast<float*>(dmalloc(size_t(gemm_n * max_cols) * 4));
    float* y = static_cast<float*>(dmalloc(size_t(std::max(8 * max_rows, gemm_n * 17408)) * 4));
    fill_f32<<<1024, 256>>>(x, size_t(gemm_n * max_cols), 7, 2.0f);
    CUDA_CHECK(cudaDeviceSynchronize());

    const Fmt q4{"q4 g64", true, 4, 64}, q8{"q8 g64", true, 8, 64}, bf{"bf16", false, 0, 0};
    std::printf("## decode GEMV (n ≤ 8): time vs HBM floor\n\n");
    std::printf("| model | shape | rows×cols | format | n | kernel | µs (event median) | µs (graph) | MB | GB/s (graph) "
                "| floor µs | ratio | %% of copy bw |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    const int reps = quick ? 50 : 100;
    for (const Shape& s : kShapes) {
        const std::string label = std::string(s.model) + " " + s.name;
        if (only && label.find(only) == std::string::npos) continue;
        std::vector<const Fmt*> fmts = {&q4};
        if (!quick && (std::strcmp(s.name, "mlp gate/up") == 0 || std::strcmp(s.name, "lm head") == 0) &&
            std::strcmp(s.model, "27B") != 0)
            fmts = {&q4, &q8, &bf};
        for (const Fmt* f : fmts) {
            Copies C;
            make_copies(C, *f, s.rows, s.cols, size_t(prop.l2CacheSize));
            for (int n : {1, 4, 8}) {
                if (only_n && n != only_n) continue;
                const Timing t = time_it(int(C.w.size()), reps, st, [&](int i) {
                    linear(C.w[size_t(i)], x, n, y, st, nullptr, 0);
                });
                const double bytes = double(C.bytes) + 4.0 * n * (s.cols + s.rows);
                const double floor = bytes / bw;
                char kern[96];
                linear_gemv_describe(C.w[0], n, kern, sizeof kern);
                std::printf("| %s | %s | %lld×%lld | %s | %d | %s | %.1f | %.1f | %.1f | %.0f | %.1f | %.2f | %.0f %% |\n",
                            s.model, s.name, (long long)s.rows, (long long)s.cols, f->name, n, kern, t.event_s * 1e6,
                            t.graph_s * 1e6, bytes / 1e6, bytes / t.graph_s / 1e9, floor * 1e6, t.graph_s / floor,
                            100.0 * floor / t.graph_s);
                std::fflush(stdout);
            }
        }
    }

    std::printf("\n## prefill GEMM (n = %lld, bf16 tensor cores via cuBLAS after dequantizing to bf16)\n\n",
                (long long)gemm_n);
    std::printf("| model | shape | rows×cols | format | ms | TFLOP/s | HBM floor ms |\n|---|---|---|---|---|---|---|\n");
    for (const Shape& s : kShapes) {
        if (std::strcmp(s.name, "mlp gate/up") != 0 && std::strcmp(s.name, "mlp down") != 0) continue;
        if (only) continue;
        Copies C;
        make_copies(C, q4, s.rows, s.cols, size_t(prop.l2CacheSize));
        const size_t wsb = linear_workspace_bytes(C.w[0], gemm_n);
        void* ws = dmalloc(wsb);
        const Timing t = time_it(int(C.w.size()), quick ? 10 : 30, st, [&](int i) {
            linear(C.w[size_t(i)], x, gemm_n, y, st, ws, wsb);
        });
        const double flop = 2.0 * double(gemm_n) * double(s.rows) * double(s.cols);
        const double bytes = double(C.bytes) + 4.0 * gemm_n * (s.cols + s.rows);
        std::printf("| %s | %s | %lld×%lld | q4 g64 | %.3f | %.0f | %.3f |\n", s.model, s.name, (long long)s.rows,
                    (long long)s.cols, t.event_s * 1e3, flop / t.event_s / 1e12, bytes / bw * 1e3);
        std::fflush(stdout);
        CUDA_CHECK(cudaFree(ws));
    }
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(y));
    CUDA_CHECK(cudaStreamDestroy(st));
    return 0;
}
