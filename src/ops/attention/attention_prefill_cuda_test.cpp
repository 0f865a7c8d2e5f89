// GPU tests of the tensor-core prefill attention (attention_prefill.h) through gated_attention_core, against the
// fp64 CPU references composed as layers/gated_attention.cpp does (attention_cuda_test_util.h): ragged token
// counts around the tile and split edges, at pos0 = 0 and after an earlier prefill, head dims 64/128/256, GQA
// ratios 1/4/8, both product precisions, T up to 8192, CUDA-graph replay; and the timing table (DISABLED_).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "../../../bench/gpu/bench_timing.cuh"
#include "ops/attention/attention_cuda_test_util.h"
#include "ops/attention/attention_prefill.h"

namespace ember::cuda {
namespace {

using namespace attntest;

// Tokens checked against the reference: all of them up to 160, else the edges (first/last, query-tile and
// 64-token boundaries, the middle) and 40 random ones.
std::vector<int64_t> check_rows(int64_t n, uint64_t seed) {
    std::vector<int64_t> rows;
    if (n <= 160) {
        for (int64_t t = 0; t < n; ++t) rows.push_back(t);
        return rows;
    }
    std::set<int64_t> s = {0, 1, 2, 7, 8, 15, 16, 63, 64, 65, 127, 128, n / 2, n - 65, n - 64, n - 2, n - 1};
    std::mt19937_64 g(seed);
    while (s.size() < 57) s.insert(int64_t(g() % uint64_t(n)));
    for (int64_t t : s)
        if (t >= 0 && t < n) rows.push_back(t);
    return rows;
}

// The error budgets, from the product precision (attention_prefill.h):
//  - fp32-faithful: every product q·k and p·v carries ≤ 3·2⁻¹⁶ relative error (rms ≈ 2⁻¹⁷·√3 ≈ 1.3e-5),
//    summed in fp32, so the output's rel. L2 error is ~1e-5 (NMSE ~1e-10; bar 1e-9). Element errors have heavy
//    tails: in rows whose softmax sits on a few keys an output element is a difference of a few weights, each
//    off by the score error (up to 3·2⁻¹⁶·Σ|q_c k_c|·d^-½ ≈ 6e-4 absolute for d = 256), so the element bound is
//    3e-4·rms + 1e-4·|x| (the H200 measured ≤ 1.5e-4·rms over 1.5M checked elements of 130 cases).
//  - bf16: one product, 2⁻⁹ relative rms per factor, 128× the above: rel. L2 ≈ 2-3e-3 (NMSE ≤ 3e-5 leaves ~2×);
//    the element bound only catches gross errors (15 % of rms + 5 % of |x|: peaked rows have errors far in the
//    tail, measured up to 8 % of rms on the H200).
Budget budget(bool bf16) { return bf16 ? Budget{0.15, 0.05, 3e-5} : Budget{3e-4, 1e-4, 1e-9}; }

// n tokens at pos0 on (H, G, D); caches of pos0 + n + 37 rows (the split count depends on the capacity).
// kv_bf16: a bf16 cache (the reference on the rounded rows; fp32-faithful mode converts it with lo = 0, bf16 mode
// reads it in place).
ErrStats prefill_case(int64_t H, int64_t G, int64_t D, int64_t pos0, int64_t n, bool bf16, uint64_t seed,
                      bool kv_bf16 = false, bool paged = false) {
    GatedAttentionDims d = make_dims(H, G, D, D == 256 ? 64 : D / 2, pos0 + n + 37);
    d.prefill_bf16 = bf16;
    d.kv_bf16 = kv_bf16;
    Gpu gpu(d, n, paged, seed);
    std::vector<float> Kh, Vh;
    make_host_cache(d, pos0, seed, Kh, Vh);
    return check_call(gpu, Kh, Vh, pos0, n, seed + 1, check_rows(n, seed), budget(bf16));
}

struct Worst {
    double nmse = 0, max_rel = 0, bias = 0;
    void add(const ErrStats& s) {
        nmse = std::max(nmse, s.nmse);
        max_rel = std::max(max_rel, s.max_rel_rms);
        if (std::fabs(s.bias) > std::fabs(bias)) bias = s.bias;
    }
};
void print_case(const char* what, int64_t H, int64_t G, int64_t D, int64_t pos0, int64_t n, const ErrStats& s) {
    std::printf("  %s H=%2lld G=%lld D=%3lld pos0=%4lld n=%4lld: NMSE %.1e max|e|/rms %.1e (|x|/rms %.1f) bias %+.1e"
                " bad %d\n",
                what, (long long)H, (long long)G, (long long)D, (long long)pos0, (long long)n, s.nmse, s.max_rel_rms,
                s.worst_want, s.bias, s.bad);
}

TEST(AttentionPrefillCuda, MatchesReference) {
    SKIP_WITHOUT_GPU();
    uint64_t seed = 9000;
    for (int64_t D : {64, 128, 256})
        for (int64_t R : {1, 4, 8}) {
            Worst w;
            for (int64_t pos0 : {0, 1000})
                for (int64_t n : {2, 63, 64, 65, 129, 600, 2049}) {
                    const ErrStats e = prefill_case(2 * R, 2, D, pos0, n, false, seed += 10);
                    w.add(e);
                    if (e.bad || n >= 600) print_case("fp32", 2 * R, 2, D, pos0, n, e);
                }
            std::printf("prefill fp32 D=%3lld H=%2lld G=2: worst NMSE %.2e  max|e|/rms %.2e  bias %+.1e (n 2..2049, "
                        "pos0 0/1000)\n",
                        (long long)D, (long long)(2 * R), w.nmse, w.max_rel, w.bias);
        }
}

TEST(AttentionPrefillCuda, Bf16CacheMatchesReference) {
    SKIP_WITHOUT_GPU();
    uint64_t seed = 9700;
    for (bool bf16 : {false, true})
        for (const auto& c : std::vector<std::array<int64_t, 3>>{{8, 2, 256}, {16, 4, 256}, {8, 2, 128}, {6, 1, 96}, {4, 4, 64}}) {
            Worst w;
            for (int64_t pos0 : {0, 1000})
                for (int64_t n : {2, 65, 600}) w.add(prefill_case(c[0], c[1], c[2], pos0, n, bf16, seed += 10, true));
            std::printf("prefill %s, bf16 cache, D=%3lld H=%2lld G=%lld: worst NMSE %.2e  max|e|/rms %.2e\n",
                        bf16 ? "bf16" : "fp32", (long long)c[2], (long long)c[0], (long long)c[1], w.nmse, w.max_rel);
        }
}

// A paged cache (attention_cuda.h kKvPage; the sequence's pages shuffled in the pool): the prologue writes through
// the page list and the convert step gathers it, in both precisions, fp32 and bf16 caches.
TEST(AttentionPrefillCuda, PagedCacheMatchesReference) {
    SKIP_WITHOUT_GPU();
    uint64_t seed = 9900;
    for (bool kv16 : {false, true})
        for (bool bf16 : {false, true})
            for (const auto& c : std::vector<std::array<int64_t, 3>>{{8, 2, 256}, {6, 1, 96}, {4, 4, 64}}) {
                Worst w;
                for (int64_t pos0 : {0, 1000})
                    for (int64_t n : {2, 65, 600}) w.add(prefill_case(c[0], c[1], c[2], pos0, n, bf16, seed += 10, kv16, true));
                std::printf("prefill %s, paged %s cache, D=%3lld H=%2lld G=%lld: worst NMSE %.2e  max|e|/rms %.2e\n",
                            bf16 ? "bf16" : "fp32", kv16 ? "bf16" : "fp32", (long long)c[2], (long long)c[0],
                            (long long)c[1], w.nmse, w.max_rel);
            }
}

// Other head dims, GQA ratios that leave padding rows in a tile (3, 6, 18 heads per kv head), and Qwen3.5's
// shapes (8/2, 16/4, 24/4 heads at d = 256).
TEST(AttentionPrefillCuda, OddShapes) {
    SKIP_WITHOUT_GPU();
    const int64_t cfgs[][3] = {{3, 1, 16}, {6, 2, 32}, {6, 1, 96}, {18, 1, 64}, {12, 2, 128}, {8, 2, 256}, {16, 4, 256},
                               {24, 4, 256}};
    uint64_t seed = 9500;
    for (const auto& c : cfgs) {
        Worst w;
        for (int64_t pos0 : {0, 77})
            for (int64_t n : {5, 100, 333}) w.add(prefill_case(c[0], c[1], c[2], pos0, n, false, seed += 10));
        std::printf("prefill fp32 D=%3lld H=%2lld G=%lld: worst NMSE %.2e  max|e|/rms %.2e\n", (long long)c[2],
                    (long long)c[0], (long long)c[1], w.nmse, w.max_rel);
    }
}

// The 8-warp block (128 rows per K/V tile; d = 128, 256): flash + combine re-run with W = 8 on the state a whole
// call (prologue, conversion) left, against the same reference and budget.
TEST(AttentionPrefillCuda, EightWarpBlocksMatchReference) {
    SKIP_WITHOUT_GPU();
    uint64_t seed = 9600;
    for (bool bf16 : {false, true})
        for (int64_t D : {128, 256})
            for (int64_t R : {1, 4, 6, 8})
                for (const auto& pn : {std::pair<int64_t, int64_t>{0, 129}, std::pair<int64_t, int64_t>{0, 2049},
                                       std::pair<int64_t, int64_t>{1000, 65}, std::pair<int64_t, int64_t>{1000, 600}}) {
                    const int64_t pos0 = pn.first, n = pn.second, H = 2 * R;
                    SCOPED_TRACE(testing::Message() << "W=8 H=" << H << " D=" << D << " pos0=" << pos0 << " n=" << n
                                                    << (bf16 ? " bf16" : ""));
                    GatedAttentionDims d = make_dims(H, 2, D, D == 256 ? 64 : D / 2, pos0 + n + 37);
                    d.prefill_bf16 = bf16;
                    Gpu gpu(d, n);
                    std::vector<float> Kh, Vh;
                    make_host_cache(d, pos0, seed += 10, Kh, Vh);
                    const Inputs in = make_inputs(d, n, seed + 1);
                    gpu.stage(in, Kh, Vh, pos0, pos0);
                    gpu.call(n, nullptr);
                    CUDA_CHECK(cudaMemset(gpu.out.get(), 0xff, gpu.out.bytes()));
                    detail::attention_prefill(gpu.d, detail::prefill_q(gpu.d, n, gpu.ws.get()), gpu.qg.as<float>(),
                                              gpu.K.as<float>(), gpu.V.as<float>(), gpu.pos.as<int32_t>(), n,
                                              gpu.out.as<float>(), detail::prefill_workspace(gpu.d, n, gpu.ws.get()),
                                              nullptr, detail::PREFILL_FLASH | detail::PREFILL_COMBINE, 8);
                    CUDA_CHECK(cudaDeviceSynchronize());
                    const std::vector<float> got = gpu.result(n);
                    const std::vector<int64_t> rows = check_rows(n, seed);
                    const ErrStats e = expect_close(got, cpu_attention(d, in, Kh, Vh, pos0, n, nullptr, true, rows),
                                                    "out (W = 8)", rows, size_t(H * D), budget(bf16));
                    size_t unwritten = 0;
                    for (float x : got) unwritten += std::isnan(x);
                    EXPECT_EQ(unwritten, 0u);
                    if (e.bad || n == 2049) print_case(bf16 ? "W8 bf16" : "W8 fp32", H, 2, D, pos0, n, e);
                }
}

// bf16 mode: the same cases at a budget 128× looser; the measured error is printed.
TEST(AttentionPrefillCuda, Bf16MatchesReferenceLoosely) {
    SKIP_WITHOUT_GPU();
    uint64_t seed = 9700;
    for (int64_t D : {64, 128, 256}) {
        Worst w;
        for (int64_t pos0 : {0, 1000})
            for (int64_t n : {2, 65, 600, 2049}) {
                const ErrStats e = prefill_case(8, 2, D, pos0, n, true, seed += 10);
                w.add(e);
                if (e.bad) print_case("bf16", 8, 2, D, pos0, n, e);
            }
        std::printf("prefill bf16 D=%3lld H=8 G=2: worst NMSE %.2e  max|e|/rms %.2e\n", (long long)D, w.nmse,
                    w.max_rel);
    }
}

// Long contexts (keys up to T = 8192) on the Qwen3.5-2B shape, both precisions: one prefill of 8192 tokens, and
// 512 tokens after 7680 cached ones; the rel. L2 error of the checked rows is printed.
TEST(AttentionPrefillCuda, LongContextError) {
    SKIP_WITHOUT_GPU();
    uint64_t seed = 9900;
    for (bool bf16 : {false, true})
        for (const auto& pn : {std::pair<int64_t, int64_t>{0, 8192}, std::pair<int64_t, int64_t>{7680, 512}}) {
            const ErrStats s = prefill_case(8, 2, 256, pn.first, pn.second, bf16, seed += 10);
            std::printf("prefill %s H=8 G=2 D=256 pos0=%lld n=%lld (T ≤ 8192): rel. L2 %.2e  max|e|/rms %.2e  bias "
                        "%+.1e\n",
                        bf16 ? "bf16" : "fp32", (long long)pn.first, (long long)pn.second, std::sqrt(s.nmse),
                        s.max_rel_rms, s.bias);
        }
}

// A captured prefill replayed with new inputs and positions gives the eager bits and the reference.
TEST(AttentionPrefillCuda, GraphReplayWithNewPosition) {
    SKIP_WITHOUT_GPU();
    const int64_t n = 150;
    const GatedAttentionDims d = make_dims(8, 2, 256, 64, 3000);
    Gpu gpu(d, n);
    std::vector<float> Kh, Vh;
    make_host_cache(d, 2800, 31, Kh, Vh);
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    gpu.stage(make_inputs(d, n, 1), Kh, Vh, 5, 5);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    gpu.call(n, s);
    CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    uint64_t seed = 9950;
    for (int64_t pos0 : {0, 700, 2500, 40}) {
        SCOPED_TRACE(testing::Message() << "replay at pos0=" << pos0);
        const Inputs in = make_inputs(d, n, seed += 10);
        gpu.stage(in, Kh, Vh, pos0, pos0);
        CUDA_CHECK(cudaGraphLaunch(exec, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        const std::vector<float> replay = gpu.result(n);
        std::vector<float> Kc = Kh, Vc = Vh;
        const std::vector<int64_t> rows = check_rows(n, seed);
        expect_close(replay, cpu_attention(d, in, Kc, Vc, pos0, n, nullptr, true, rows), "graph out", rows,
                     size_t(d.n_heads * d.head_dim), budget(false));
        gpu.stage(in, Kh, Vh, pos0, pos0);
        gpu.call(n, s);
        CUDA_CHECK(cudaStreamSynchronize(s));
        EXPECT_EQ(std::memcmp(replay.data(), gpu.result(n).data(), replay.size() * 4), 0) << "graph != eager";
    }
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(s));
}

// The workspace covers every n ≤ max_tokens (the split partials are not monotone in n).
TEST(AttentionPrefillCuda, WorkspaceCoversEveryTokenCount) {
    const GatedAttentionDims d = make_dims(24, 4, 256, 64, 40000);
    const size_t ws = gated_attention_workspace_bytes(d, 600);
    for (int64_t n = 1; n <= 600; ++n) EXPECT_GE(ws, gated_attention_workspace_bytes(d, n)) << n;
    for (int64_t n : {2, 100, 513, 8192}) {
        const detail::PrefillPlan p = detail::prefill_plan(d, n);
        EXPECT_EQ(p.heads * p.tokens, 60) << n;  // 6 heads per kv head: 10 tokens of 6 rows, 4 padding rows
        EXPECT_GE(p.splits, 1);
        EXPECT_LE(p.splits, 16);
    }
}

// ---- timing (information only) -------------------------------------------------------------------------------

// µs of one fn(): one eager call (one-time host set-up such as the shared-memory opt-in stays outside the
// capture), then the benchmarks' method (bench/gpu/bench_timing.cuh: median of replays of a graph of `per` calls).
template <class F>
double graph_us(cudaStream_t s, int per, F&& fn) {
    fn();
    CUDA_CHECK(cudaStreamSynchronize(s));
    return bench::graph_seconds_per_launch(s, per, [&](int) { fn(); }) * 1e6;
}

// gated_attention_core on the Qwen3.5 shapes (d 256, rot 64): the tensor-core path (whole call, its stages, bf16
// mode) beside the previous per-token kernel; TFLOP/s = 4·H·d·Σ_t (pos0 + t + 1) / time (causal useful work).
TEST(AttentionPrefillCuda, DISABLED_Timing) {
    SKIP_WITHOUT_GPU();
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    struct Shape {
        const char* name;
        int64_t H, G;
    };
    std::printf("%-4s %5s %5s %3s | %8s %6s | %7s %7s %8s %7s | %3s %8s %7s %8s %6s | %8s %6s %8s %6s | %8s %6s | "
                "%5s\n",
                "", "n", "pos0", "spl", "new us", "TF/s", "prolog", "convert", "flash", "combine", "spl", "flash W8",
                "comb W8", "total W8", "TF/s", "bf16 us", "TF/s", "bf16 W8", "TF/s", "old us", "TF/s", "gain");
    for (const Shape& sh : {Shape{"2B", 8, 2}, Shape{"9B", 16, 4}, Shape{"27B", 24, 4}}) {
        GatedAttentionDims d = make_dims(sh.H, sh.G, 256, 64, 16384);
        const int64_t n_max = 8192;
        Gpu gpu(d, n_max);
        Inputs in;
        in.qg.resize(size_t(n_max * d.n_heads * 2 * d.head_dim));
        in.k.resize(size_t(n_max * d.n_kv * d.head_dim));
        in.v.resize(in.k.size());
        fill_uniform(in.qg.data(), in.qg.size(), 1, -2.f, 2.f);
        fill_uniform(in.k.data(), in.k.size(), 2, -2.f, 2.f);
        fill_uniform(in.v.data(), in.v.size(), 3, -2.f, 2.f);
        in.qn.assign(size_t(d.head_dim), 1.f);
        in.kn.assign(size_t(d.head_dim), 1.f);
        for (const auto& pn : {std::pair<int64_t, int64_t>{512, 0}, std::pair<int64_t, int64_t>{512, 4096},
                               std::pair<int64_t, int64_t>{2048, 0}, std::pair<int64_t, int64_t>{8192, 0}}) {
            const int64_t n = pn.first, pos0 = pn.second;
            gpu.stage(in, {}, {}, 0, pos0);
            CUDA_CHECK(cudaMemset(gpu.K.get(), 0x3c, gpu.K.bytes()));  // finite rows before pos0 (≈ 0.0115)
            CUDA_CHECK(cudaMemset(gpu.V.get(), 0x3c, gpu.V.bytes()));
            const double flops = 4.0 * double(d.n_heads * d.head_dim) * (double(n) * pos0 + 0.5 * double(n) * (n + 1));
            const int per = n >= 8192 ? 2 : 5;
            auto tf = [&](double us) { return flops / us * 1e-6; };
            auto call_us = [&](bool bf16) {
                gpu.d.prefill_bf16 = bf16;
                const double us = graph_us(s, per, [&] { gpu.call(n, s); });
                gpu.d.prefill_bf16 = false;
                return us;
            };
            // Stages alone, for a block size (the state a whole call left is valid input for each).
            void* pws = detail::prefill_workspace(gpu.d, n, gpu.ws.get());
            const float* q_ws = detail::prefill_q(gpu.d, n, gpu.ws.get());
            auto stage_us = [&](unsigned st, int W, bool bf16) {
                gpu.d.prefill_bf16 = bf16;
                if ((st & detail::PREFILL_COMBINE) && detail::prefill_plan(gpu.d, n, W).splits == 1) return 0.0;
                const double us = graph_us(s, per, [&] {
                    detail::attention_prefill(gpu.d, q_ws, gpu.qg.as<float>(), gpu.K.as<float>(), gpu.V.as<float>(),
                                              gpu.pos.as<int32_t>(), n, gpu.out.as<float>(), pws, s, st, W);
                });
                gpu.d.prefill_bf16 = false;
                return us;
            };
            const double t_new = call_us(false);
            const double t_conv = stage_us(detail::PREFILL_CONVERT, 4, false);
            const double t_flash = stage_us(detail::PREFILL_FLASH, 4, false);
            const double t_comb = stage_us(detail::PREFILL_COMBINE, 4, false);
            const double t_pro = t_new - t_conv - t_flash - t_comb;  // the q/k prologue (and launch gaps)
            const double t_f8 = stage_us(detail::PREFILL_FLASH, 8, false), t_c8 = stage_us(detail::PREFILL_COMBINE, 8, false);
            const double t_8 = t_pro + t_conv + t_f8 + t_c8;
            const double t_bf = call_us(true);
            const double t_bf8 = t_bf - stage_us(detail::PREFILL_FLASH, 4, true) - stage_us(detail::PREFILL_COMBINE, 4, true) +
                                 stage_us(detail::PREFILL_FLASH, 8, true) + stage_us(detail::PREFILL_COMBINE, 8, true);
            const double t_old = graph_us(s, n >= 8192 ? 1 : 2, [&] {
                detail::gated_attention_core_per_token(gpu.d, gpu.qg.as<float>(), gpu.k.as<float>(),
                                                       gpu.v.as<float>(), gpu.qn.as<float>(), gpu.kn.as<float>(),
                                                       gpu.K.as<float>(), gpu.V.as<float>(), gpu.pos.as<int32_t>(), n,
                                                       gpu.out.as<float>(), gpu.ws.get(), gpu.ws_bytes, s);
            });
            std::printf("%-4s %5lld %5lld %3d | %8.1f %6.1f | %7.1f %7.1f %8.1f %7.1f | %3d %8.1f %7.1f %8.1f %6.1f | "
                        "%8.1f %6.1f %8.1f %6.1f | %8.1f %6.1f | %4.1fx\n",
                        sh.name, (long long)n, (long long)pos0, detail::prefill_plan(gpu.d, n).splits, t_new, tf(t_new),
                        t_pro, t_conv, t_flash, t_comb, detail::prefill_plan(gpu.d, n, 8).splits, t_f8, t_c8, t_8,
                        tf(t_8), t_bf, tf(t_bf), t_bf8, tf(t_bf8), t_old, tf(t_old), t_old / t_new);
            std::fflush(stdout);
        }
    }
    CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace
}  // namespace ember::cuda
