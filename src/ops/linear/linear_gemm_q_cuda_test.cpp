// Tests of the tensor-core affine GEMM (linear_gemm_q.h) against the fp64 reference (linear_ref) on random
// weights: every block tile forced, K splits, 4/8-bit, groups 32/64/128, bf16/f16/f32 scales, ragged rows,
// tokens and columns (K % 64 == 32), NaN-poisoned outputs with a guard; both precisions; determinism; the
// dispatch of linear() for n > 8; graph capture; the {s, b'} pairs made once (as at upload) against per call. Skips without a GPU.
//
// Budgets (per output, A = Σ|s·q|·|x| + |b|·|x| over the row, see linear_cuda_test_util.h): the default
// precision has the GEMV's error (x' = hi + lo, |x − x'| ≤ 2⁻¹⁶|x|; exact code products; fp32 sums):
// 2e-5·A + 1e-6 (2⁻¹⁶ ≈ 1.5e-5 plus fp32 accumulation over ≤ 2,112 terms). BF16 precision rounds x once
// (|x − x̂| ≤ 2⁻⁹|x|): 2.5e-3·A + 1e-6 — and must be measurably worse than the default (it is not the same path).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <vector>

#include "ops/linear/linear_cuda_test_util.h"
#include "ops/linear/linear_gemm_q.h"

namespace ember::cuda {
namespace {

using namespace lintest;

double budget_for(GemmPrecision p, const Case& c, size_t i) {
    return (p == GemmPrecision::FP32 ? 2e-5 : 2.5e-3) * c.A[i] + 1e-6;
}

void run_gemm(const Case& c, int64_t n, float* y, GemmPrecision p, const GemmPlan& plan, cudaStream_t st = nullptr) {
    const size_t b = gemm_q_workspace_bytes(c.dw, n, plan);
    DeviceBuffer ws = dalloc(b);
    gemm_q(c.dw, c.d_x.as<float>(), n, y, st, ws.get(), b, p, plan);
}

void check_gemm(const Case& c, int64_t n, GemmPrecision p, const GemmPlan& plan, const char* what) {
    SCOPED_TRACE(testing::Message() << fmt_name(c.f) << " rows=" << c.rows << " cols=" << c.cols << " n=" << n
                                    << " cfg=" << plan.config << " split=" << plan.split << " "
                                    << (p == GemmPrecision::FP32 ? "fp32" : "bf16") << " " << what);
    check_poisoned(size_t(n * c.rows), c.rows, c.ref, [&](size_t i) { return budget_for(p, c, i); },
                   [&](float* y) { run_gemm(c, n, y, p, plan); });
}

std::vector<Fmt> gemm_formats() {
    std::vector<Fmt> v;
    for (int bits : {4, 8})
        for (int gs : {32, 64, 128})
            for (DType t : {DType::BF16, DType::F16, DType::F32}) v.push_back({true, t, bits, gs});
    return v;
}

// Every block tile, on ragged shapes: rows not a multiple of any tile, tokens not a multiple of 8 or the tile,
// columns of one group, several groups, and (group 32) K % 64 == 32.
TEST(GemmQCuda, EveryTileMatchesReference) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 5000;
    for (const Fmt& f : gemm_formats()) {
        const std::vector<int64_t> cols = {f.gs, 3 * f.gs, 1024 + f.gs};
        for (int64_t K : cols) {
            auto c = make_case(f, 300, K, 133, seed++);
            for (int cfg = 0; cfg < gemm_q_configs(); ++cfg)
                for (int64_t n : {int64_t(5), int64_t(9), int64_t(133)})  // (5: EMBER_GEMM_FROM_ROWS)
                    check_gemm(*c, n, GemmPrecision::FP32, {cfg, 1}, "tile");
        }
    }
}

// K splits (forced, incl. more slices than groups allow: clamped), group 128 (two stages per group) included.
TEST(GemmQCuda, KSplitsMatchReference) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 5200;
    for (const Fmt& f : {Fmt{true, DType::BF16, 4, 64}, Fmt{true, DType::BF16, 4, 128}, Fmt{true, DType::F16, 4, 32},
                         Fmt{true, DType::F32, 8, 32}, Fmt{true, DType::BF16, 8, 128}}) {
        auto c = make_case(f, 520, 2048 + f.gs, 70, seed++);
        for (int split : {2, 3, 8, 100})
            for (int cfg = 0; cfg < gemm_q_configs(); ++cfg)
                check_gemm(*c, 70, GemmPrecision::FP32, {cfg, split}, "split");
    }
}

