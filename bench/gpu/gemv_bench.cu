// bench/gpu/gemv_bench.cu: ember::cuda::linear for decode / verify (n = 1, 2, 4, 8: one GEMV) against the speed
// of light measured in the same run (docs: performance.md):
//   1. Qwen3.5 2B/9B/27B projections and LM heads, MLX 4-bit group 64 bf16 scales (the checkpoints' format):
//      the streaming "q" kernel (default) next to the previous "mma" kernel, same weights, same run.
//   2. 8-bit g64 and dense bf16 on a few shapes.
//   3. GGML block types on SmolLM2-135M shapes (hidden 576, kv 192, ffn 1536, vocab 49152) and Llama-8B-like
//      4096×14336 / 14336×4096; Q4_0 / Q4_1 / Q8_0 also as the CUDA backend stores large ones (repacked exactly to
//      affine group 32 with F16 scales, weight_repack.h, run by the q kernel), with a summary table of the two.
//   4. (--sweep) launch-shape sweep of the q kernel (groups per MMA, K slices, programmatic dependent launch)
//      on four shapes, to tune the automatic choice.
//   4b. (--tiled, default on) large matrices (LM heads, ≥ 28 MB projections) as the CUDA upload stores the ≥ 64 MiB
//      ones: tiled (weight_tiles.h) and run by the "stream" kernel, next to the q kernel on the row-major copy —
//      MLX q4 g64 bf16 / q8 g64 bf16 and GGML Q4_0 / Q4_K / Q8_0 (repacked to affine g32 F16 / F32 first; Q4_1 is
//      Q4_0's format) and Q6_K (tiled from its blocks; compared with the Q6_K block kernel).
//   5. prefill n = 512: the exact GEMV in 8-token chunks (what linear() does) and the opt-in bf16 cuBLAS GEMM.
//
// Build: cmake -DEMBER_CUDA=ON (target gemv_bench), or see scripts/gpu-check.sh. Run: gemv_bench [--quick]
// [--only "9B lm"] [--n 1] [--sweep] [--no-ggml] [--no-prefill] [--hot]. Prints Markdown tables; a summary table
// last. --hot: one copy of each weight (matrices that fit stay in L2: the kernels' ceiling without HBM).
//
// Method: copy bandwidth = ember::cuda::copy_bandwidth_gbs (device-to-device copies, read + written bytes / time;
// the probe `ember bench` divides by).
// Each shape gets enough copies of its weights (≥ 3, together ≥ 4× the L2) that successive calls rotate through
// them and read HBM, never L2. Per (shape, n, kernel): warm-up, 100 launches each between two CUDA events
// (median), and a CUDA graph of the same rotating launches replayed 5× (median per launch: what a decode graph
// sees; bench_timing.cuh, shared with read_bench). bytes = weights + scales + biases + x + y; floor = bytes /
// copy bandwidth; % of copy bw = floor / time.
// Random data (hashed bits; scales of either sign; GGML d fields finite), never zeros.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "bench_fill.cuh"
#include "bench_timing.cuh"
#include "ops/linear/linear_cuda.h"
#include "ops/linear/weight_tiles.h"
#include "quant/ggml_type.h"

using namespace ember;
using ember::bench::median;
using namespace ember::bench;
using ember::cuda::GemvTuning;
using ember::cuda::linear;
using ember::cuda::linear_gemv;
using ember::cuda::linear_gemv_describe;

