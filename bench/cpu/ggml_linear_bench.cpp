// bench/cpu/ggml_linear_bench.cpp: linear() on GGML block weights — ms and GB/s of weight traffic per type vs. a
// measured read-bandwidth "speed of light" — for a 4096×4096 GEMV and the SmolLM2-135M LM head (49152×576;
// K-quants need cols % 256 == 0, so only the 32-element types and F16 apply there, as in real GGUF files).
//
// Build (after building ember_ops/ember_quant/ember_core in build-ggmlq), one line:
//   g++ -O3 -std=c++20 -fopenmp -Isrc bench/cpu/ggml_linear_bench.cpp build-ggmlq/libember_ops.a
//       build-ggmlq/libember_quant.a build-ggmlq/libember_core.a -o build-ggmlq/ggml_linear_bench
// Run: build-ggmlq/ggml_linear_bench [n=1] [portable|avx2|best] [TYPES]  (threads: EMBER_THREADS, default all
//      cores; TYPES a comma list such as Q4_K,Q6_K,mlx4)
// "mlx4" rows: MLX affine 4-bit g64 (bf16 scales/biases) of the same shape, for comparison. Block types run twice:
// fp32 activations (ember's default) and "+q8", llama.cpp's 8-bit activation rounding (Weight::act_q8).
//
// "cold": the call cycles over enough copies of the matrix (≥ 192 MiB) that weights come from DRAM, as in
// real decoding; "hot": the same matrix every call (L3-resident when it fits, 32 MiB L3 here).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/parallel.h"
#include "ops/linear/linear.h"
#include "ops/linear/linear_kernels.h"

using namespace ember;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Mat {
    std::vector<uint8_t> bytes;
    Weight W;
};

// For comparison: an MLX affine 4-bit, group-64, bf16-scale matrix of the same shape (the existing kernel).
Mat make_affine4(int64_t rows, int64_t cols, std::mt19937& rng) {
    Mat m;
    const int64_t wbytes = rows * cols / 2, sb = rows * (cols / 64) * 2;
    m.bytes.resize(static_cast<size_t>(wbytes + 2 * sb));
    for (auto& b : m.bytes) b = static_cast<uint8_t>(rng());
    for (int64_t i = wbytes; i < wbytes + 2 * sb; i += 2) {
        const uint16_t v = f32_to_bf16(static_cast<float>(rng() % 2001) / 1000.0f * 0.01f - 0.01f);
        std::memcpy(&m.bytes[i], &v, 2);
    }
    m.W.format = WeightFormat::AFFINE, m.W.bits = 4, m.W.group_size = 64, m.W.sb_dtype = DType::BF16;
    m.W.rows = rows, m.W.cols = cols, m.W.data = m.bytes.data();
    m.W.scales = m.bytes.data() + wbytes, m.W.biases = m.bytes.data() + wbytes + sb;
    return m;
}

// Random codes; every fp16 in the block (scales, mins; plain types: every value) set to a small random value.
Mat make(int64_t rows, int64_t cols, GgmlType t, std::mt19937& rng) {
    Mat m;
    const GgmlTypeTraits tr = ggml_type_traits(t);
    m.bytes.resize(static_cast<size_t>(rows * cols / tr.block_elems * tr.block_bytes));
    for (auto& b : m.bytes) b = static_cast<uint8_t>(rng());
    auto h = [&] { return f32_to_f16(static_cast<float>(rng() % 2001) / 1000.0f * 0.01f - 0.01f); };
    std::vector<int> at;
    if (tr.block_elems == 1) {
        for (size_t i = 0; i < m.bytes.size() / 2; ++i) {
            uint16_t v = h();
            std::memcpy(&m.bytes[2 * i], &v, 2);
        }
    } else {
        at = t == GgmlType::Q6_K ? std::vector<int>{208} : std::vector<int>{0, 2};
        for (size_t b = 0; b < m.bytes.size() / tr.block_bytes; ++b)
            for (int o : at) {
                uint16_t v = h();
                std::memcpy(&m.bytes[b * tr.block_bytes + o], &v, 2);
            }
    }
    m.W.format = WeightFormat::GGML, m.W.ggml_type = t, m.W.rows = rows, m.W.cols = cols, m.W.data = m.bytes.data();
    return m;
}