// One row, one token tile edge, tiny shapes, and the rule's own choice over a range of n.
TEST(GemmQCuda, RuleChoiceAndEdgeShapes) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 5300;
    for (const auto& [rows, cols, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {1, 64, 9}, {17, 32, 200}, {16, 2048, 512}, {2048, 2048, 40}, {1000, 576, 17}, {6144, 256, 64}}) {
        auto c = make_case({true, DType::BF16, 4, 32}, rows, cols, n, seed++);
        for (int64_t m : {int64_t(9), n}) {
            if (m > n) continue;
            char buf[96];
            check_gemm(*c, m, GemmPrecision::FP32, {}, gemm_q_describe(c->dw, m, buf, sizeof buf));
        }
    }
}

// fp64 reference y and budget magnitudes A ([c.ntok, c.rows]) of a case made without its reference, on the sampled
// rows only (zeros elsewhere).
void sampled_reference(const Case& c, const std::vector<char>& sampled, std::vector<double>& ref, std::vector<double>& A) {
    const int64_t rows = c.rows, cols = c.cols, nmax = c.ntok;
    ref.assign(size_t(nmax * rows), 0.0), A.assign(size_t(nmax * rows), 0.0);
    std::vector<double> w(static_cast<size_t>(cols)), a(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        if (!sampled[size_t(r)]) continue;
        affine_row_values(c, r, w.data(), a.data());
        for (int64_t t = 0; t < nmax; ++t) {
            double sy = 0, sa = 0;
            const float* xt = c.x.data() + t * cols;
            for (int64_t k = 0; k < cols; ++k) sy += w[size_t(k)] * xt[k], sa += a[size_t(k)] * std::fabs(xt[k]);
            ref[size_t(t * rows + r)] = sy, A[size_t(t * rows + r)] = sa;
        }
    }
}

// The rule's own plan on the shapes of the 2B and 9B models (incl. the 248,320-row LM heads) at the row counts
// of a batched decode step (9-64 tokens): K splits of uneven slices, the 16-token tiles, partial budgets capped
// at 32 MiB. The whole output is poisoned (an entry never written fails) with a guard after it; values against the
// fp64 reference (as set_x, affine_row_values) on sampled rows, every tile edge of the last rows included.
TEST(GemmQCuda, RuleChoiceOnModelShapesMatchesReference) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 5400;
    const Fmt f{true, DType::BF16, 4, 64};  // the synthetic and MLX models' format
    for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{248320, 4096}, {24576, 4096},
                                                                             {4096, 12288}, {12352, 4096},
                                                                             {8192, 4096}, {1024, 4096},
                                                                             {248320, 2048}, {2048, 6144}}) {
        const int64_t nmax = 64;
        auto c = make_case(f, rows, cols, nmax, seed++, 0, false);  // the whole reference: too slow here
        std::vector<char> sampled(static_cast<size_t>(rows), 0);
        for (int64_t r = 0; r < rows; r += rows / 97 + 1) sampled[size_t(r)] = 1;  // over every slice of rows
        for (int64_t r = rows - 1; r >= std::max<int64_t>(0, rows - 450); r -= 7) sampled[size_t(r)] = 1;  // last row on
        std::vector<double> refd, A;
        sampled_reference(*c, sampled, refd, A);
        const std::vector<float> ref(refd.begin(), refd.end());
        for (int64_t n : {9, 12, 13, 14, 15, 16, 17, 20, 24, 32, 48, 64}) {
            char buf[96];
            SCOPED_TRACE(testing::Message() << "rows=" << rows << " cols=" << cols << " n=" << n << " "
                                            << gemm_q_describe(c->dw, n, buf, sizeof buf));
            // Unsampled entries: any finite value passes, the poison (NaN) does not.
            check_poisoned(size_t(n * rows), rows, ref,
                           [&](size_t i) { return sampled[i % size_t(rows)] ? 2e-5 * A[i] + 1e-6 : INFINITY; },
                           [&](float* y) { run_gemm(*c, n, y, GemmPrecision::FP32, {}); });
        }
    }
}

