// bench/cpu/linear_bench.cpp: linear() throughput — ms, GB/s of weight traffic vs. a measured read-bandwidth
// "speed of light", and GFLOP/s — for Qwen3.5-2B-like shapes in MLX 4-bit / 8-bit and dense bf16.
//
// Build (after building ember_ops/ember_quant/ember_core in build-lin), one line:
//   g++ -O3 -std=c++20 -fopenmp -Isrc bench/cpu/linear_bench.cpp build-lin/libember_ops.a
//       build-lin/libember_quant.a build-lin/libember_core.a -o build-lin/linear_bench
// Run: build-lin/linear_bench [--quick]      (threads: EMBER_THREADS, default all cores)
//
// "cold": the call cycles over enough copies of the matrix (≥ 192 MiB) that weights come from DRAM, as in
// real decoding; "hot": the same matrix every call (L3-resident when it fits).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "ops/linear/linear.h"

using namespace ember;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Mat {  // one random matrix
    std::vector<uint32_t> packed;
    std::vector<uint16_t> dense, s, b;
    Weight W;
};

Mat make(int64_t rows, int64_t cols, int bits, std::mt19937& rng) {
    Mat m;
    Weight& W = m.W;
    W.rows = rows, W.cols = cols;
    std::uniform_int_distribution<uint32_t> u32;
    auto bf = [&](float sd) { return f32_to_bf16(sd * (static_cast<float>(u32(rng) % 2001) / 1000.0f - 1.0f)); };
    if (bits == 16) {
        W.format = WeightFormat::DENSE, W.dtype = DType::BF16;
        m.dense.resize(rows * cols);
        for (auto& v : m.dense) v = bf(0.05f);
        W.data = m.dense.data();
        return m;
    }
    W.format = WeightFormat::AFFINE, W.bits = bits, W.group_size = 64, W.sb_dtype = DType::BF16;
    m.packed.resize(rows * cols * bits / 32);
    for (auto& v : m.packed) v = u32(rng);
    m.s.resize(rows * cols / 64), m.b.resize(rows * cols / 64);
    for (auto& v : m.s) v = bf(0.01f);
    for (auto& v : m.b) v = bf(0.05f);
    W.data = m.packed.data(), W.scales = m.s.data(), W.biases = m.b.data();
    return m;
}

// Read bandwidth of this machine over `bytes` (all threads), summing floats with a software prefetch.
// Other tenants make DRAM bandwidth fluctuate (measured 33-60 GB/s on the 2-core dev VM): compare a
// kernel's GB/s with the line printed by the same run.
double read_bw(size_t bytes) {
    std::vector<float> buf(bytes / 4, 1.0f);
    double best = 1e9;
    volatile float sink = 0;
    for (int rep = 0; rep < 5; ++rep) {
        double t0 = now_s();
        std::vector<float> part(num_threads() * 16, 0.0f);
        parallel_for(static_cast<int64_t>(buf.size() / 64), 1024, [&](int64_t b, int64_t e) {
            float acc[16] = {};
            for (int64_t i = b * 64; i < e * 64; i += 16) {
                __builtin_prefetch(&buf[i] + 1024);  // 4 KiB ahead, as the single-token kernels do
                for (int j = 0; j < 16; ++j) acc[j] += buf[i + j];
            }
            float s = 0;
            for (float a : acc) s += a;
            sink = sink + s;
        });
        best = std::min(best, now_s() - t0);
    }
    return static_cast<double>(bytes) / best / 1e9;
}

void run(const char* name, int64_t rows, int64_t cols, int bits, int64_t n, bool quick) {
    std::mt19937 rng(42);
    std::vector<Mat> mats;
    mats.push_back(make(rows, cols, bits, rng));
    const int64_t one = mats[0].W.total_bytes();
    const int copies = static_cast<int>(std::max<int64_t>(1, (int64_t{192} << 20) / one + 1));
    while (static_cast<int>(mats.size()) < copies) mats.push_back(make(rows, cols, bits, rng));
    std::vector<float> x(n * cols), y(n * rows);
    std::normal_distribution<float> nd;
    for (float& v : x) v = nd(rng);
    const double flop = 2.0 * rows * cols * n;
    for (int hot = 0; hot < 2; ++hot) {
        if (hot && copies == 1) break;  // already L3-cold with one copy
        const double budget = quick ? 0.3 : 1.5;
        std::vector<double> ts;
        double t_start = now_s();
        for (int it = 0; (now_s() - t_start < budget || it < 4) && it < 2000; ++it) {
            const Weight& W = mats[hot ? 0 : it % copies].W;
            double t0 = now_s();
            linear(W, x.data(), n, y.data());
            if (it > 0) ts.push_back(now_s() - t0);
        }
        std::sort(ts.begin(), ts.end());
        const double best = ts.front(), med = ts[ts.size() / 2];
        std::printf("%-9s %-5s %7lldx%-5lld n=%-3lld %-4s  best %8.3f ms  med %8.3f ms  %6.1f GB/s  %7.1f GFLOP/s  (%zu runs)\n",
                    name, bits == 16 ? "bf16" : (bits == 4 ? "q4" : "q8"), static_cast<long long>(rows),
                    static_cast<long long>(cols), static_cast<long long>(n), hot ? "hot" : "cold", best * 1e3, med * 1e3,
                    static_cast<double>(one) / med / 1e9, flop / med / 1e9, ts.size());
    }
}

}  // namespace

int main(int argc, char** argv) {
    const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    std::printf("threads %d; DRAM read speed of light %.1f GB/s (512 MiB read loop)\n", num_threads(),
                read_bw(size_t{512} << 20));
    struct Shape { const char* name; int64_t rows, cols; };
    const Shape shapes[] = {{"down", 2048, 6144}, {"up", 6144, 2048}, {"lm_head", 248320, 2048}};
    for (int bits : {4, 8, 16})
        for (const Shape& s : shapes)
            for (int64_t n : {1, 64}) {
                if (quick && bits != 4) continue;
                run(s.name, s.rows, s.cols, bits, n, quick);
            }
}