double read_bw(size_t bytes) {  // as bench/cpu/linear_bench.cpp
    std::vector<float> buf(bytes / 4, 1.0f);
    double best = 1e9;
    volatile float sink = 0;
    for (int rep = 0; rep < 5; ++rep) {
        double t0 = now_s();
        parallel_for(static_cast<int64_t>(buf.size() / 64), 1024, [&](int64_t b, int64_t e) {
            float acc[16] = {};
            for (int64_t i = b * 64; i < e * 64; i += 16) {
                __builtin_prefetch(&buf[i] + 1024);
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

// t == nullptr: the MLX affine 4-bit comparison matrix.
void run(int64_t rows, int64_t cols, const GgmlType* t, int64_t n, bool act_q8 = false) {
    std::mt19937 rng(42);
    auto mk = [&] { return t ? make(rows, cols, *t, rng) : make_affine4(rows, cols, rng); };
    std::vector<Mat> mats;
    mats.push_back(mk());
    const int64_t one = static_cast<int64_t>(mats[0].bytes.size());
    const int copies = static_cast<int>(std::max<int64_t>(1, (int64_t{192} << 20) / one + 1));
    while (static_cast<int>(mats.size()) < copies) mats.push_back(mk());
    for (Mat& m : mats) m.W.act_q8 = act_q8;
    std::vector<float> x(n * cols), y(n * rows);
    std::normal_distribution<float> nd;
    for (float& v : x) v = nd(rng);
    for (int hot = 0; hot < 2; ++hot) {
        std::vector<double> ts;
        const double t_start = now_s();
        for (int it = 0; (now_s() - t_start < 1.0 || it < 8) && it < 3000; ++it) {
            const double t0 = now_s();
            linear(mats[hot ? 0 : it % copies].W, x.data(), n, y.data());
            if (it > 0) ts.push_back(now_s() - t0);
        }
        std::sort(ts.begin(), ts.end());
        const double best = ts.front(), med = ts[ts.size() / 2];
        std::printf("%-5s%-3s %6lldx%-5lld n=%-3lld %-4s  best %7.3f ms  med %7.3f ms  %5.1f GB/s (best %5.1f)  %6.1f GFLOP/s\n",
                    t ? ggml_type_traits(*t).name : "mlx4", act_q8 ? "+q8" : "", static_cast<long long>(rows), static_cast<long long>(cols),
                    static_cast<long long>(n), hot ? "hot" : "cold", best * 1e3, med * 1e3, one / med / 1e9,
                    one / best / 1e9, 2.0 * rows * cols * n / med / 1e9);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const int64_t n = argc > 1 ? std::atoll(argv[1]) : 1;
    if (argc > 2 && std::strcmp(argv[2], "portable") == 0) linear_detail::set_isa_limit(linear_detail::Isa::Portable);
    if (argc > 2 && std::strcmp(argv[2], "avx2") == 0) linear_detail::set_isa_limit(linear_detail::Isa::Avx2);
    std::printf("threads %d; DRAM read speed of light %.1f GB/s (512 MiB read loop)\n", num_threads(),
                read_bw(size_t{512} << 20));
    const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q4_K,
                              GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::F16};
    const std::string only = argc > 3 ? std::string(",") + argv[3] + "," : "";  // e.g. "Q4_0,Q4_K,mlx4"
    auto want = [&](const char* name) { return only.empty() || only.find(std::string(",") + name + ",") != std::string::npos; };
    auto block = [](GgmlType t) { return ggml_type_traits(t).block_elems > 1; };
    for (const GgmlType& t : types)
        if (want(ggml_type_traits(t).name)) {
            run(4096, 4096, &t, n);
            if (block(t)) run(4096, 4096, &t, n, true);
        }
    if (want("mlx4")) run(4096, 4096, nullptr, n);
    for (const GgmlType& t : types)
        if (want(ggml_type_traits(t).name) && 576 % ggml_type_traits(t).block_elems == 0) {
            run(49152, 576, &t, n);
            if (block(t)) run(49152, 576, &t, n, true);
        }
    if (want("mlx4")) run(49152, 576, nullptr, n);
}