// y [n, W.rows] of the GEMM on W (host copy), plan forced.
std::vector<float> gemm_host(const Weight& W, const Case& c, int64_t n, const GemmPlan& plan) {
    const size_t b = gemm_q_workspace_bytes(W, n, plan);
    DeviceBuffer ws = dalloc(b), dy = dalloc(size_t(n * W.rows) * 4);
    gemm_q(W, c.d_x.as<float>(), n, dy.as<float>(), nullptr, ws.get(), b, GemmPrecision::FP32, plan);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> y(size_t(n * W.rows));
    copy_to_host(y.data(), dy.get(), y.size() * 4);
    return y;
}

// Every tile, no K split, on weights of many waves (the 9B's 248,320-row LM head: 1,109 blocks of a 224-row tile,
// several per SM in turn) and of about two waves (59,136 rows), each plan run twice: values against the fp64
// reference on every 13th row (and the last rows), and the two runs bit for bit. On a failure the bad rows are
// described by their place in a 224-row tile (which consumer warp) and their block (first wave or later).
TEST(GemmQCuda, ManyWavesEveryTileMatchesReference) {
    SKIP_WITHOUT_GPU();
    const Fmt f{true, DType::BF16, 4, 64};
    uint32_t seed = 5700;
    for (const int64_t rows : {int64_t(248320), int64_t(59136)}) {
        const int64_t cols = 4096, nmax = 24;
        auto c = make_case(f, rows, cols, nmax, seed++, 0, false);
        std::vector<char> sampled(static_cast<size_t>(rows), 0);
        for (int64_t r = 0; r < rows; r += 13) sampled[size_t(r)] = 1;
        for (int64_t r = rows - 1; r >= rows - 450; r -= 3) sampled[size_t(r)] = 1;
        std::vector<double> ref, A;
        sampled_reference(*c, sampled, ref, A);
        for (int cfg = 0; cfg < gemm_q_configs(); ++cfg)
            for (int64_t n : {9, 16, 24}) {
                const GemmPlan plan{cfg, 1};
                char buf[96];
                SCOPED_TRACE(testing::Message() << "rows=" << rows << " n=" << n << " "
                                                << gemm_q_describe(c->dw, n, buf, sizeof buf, plan));
                const std::vector<float> y1 = gemm_host(c->dw, *c, n, plan), y2 = gemm_host(c->dw, *c, n, plan);
                size_t bad = 0, differ = 0, first_wave = 0;
                int warp_hist[7] = {};
                std::vector<int64_t> bad_rows;
                for (int64_t r = 0; r < rows; ++r) {
                    bool rbad = false;
                    for (int64_t t = 0; t < n; ++t) {
                        const size_t i = size_t(t * rows + r);
                        differ += std::memcmp(&y1[i], &y2[i], 4) != 0;
                        if (sampled[size_t(r)] && !(std::fabs(y1[i] - ref[i]) <= 2e-5 * A[i] + 1e-6)) ++bad, rbad = true;
                    }
                    if (rbad) {
                        ++warp_hist[(r % 224) / 32];
                        first_wave += r / 224 < 264;
                        if (bad_rows.size() < 8) bad_rows.push_back(r);
                    }
                }
                EXPECT_EQ(bad, 0u) << "entries off the reference";
                EXPECT_EQ(differ, 0u) << "entries differing between two runs";
                if (bad || differ) {
                    std::printf("  %s rows %lld n %lld: %zu bad entries, %zu differ between runs; bad rows by "
                                "224-tile warp:", buf, (long long)rows, (long long)n, bad, differ);
                    for (int h : warp_hist) std::printf(" %d", h);
                    std::printf("; in blocks < 264: %zu; first:", first_wave);
                    for (int64_t r : bad_rows) std::printf(" %lld", (long long)r);
                    std::printf("\n");
                }
            }
    }
}