namespace {

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

// SmolLM2-135M (hidden 576, 9 heads / 3 kv heads of 64, ffn 1536, vocab 49152) and Llama-8B-like MLP shapes.
const Shape kGgmlShapes[] = {
    {"SmolLM2", "q / o", 576, 576},        {"SmolLM2", "k / v", 192, 576},   {"SmolLM2", "gate/up", 1536, 576},
    {"SmolLM2", "down", 576, 1536},        {"SmolLM2", "lm head", 49152, 576}, {"Llama-8B", "gate/up", 14336, 4096},
    {"Llama-8B", "down", 4096, 14336},
};

enum class Kind { AFFINE, DENSE, GGML };
struct Fmt {
    const char* name;
    Kind kind;
    int bits = 0, gs = 0;
    GgmlType gt = GgmlType::F32;
    DType sb = DType::BF16;  // AFFINE scales / biases
};

// Device copies of one random weight, rotated through to keep L2 cold (--hot: one copy, so a matrix that fits
// stays in L2 — the kernel's own ceiling, without HBM).
bool g_hot = false;
struct Copies {
    std::vector<Weight> w;
    std::vector<void*> bufs;
    int64_t bytes = 0;  // one copy (weights + scales + biases)
    ~Copies() {
        for (void* p : bufs) cudaFree(p);
    }
};

void half_fields(GgmlType t, int& o0, int& o1) {
    o0 = 0, o1 = -1;
    if (t == GgmlType::Q4_1 || t == GgmlType::Q4_K || t == GgmlType::Q5_K) o1 = 2;
    if (t == GgmlType::Q6_K) o0 = 208;
}

void make_copies(Copies& C, const Fmt& f, int64_t rows, int64_t cols, size_t l2) {
    Weight W;
    W.rows = rows, W.cols = cols;
    if (f.kind == Kind::AFFINE) {
        W.format = WeightFormat::AFFINE, W.bits = f.bits, W.group_size = f.gs, W.sb_dtype = f.sb;
    } else if (f.kind == Kind::GGML) {
        W.format = WeightFormat::GGML, W.ggml_type = f.gt;
    } else {
        W.format = WeightFormat::DENSE, W.dtype = DType::BF16;
    }
    C.bytes = W.total_bytes();
    const int ncopies = g_hot ? 1 : int(std::max<int64_t>(3, (4 * int64_t(l2) + C.bytes - 1) / C.bytes));
    const size_t data_b = size_t(W.rows * W.row_bytes());
    const size_t sb_n = f.kind == Kind::AFFINE ? size_t(rows * (cols / f.gs)) : 0;
    for (int i = 0; i < ncopies; ++i) {
        Weight w = W;
        void* d = dmalloc(data_b);
        C.bufs.push_back(d);
        w.data = d;
        if (f.kind == Kind::AFFINE) {
            fill_bytes<<<1024, 256>>>(static_cast<uint8_t*>(d), data_b, 1000 + i);
            void* s = dmalloc(sb_n * dtype_size(f.sb));
            void* b = dmalloc(sb_n * dtype_size(f.sb));
            C.bufs.push_back(s), C.bufs.push_back(b);
            if (f.sb == DType::F32) {
                fill_f32<<<1024, 256>>>(static_cast<float*>(s), sb_n, 2000 + i, 0.05f);
                fill_f32<<<1024, 256>>>(static_cast<float*>(b), sb_n, 3000 + i, 0.4f);
            } else if (f.sb == DType::F16) {
                fill_f16<<<1024, 256>>>(static_cast<__half*>(s), sb_n, 2000 + i, 0.05f);
                fill_f16<<<1024, 256>>>(static_cast<__half*>(b), sb_n, 3000 + i, 0.4f);
            } else {
                fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(s), sb_n, 2000 + i, 0.05f);
                fill_bf16<<<1024, 256>>>(static_cast<uint16_t*>(b), sb_n, 3000 + i, 0.4f);
            }
            w.scales = s, w.biases = b;
        } else if (f.kind == Kind::GGML) {
            fill_bytes<<<1024, 256>>>(static_cast<uint8_t*>(d), data_b, 1000 + i);
            const GgmlTypeTraits tr = ggml_type_traits(f.gt);
            int o0, o1;
            half_fields(f.gt, o0, o1);
            fix_halves<<<1024, 256>>>(static_cast<uint8_t*>(d), size_t(rows * (cols / tr.block_elems)), tr.block_bytes,
                                      o0, o1, 4000 + i);
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
    r.graph_s = bench::graph_seconds_per_launch(st, std::max(ncopies, 20), [&](int i) { launch(i % ncopies); });
    return r;
}

struct Ctx {
    double bw = 0;
    size_t l2 = 0;
    cudaStream_t st = nullptr;
    float* x = nullptr;
    float* y = nullptr;
    int reps = 100;
};

// Times linear_gemv(W, n) with `tune` (graph and event); returns graph seconds.
Timing time_gemv(const Ctx& c, const Copies& C, int n, const GemvTuning& tune) {
    return time_it(int(C.w.size()), c.reps, c.st,
                   [&](int i) { linear_gemv(C.w[size_t(i)], c.x, n, c.y, c.st, tune); });
}

double bytes_of(const Copies& C, const Shape& s, int n) { return double(C.bytes) + 4.0 * n * (s.cols + s.rows); }

struct Summary {
    std::string what;
    double new_us, old_us, pct;
};

// The copies of an AFFINE weight re-laid out as the upload stores large ones (weight_tiles.h): copy 0 tiled on the
// host, the others device copies of it (only the rotation matters for timing).
void make_tiled(const Copies& A, Copies& T) {
    const Weight& a = A.w[0];
    const size_t data_b = size_t(a.rows * a.row_bytes()), sb_b = size_t(a.rows * a.row_sb_bytes());
    std::vector<uint8_t> d(data_b), s(sb_b), b(sb_b);
    CUDA_CHECK(cudaMemcpy(d.data(), a.data, data_b, cudaMemcpyDeviceToHost));
    if (sb_b) {  // (AFFINE; GGML blocks carry their scales)
        CUDA_CHECK(cudaMemcpy(s.data(), a.scales, sb_b, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(b.data(), a.biases, sb_b, cudaMemcpyDeviceToHost));
    }
    Weight h = a;
    h.data = d.data(), h.scales = s.data(), h.biases = b.data();
    auto t = tile_weight(h);
    EMBER_CHECK(t.is_ok(), "%s", t.message().c_str());
    T.bytes = t.value().w.total_bytes();
    for (size_t i = 0; i < A.w.size(); ++i) {
        Weight w = t.value().w;
        void* dc = dmalloc(t.value().codes.size());
        void* ds = dmalloc(t.value().sb.size());
        T.bufs.push_back(dc), T.bufs.push_back(ds);
        CUDA_CHECK(cudaMemcpy(dc, t.value().codes.data(), t.value().codes.size(), cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(ds, t.value().sb.data(), t.value().sb.size(), cudaMemcpyHostToDevice));
        w.data = dc, w.scales = ds;
        T.w.push_back(w);
    }
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false, sweep = false, ggml = true, prefill = true, tiled = true;
    const char* only = nullptr;
    int only_n = 0;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--quick")) quick = true;
        else if (!std::strcmp(argv[i], "--sweep")) sweep = true;
        else if (!std::strcmp(argv[i], "--no-ggml")) ggml = false;
        else if (!std::strcmp(argv[i], "--hot")) g_hot = true;
        else if (!std::strcmp(argv[i], "--no-prefill")) prefill = false;
        else if (!std::strcmp(argv[i], "--no-tiled")) tiled = false;
        else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!std::strcmp(argv[i], "--n") && i + 1 < argc) only_n = std::atoi(argv[++i]);
    }
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    Ctx c;
    auto bwr = ember::cuda::copy_bandwidth_gbs();  // the engine's probe: the same floors as `ember bench`
    if (!bwr.is_ok()) {
        std::fprintf(stderr, "gemv_bench: %s\n", bwr.message().c_str());
        return 1;
    }
    c.bw = bwr.value() * 1e9;
    c.l2 = size_t(prop.l2CacheSize);
    c.reps = quick ? 30 : 100;
    std::printf("# gemv_bench — %s, %d SMs, L2 %.0f MB\n\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6);
    std::printf("copy bandwidth (D2D, read+write, ember::cuda::copy_bandwidth_gbs): **%.0f GB/s**\n\n", c.bw / 1e9);

    CUDA_CHECK(cudaStreamCreateWithFlags(&c.st, cudaStreamNonBlocking));
    const int64_t max_cols = 17408, max_rows = 248320, gemm_n = 512;
    c.x = static_cast<float*>(dmalloc(size_t(gemm_n * max_cols) * 4));
    c.y = static_cast<float*>(dmalloc(size_t(std::max(8 * max_rows, gemm_n * 17408)) * 4));
    fill_f32<<<1024, 256>>>(c.x, size_t(gemm_n * max_cols), 7, 2.0f);
    CUDA_CHECK(cudaDeviceSynchronize());
    auto want_n = [&](int n) { return !only_n || n == only_n; };
    std::vector<Summary> summary, ggml_summary;

    // ---- 1 + 2: affine (and dense) decode GEMV, new vs old kernel ----
    const Fmt q4{"q4 g64", Kind::AFFINE, 4, 64}, q8{"q8 g64", Kind::AFFINE, 8, 64}, bf{"bf16", Kind::DENSE};
    GemvTuning t_new, t_old;
    t_new.kernel = 1, t_old.kernel = 2;
    std::printf("## decode GEMV (n ≤ 8): streaming q kernel vs previous mma kernel (graph replay µs; event µs in "
                "parentheses)\n\n");
    std::printf("| model | shape | rows×cols | format | n | MB | floor µs | q kernel | q µs | q GB/s | q %% of copy bw "
                "| mma µs | mma %% | speed-up |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (const Shape& s : kShapes) {
        const std::string label = std::string(s.model) + " " + s.name;
        if (only && label.find(only) == std::string::npos) continue;
        std::vector<const Fmt*> fmts = {&q4};
        if (!quick && (!std::strcmp(s.name, "mlp gate/up") || !std::strcmp(s.name, "lm head")) &&
            std::strcmp(s.model, "27B") != 0)
            fmts = {&q4, &q8, &bf};
        for (const Fmt* f : fmts) {
            Copies C;
            make_copies(C, *f, s.rows, s.cols, c.l2);
            for (int n : {1, 2, 4, 8}) {
                if (!want_n(n)) continue;
                const double bytes = bytes_of(C, s, n), floor = bytes / c.bw;
                char kern[128];
                if (f->kind == Kind::DENSE) {
                    const Timing t = time_gemv(c, C, n, {});
                    linear_gemv_describe(C.w[0], n, kern, sizeof kern);
                    std::printf("| %s | %s | %lld×%lld | %s | %d | %.1f | %.1f | %s | %.1f (%.1f) | %.0f | %.0f %% | — | — "
                                "| — |\n",
                                s.model, s.name, (long long)s.rows, (long long)s.cols, f->name, n, bytes / 1e6,
                                floor * 1e6, kern, t.graph_s * 1e6, t.event_s * 1e6, bytes / t.graph_s / 1e9,
                                100.0 * floor / t.graph_s);
                    std::fflush(stdout);
                    continue;
                }
                const Timing tn = time_gemv(c, C, n, t_new);
                const Timing to = time_gemv(c, C, n, t_old);
                linear_gemv_describe(C.w[0], n, kern, sizeof kern, t_new);
                std::printf("| %s | %s | %lld×%lld | %s | %d | %.1f | %.1f | %s | %.1f (%.1f) | %.0f | %.0f %% | %.1f | "
                            "%.0f %% | %.2f× |\n",
                            s.model, s.name, (long long)s.rows, (long long)s.cols, f->name, n, bytes / 1e6, floor * 1e6,
                            kern, tn.graph_s * 1e6, tn.event_s * 1e6, bytes / tn.graph_s / 1e9,
                            100.0 * floor / tn.graph_s, to.graph_s * 1e6, 100.0 * floor / to.graph_s,
                            to.graph_s / tn.graph_s);
                std::fflush(stdout);
                char what[128];
                std::snprintf(what, sizeof what, "%s %s %s n=%d (%.0f MB)", s.model, s.name, f->name, n, bytes / 1e6);
                summary.push_back({what, tn.graph_s * 1e6, to.graph_s * 1e6, 100.0 * floor / tn.graph_s});
            }
        }
    }

    // ---- 3: GGML block types ----
    if (ggml) {
        const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0,
                                  GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
        std::printf("\n## decode GEMV, GGML block types (CUDA cores, exact fp32)\n\n");
        std::printf("| model | shape | rows×cols | type | n | MB | floor µs | µs (graph) | µs (event) | GB/s | %% of copy bw "
                    "|\n|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (const Shape& s : kGgmlShapes)
            for (GgmlType gt : types) {
                if (only && (std::string(s.model) + " " + s.name).find(only) == std::string::npos) continue;
                const GgmlTypeTraits tr = ggml_type_traits(gt);
                if (s.cols % tr.block_elems) continue;  // (K-quants need 256 | cols)
                if (quick && gt != GgmlType::Q4_0 && gt != GgmlType::Q4_1 && gt != GgmlType::Q8_0 && gt != GgmlType::Q4_K && gt != GgmlType::Q6_K) continue;
                const Fmt f{tr.name, Kind::GGML, 0, 0, gt};
                Copies C;
                make_copies(C, f, s.rows, s.cols, c.l2);
                // Q4_0 / Q4_1 / Q8_0 / Q4_K as the CUDA backend stores large ones: repacked exactly to affine g32 F16 (F32)
                // (weight_repack.h), run by the streaming affine kernel.
                const bool rep = gt == GgmlType::Q4_0 || gt == GgmlType::Q4_1 || gt == GgmlType::Q8_0 ||
                                 gt == GgmlType::Q4_K;
                const DType rep_sb = gt == GgmlType::Q4_K ? DType::F32 : DType::F16;
                char rep_name[64];
                std::snprintf(rep_name, sizeof rep_name, "%s as affine g32 %s", tr.name, dtype_name(rep_sb));
                const Fmt fa{rep_name, Kind::AFFINE, gt == GgmlType::Q8_0 ? 8 : 4, 32, GgmlType::F32, rep_sb};
                Copies CA;
                if (rep) make_copies(CA, fa, s.rows, s.cols, c.l2);
                for (int n : {1, 2, 4, 8}) {
                    if (!want_n(n) || (s.rows < 4096 && (n == 2 || n == 4))) continue;
                    const Timing t = time_gemv(c, C, n, {});
                    const double bytes = bytes_of(C, s, n), floor = bytes / c.bw;
                    std::printf("| %s | %s | %lld×%lld | %s | %d | %.2f | %.2f | %.1f | %.1f | %.0f | %.0f %% |\n", s.model,
                                s.name, (long long)s.rows, (long long)s.cols, tr.name, n, bytes / 1e6, floor * 1e6,
                                t.graph_s * 1e6, t.event_s * 1e6, bytes / t.graph_s / 1e9, 100.0 * floor / t.graph_s);
                    if (rep) {
                        const Timing ta = time_gemv(c, CA, n, {});
                        const double ba = bytes_of(CA, s, n), fa_s = ba / c.bw;
                        std::printf("| %s | %s | %lld×%lld | %s | %d | %.2f | %.2f | %.1f | %.1f | %.0f | %.0f %% |\n",
                                    s.model, s.name, (long long)s.rows, (long long)s.cols, rep_name, n, ba / 1e6,
                                    fa_s * 1e6, ta.graph_s * 1e6, ta.event_s * 1e6, ba / ta.graph_s / 1e9,
                                    100.0 * fa_s / ta.graph_s);
                        char what[128];
                        std::snprintf(what, sizeof what, "%s %s %s n=%d (%.0f MB)", s.model, s.name, tr.name, n,
                                      bytes / 1e6);
                        ggml_summary.push_back({what, ta.graph_s * 1e6, t.graph_s * 1e6, 100.0 * fa_s / ta.graph_s});
                    }
                    std::fflush(stdout);
                }
            }
    }

    // ---- 4b: large matrices, tiled stream kernel vs q kernel ----
    std::vector<Summary> tiled_summary;
    if (tiled) {
        struct TS { const char* name; int64_t rows, cols; };
        const TS ts[] = {{"2B lm head", 248320, 2048},      {"9B lm head", 248320, 4096},
                         {"27B lm head", 248320, 5120},     {"Llama-8B lm head", 128256, 4096},
                         {"9B mlp gate/up", 12288, 4096},   {"27B mlp gate/up", 17408, 5120}};
        const Fmt tf[] = {{"q4 g64 bf16", Kind::AFFINE, 4, 64},
                          {"Q4_0 as affine g32 f16", Kind::AFFINE, 4, 32, GgmlType::F32, DType::F16},
                          {"Q4_K as affine g32 f32", Kind::AFFINE, 4, 32, GgmlType::F32, DType::F32},
                          {"Q8_0 as affine q8 g32 f16", Kind::AFFINE, 8, 32, GgmlType::F32, DType::F16},
                          {"q8 g64 bf16", Kind::AFFINE, 8, 64},
                          {"Q6_K", Kind::GGML, 0, 0, GgmlType::Q6_K}};
        std::printf("\n## large matrices: tiled stream kernel vs q kernel (graph µs, n = 1 and 2)\n\n");
        std::printf("| shape | format | n | MB | floor µs | row-major µs (q kernel; Q6_K: block kernel) | %% of copy bw | "
                    "stream kernel | stream µs | stream GB/s | stream %% of copy bw (tiled bytes) | (source bytes) | "
                    "speed-up |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (const TS& sh : ts) {
            if (only && std::string(sh.name).find(only) == std::string::npos) continue;
            for (const Fmt& f : tf) {
                if ((f.gs != 64 || f.bits == 8) && std::string(sh.name).find("Llama") == std::string::npos &&
                    std::string(sh.name).find("9B lm") == std::string::npos)
                    continue;  // GGML and 8-bit formats on the Llama head and one more head
                Copies C, T;
                make_copies(C, f, sh.rows, sh.cols, c.l2);
                make_tiled(C, T);
                for (int n : {1, 2}) {
                    if (!want_n(n)) continue;
                    const Shape s{"", sh.name, sh.rows, sh.cols};
                    const double bytes = bytes_of(C, s, n), floor = bytes / c.bw;
                    const double tb = bytes_of(T, s, n), tfloor = tb / c.bw;
                    const Timing tq = time_gemv(c, C, n, t_new);  // (GGML: the block kernel)
                    const Timing tt = time_gemv(c, T, n, {});
                    char kern[128];
                    linear_gemv_describe(T.w[0], n, kern, sizeof kern);
                    std::printf("| %s | %s | %d | %.1f | %.1f | %.1f | %.0f %% | %s | %.1f | %.0f | %.1f %% | %.1f %% | %.2f× |\n",
                                sh.name, f.name, n, bytes / 1e6, floor * 1e6, tq.graph_s * 1e6, 100.0 * floor / tq.graph_s,
                                kern, tt.graph_s * 1e6, tb / tt.graph_s / 1e9, 100.0 * tfloor / tt.graph_s,
                                100.0 * floor / tt.graph_s, tq.graph_s / tt.graph_s);
                    std::fflush(stdout);
                    char what[160];
                    std::snprintf(what, sizeof what, "%s %s n=%d (%.0f MB)", sh.name, f.name, n, tb / 1e6);
                    tiled_summary.push_back({what, tt.graph_s * 1e6, tq.graph_s * 1e6, 100.0 * tfloor / tt.graph_s});
                }
            }
        }
    }

    // ---- 4: q-kernel launch-shape sweep ----
    if (sweep && !only) {
        std::printf("\n## q kernel sweep (q4 g64 bf16; graph µs; auto = the automatic choice)\n\n");
        std::printf("| shape | n | G | S | pdl | kernel | µs | %% of copy bw |\n|---|---|---|---|---|---|---|---|\n");
        const Shape sw[] = {{"2B", "gdn qkv", 6144, 2048}, {"9B", "mlp gate/up", 12288, 4096},
                            {"9B", "mlp down", 4096, 12288}, {"9B", "lm head", 248320, 4096}};
        for (const Shape& s : sw) {
            Copies C;
            make_copies(C, q4, s.rows, s.cols, c.l2);
            for (int n : {1, 8}) {
                const double floor = bytes_of(C, s, n) / c.bw;
                for (int G : {0, 4, 2, 1}) {
                    if (G && 8 / G < n) continue;
                    for (int S : {0, 1, 2, 4, 8, 16})
                        for (int pdl : {0, -1}) {
                            if (pdl && (G || S)) continue;  // PDL off only for the automatic shape
                            GemvTuning t = t_new;
                            t.q_groups = G, t.q_slices = S, t.q_pdl = pdl;
                            const Timing tm = time_gemv(c, C, n, t);
                            char kern[128];
                            linear_gemv_describe(C.w[0], n, kern, sizeof kern, t);
                            std::printf("| %s %s | %d | %s | %s | %s | %s | %.1f | %.0f %% |\n", s.model, s.name, n,
                                        G ? std::to_string(G).c_str() : "auto", S ? std::to_string(S).c_str() : "auto",
                                        pdl < 0 ? "off" : "on", kern, tm.graph_s * 1e6, 100.0 * floor / tm.graph_s);
                            std::fflush(stdout);
                        }
                }
            }
        }
    }

    // ---- 5: prefill ----
    if (prefill && !only) {
        std::printf("\n## prefill (n = %lld): exact GEMV in 8-token chunks (linear) and the opt-in bf16 cuBLAS GEMM\n\n",
                    (long long)gemm_n);
        std::printf("| model | shape | rows×cols | format | exact ms | bf16 GEMM ms | bf16 TFLOP/s | HBM floor ms "
                    "|\n|---|---|---|---|---|---|---|---|\n");
        for (const Shape& s : kShapes) {
            if (std::strcmp(s.name, "mlp gate/up") != 0 && std::strcmp(s.name, "mlp down") != 0) continue;
            if (quick && std::strcmp(s.model, "2B") != 0) continue;
            Copies C;
            make_copies(C, q4, s.rows, s.cols, c.l2);
            const Timing te = time_it(int(C.w.size()), quick ? 5 : 10, c.st, [&](int i) {
                linear(C.w[size_t(i)], c.x, gemm_n, c.y, c.st, nullptr, 0);
            });
            const size_t wsb = ember::cuda::linear_gemm_workspace_bytes(C.w[0], gemm_n);
            void* ws = dmalloc(wsb);
            const Timing tg = time_it(int(C.w.size()), quick ? 10 : 30, c.st, [&](int i) {
                ember::cuda::linear_gemm(C.w[size_t(i)], c.x, gemm_n, c.y, c.st, ws, wsb);
            });
            const double flop = 2.0 * double(gemm_n) * double(s.rows) * double(s.cols);
            const double bytes = double(C.bytes) + 4.0 * gemm_n * (s.cols + s.rows);
            std::printf("| %s | %s | %lld×%lld | q4 g64 | %.3f | %.3f | %.0f | %.3f |\n", s.model, s.name,
                        (long long)s.rows, (long long)s.cols, te.event_s * 1e3, tg.event_s * 1e3,
                        flop / tg.event_s / 1e12, bytes / c.bw * 1e3);
            std::fflush(stdout);
            CUDA_CHECK(cudaFree(ws));
        }
    }

    // ---- summary (last, so it is in the tail of the output) ----
    std::printf("\n## summary: q4 g64 decode GEMV, q kernel vs mma kernel (graph µs)\n\n");
    std::printf("| shape | q µs | mma µs | speed-up | q %% of copy bw |\n|---|---|---|---|---|\n");
    for (const Summary& s : summary)
        if (s.what.find("q4 g64") != std::string::npos)
            std::printf("| %s | %.1f | %.1f | %.2f× | %.0f %% |\n", s.what.c_str(), s.new_us, s.old_us,
                        s.old_us / s.new_us, s.pct);
    if (!ggml_summary.empty()) {
        std::printf("\n## summary: GGML Q4_0 / Q4_1 / Q8_0 / Q4_K, repacked affine (what the backend runs) vs the block kernel "
                    "(graph µs)\n\n| shape | affine µs | block kernel µs | speed-up | affine %% of copy bw |\n|---|---|---|---|---|\n");
        for (const Summary& s : ggml_summary)
            std::printf("| %s | %.1f | %.1f | %.2f× | %.0f %% |\n", s.what.c_str(), s.new_us, s.old_us, s.old_us / s.new_us,
                        s.pct);
    }
    if (!tiled_summary.empty()) {
        std::printf("\n## summary: large matrices, tiled stream kernel (what the upload stores ≥ 64 MiB as) vs q kernel "
                    "(graph µs; row-major = q kernel, Q6_K: block kernel)\n\n| shape | stream µs | row-major µs | speed-up | stream %% of "
                    "copy bw |\n|---|---|---|---|---|\n");
        for (const Summary& s : tiled_summary)
            std::printf("| %s | %.1f | %.1f | %.2f× | %.1f %% |\n", s.what.c_str(), s.new_us, s.old_us,
                        s.old_us / s.new_us, s.pct);
    }
    CUDA_CHECK(cudaFree(c.x));
    CUDA_CHECK(cudaFree(c.y));
    CUDA_CHECK(cudaStreamDestroy(c.st));
    return 0;
}