// Pairs made once (gemm_q_make_pairs, as the upload does) give the bits of pairs made per call, on every tile,
// K splits, every group size and scale type, ragged shapes; so do row views of the weight (an even first row
// reads the parent's pairs; an odd one cannot, and falls back to per-call pairs), against the whole weight's rows.
TEST(GemmQCuda, PairsMadeOnceGiveTheSameBits) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 5600;
    for (const Fmt& f : gemm_formats()) {
        const int64_t rows = 301, K = f.gs == 32 ? 1024 + 32 : 1024 + f.gs, n = 37;
        auto c = make_case(f, rows, K, n, seed++);
        const size_t pb = gemm_q_pairs_bytes(c->dw);
        ASSERT_GT(pb, 0u);
        DeviceBuffer pairs = dalloc(pb);
        CUDA_CHECK(cudaMemset(pairs.get(), 0xff, pb));  // every entry the kernels read must be written
        gemm_q_make_pairs(c->dw, pairs.get(), nullptr);
        Weight wp = c->dw;
        wp.gemm_pairs = pairs.get(), wp.gemm_pairs_ld = gemm_q_pairs_ld(c->dw);
        for (int cfg : {0, 2, 4, 5, 6, 7})
            for (int split : {1, 3}) {
                SCOPED_TRACE(testing::Message() << fmt_name(f) << " cfg " << cfg << " split " << split);
                const GemmPlan plan{cfg, split};
                const std::vector<float> want = gemm_host(c->dw, *c, n, plan), got = gemm_host(wp, *c, n, plan);
                ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0) << "pairs made once differ";
                for (int64_t r0 : {int64_t(2), int64_t(3)}) {
                    const int64_t r1 = rows - 5;
                    const std::vector<float> v = gemm_host(wp.rows_view(r0, r1), *c, n, plan);
                    size_t bad = 0;
                    for (int64_t t = 0; t < n; ++t)
                        for (int64_t r = r0; r < r1; ++r)
                            bad += std::memcmp(&v[size_t(t * (r1 - r0) + r - r0)], &want[size_t(t * rows + r)], 4) != 0;
                    EXPECT_EQ(bad, 0u) << "rows_view(" << r0 << ", " << r1 << ")";
                }
            }
        check_poisoned(size_t(n * rows), rows, c->ref, [&](size_t i) { return budget_for(GemmPrecision::FP32, *c, i); },
                       [&](float* y) {
                           const size_t b = gemm_q_workspace_bytes(wp, n);
                           DeviceBuffer ws = dalloc(b);
                           gemm_q(wp, c->d_x.as<float>(), n, y, nullptr, ws.get(), b);
                       });
    }
}

// BF16 precision: within its own budget, and measurably less accurate than the default (a different product).
TEST(GemmQCuda, Bf16PrecisionWithinItsBudget) {
    SKIP_WITHOUT_GPU();
    auto c = make_case({true, DType::BF16, 4, 64}, 384, 2048, 96, 5400);
    check_gemm(*c, 96, GemmPrecision::BF16, {}, "bf16");
    auto err = [&](GemmPrecision p) {
        DeviceBuffer dy = dalloc(size_t(96 * 384) * 4);
        run_gemm(*c, 96, dy.as<float>(), p, {});
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<float> y(size_t(96 * 384));
        copy_to_host(y.data(), dy.get(), y.size() * 4);
        double e = 0, r = 0;
        for (size_t i = 0; i < y.size(); ++i) e += (y[i] - c->ref[i]) * double(y[i] - c->ref[i]), r += c->ref[i] * double(c->ref[i]);
        return std::sqrt(e / r);
    };
    const double e32 = err(GemmPrecision::FP32), e16 = err(GemmPrecision::BF16);
    std::printf("rel. L2 error vs fp64: default %.3g, bf16 %.3g\n", e32, e16);
    EXPECT_LT(e32, 1e-5);
    EXPECT_GT(e16, 10 * e32);
    EXPECT_LT(e16, 1e-2);
}

// Same inputs → the same bits (two runs, and a CUDA graph replayed twice), with a K split.
TEST(GemmQCuda, DeterministicAndCapturable) {
    SKIP_WITHOUT_GPU();
    auto c = make_case({true, DType::BF16, 4, 64}, 1000, 4096, 300, 5500);
    const size_t ny = size_t(300 * 1000);
    auto once = [&](bool graph) {
        DeviceBuffer dy = dalloc(ny * 4);
        const GemmPlan plan{0, 3};
        const size_t b = gemm_q_workspace_bytes(c->dw, 300, plan);
        DeviceBuffer ws = dalloc(b);
        cudaStream_t st;
        CUDA_CHECK(cudaStreamCreate(&st));
        if (graph) {
            cudaGraph_t g;
            cudaGraphExec_t ge;
            CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
            gemm_q(c->dw, c->d_x.as<float>(), 300, dy.as<float>(), st, ws.get(), b, GemmPrecision::FP32, plan);
            CUDA_CHECK(cudaStreamEndCapture(st, &g));
            CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
            CUDA_CHECK(cudaMemset(dy.get(), 0xff, ny * 4));
            CUDA_CHECK(cudaGraphLaunch(ge, st));  // twice: a replay leaves nothing behind that changes the next
            CUDA_CHECK(cudaGraphLaunch(ge, st));
            CUDA_CHECK(cudaStreamSynchronize(st));
            CUDA_CHECK(cudaGraphExecDestroy(ge));
            CUDA_CHECK(cudaGraphDestroy(g));
        } else {
            gemm_q(c->dw, c->d_x.as<float>(), 300, dy.as<float>(), st, ws.get(), b, GemmPrecision::FP32, plan);
            CUDA_CHECK(cudaStreamSynchronize(st));
        }
        CUDA_CHECK(cudaStreamDestroy(st));
        std::vector<float> y(ny);
        copy_to_host(y.data(), dy.get(), ny * 4);
        return y;
    };
    const auto a = once(false), b = once(false), g = once(true);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), ny * 4));
    EXPECT_EQ(0, std::memcmp(a.data(), g.data(), ny * 4));
}

// The output split by rows into separate arrays (a stacked weight's parts: Qwen3.5's [qkv | z | b | a]): the
// parts laid end to end in one poisoned buffer, each [n, rows_k], against the reference rows they hold; tiles of
// both kernels, with and without a K split (the reduction writes the parts), parts smaller than a row tile and
// straddling tile edges; linear_parts() for n ≤ 8 (the split GEMV) and n > 8 (one GEMM); linear_parts_fused().
TEST(GemmQCuda, OutputSplitByRows) {
    SKIP_WITHOUT_GPU();
    const int64_t rows = 300;
    const std::vector<int64_t> ends = {37, 237, 253, 300};
    auto c = make_case({true, DType::BF16, 4, 64}, rows, 1024, 70, 5700);
    auto split_layout = [&](int64_t n, std::vector<float>& ref, std::vector<size_t>& src) {
        ref.clear(), src.clear();
        for (size_t k = 0; k < ends.size(); ++k) {
            const int64_t r0 = k ? ends[k - 1] : 0;
            for (int64_t t = 0; t < n; ++t)
                for (int64_t r = r0; r < ends[k]; ++r) {
                    src.push_back(size_t(t * rows + r));
                    ref.push_back(c->ref[size_t(t * rows + r)]);
                }
        }
    };
    auto parts_of = [&](float* y, int64_t n, GemmOutSplit& out) {
        out.parts = int(ends.size());
        for (size_t k = 0; k < ends.size(); ++k) {
            out.end[k] = ends[k];
            out.y[k] = y;
            y += n * (ends[k] - (k ? ends[k - 1] : 0));
        }
    };
    std::vector<float> ref;
    std::vector<size_t> src;
    for (int64_t n : {int64_t(9), int64_t(70)}) {
        split_layout(n, ref, src);
        for (const GemmPlan plan : {GemmPlan{0, 1}, GemmPlan{0, 3}, GemmPlan{5, 1}, GemmPlan{6, 1}, GemmPlan{6, 4},
                                    GemmPlan{7, 2}, GemmPlan{}}) {
            SCOPED_TRACE(testing::Message() << "n=" << n << " cfg=" << plan.config << " split=" << plan.split);
            check_poisoned(ref.size(), rows, ref, [&](size_t i) { return budget_for(GemmPrecision::FP32, *c, src[i]); },
                           [&](float* y) {
                               GemmOutSplit out;
                               parts_of(y, n, out);
                               const size_t b = gemm_q_workspace_bytes(c->dw, n, plan);
                               DeviceBuffer ws = dalloc(b);
                               gemm_q_split_out(c->dw, c->d_x.as<float>(), n, out, nullptr, ws.get(), b,
                                                GemmPrecision::FP32, plan);
                           });
        }
    }
    // linear_parts over row views of the weight: the GEMV per part at n ≤ 8, one GEMM above.
    std::vector<Weight> views;
    for (size_t k = 0; k < ends.size(); ++k) views.push_back(c->dw.rows_view(k ? ends[k - 1] : 0, ends[k]));
    const Weight* pv[4] = {&views[0], &views[1], &views[2], &views[3]};
    for (int64_t n : {int64_t(3), int64_t(8), int64_t(9), int64_t(70)}) {
        split_layout(n, ref, src);
        SCOPED_TRACE(testing::Message() << "linear_parts n=" << n);
        check_poisoned(ref.size(), rows, ref, [&](size_t i) { return budget(Path::GEMV, *c, src[i]); },
                       [&](float* y) {
                           GemmOutSplit out;
                           parts_of(y, n, out);
                           const size_t b = linear_workspace_bytes(c->dw, n);
                           DeviceBuffer ws = dalloc(b ? b : 1);
                           linear_parts(c->dw, pv, out.y, 4, c->d_x.as<float>(), n, nullptr, ws.get(), b);
                       });
    }
    // The fused form of batched decode rows (RMSNorm prologue, q kernel): its parts hold exactly what
    // linear_fused over the whole weight writes (the same kernel and plan; linear_fused is tested against the
    // separate ops in linear_fused_cuda_test.cpp).
    std::vector<float> nw(size_t(c->cols));
    for (size_t i = 0; i < nw.size(); ++i) nw[i] = 0.5f + 0.001f * float(i % 997);
    DeviceBuffer dn = dalloc(nw.size() * 4);
    copy_to_device(dn.get(), nw.data(), nw.size() * 4);
    LinearFusion f;
    f.norm_w = dn.as<float>(), f.eps = 1e-6f;
    ASSERT_TRUE(linear_fused_native_q(c->dw, 8));
    for (int64_t n : {int64_t(2), int64_t(5), int64_t(8)}) {
        SCOPED_TRACE(testing::Message() << "linear_parts_fused n=" << n);
        const size_t ny = size_t(n * rows);
        DeviceBuffer whole = dalloc(ny * 4), parts = dalloc(ny * 4);
        CUDA_CHECK(cudaMemset(parts.get(), 0xff, ny * 4));
        GemvTuning t;
        t.kernel = 1;
        linear_fused(c->dw, c->d_x.as<float>(), n, whole.as<float>(), f, nullptr, nullptr, 0, &t);
        GemmOutSplit out;
        parts_of(parts.as<float>(), n, out);
        linear_parts_fused(c->dw, pv, out.y, 4, c->d_x.as<float>(), n, f, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<float> w(ny), p(ny);
        copy_to_host(w.data(), whole.get(), ny * 4);
        copy_to_host(p.data(), parts.get(), ny * 4);
        split_layout(n, ref, src);
        int bad = 0;
        for (size_t i = 0; i < ny && bad < 5; ++i)
            if (std::memcmp(&p[i], &w[src[i]], 4) != 0) {
                ADD_FAILURE() << "part element " << i << " = " << p[i] << ", whole " << w[src[i]];
                ++bad;
            }
    }
}

// linear() takes the GEMM for n > 8 when the workspace allows it (the models' path), and its output matches.
TEST(GemmQCuda, LinearDispatchesAboveEightRows) {
    SKIP_WITHOUT_GPU();
    auto c = make_case({true, DType::BF16, 4, 64}, 700, 1024, 64, 5600);
    for (int64_t n : {int64_t(9), int64_t(64)}) {
        EXPECT_GE(linear_workspace_bytes(c->dw, n), gemm_q_workspace_bytes(c->dw, n));
        check(*c, n, Path::GEMV, "linear", [&](float* y) { run_linear(*c, n, y); });
    }
    // A workspace sized for 64 rows serves every smaller n (monotone sizes).
    for (int64_t n = 9; n < 64; n += 7) EXPECT_LE(gemm_q_workspace_bytes(c->dw, n), gemm_q_workspace_bytes(c->dw, 64));
}

}  // namespace
}  // namespace ember::cuda
