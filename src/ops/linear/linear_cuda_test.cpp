// ops/linear/linear_cuda_test.cpp: the CUDA linear (linear_cuda.h) vs the fp64 reference linear_ref on random
// data: every format (affine 2..8-bit, groups 32/64/128, bf16/f16/f32 scales incl. negative; dense f32/f16/bf16),
// ragged shapes, n = 1..8 (GEMV) and 9/17/64 (GEMM), forced launch shapes of both tensor-core GEMVs (the
// streaming "q" kernel: groups per MMA, K slices, grid caps / rounds, chunked x; the "mma" kernel: clusters,
// persistent grid), misaligned weights and x (fallbacks), run-to-run determinism, and the n ≤ 8 path inside
// CUDA-graph capture. Outputs are poisoned with NaN before each call and a guard after y must stay untouched.
// GGML weights: linear_ggml_cuda_test.cpp.
//
// Error budgets, per output y[t, r], with A = Σ_c a_c·|x_c| where a_c = |s|·q + |b| (affine, the magnitudes
// that the kernel's s·Σq·x + b·Σx actually adds) or |w_c| (dense), and Q = sqrt(Σ_c (w_c·x_c)²):
//  - GEMV (tensor cores): x = hi + lo + e with |e| ≤ 2⁻¹⁶|x| (two round-to-nearest bf16 steps of 8-bit
//    significands), products exact, so the result is exact for x − e: |Δ| ≤ 2⁻¹⁶·A = 1.53e-5·A. fp32
//    accumulation adds ≤ 2⁻²⁴ per addition relative to partial sums that are ≪ A (random signs). Budget
//    2e-5·A + 1e-6. (The fp32 CUDA-core paths are well inside the same budget.)
//  - GEMM (bf16 cuBLAS): w and x each rounded to bf16 (|δ| ≤ 2⁻⁸ relative), so |Δ| ≤ (2⁻⁷ + 2⁻¹⁶)·Σ|w||x|
//    deterministically; the per-product errors are independent, zero-mean, variance ≤ 2·(2⁻⁸)²/3 → σ ≤
//    2⁻⁸·0.82·Q. Budget min(2⁻⁷·1.01·A, 6σ = 0.0192·Q) + 2⁻²⁰·A + 1e-6 (6σ: no false alarms over ~10⁶ outputs,
//    yet a wrong group or code shifts y by ~A/sqrt(K) ≫ 0.02·Q).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "ops/linear/linear.h"
#include "ops/linear/linear_cuda.h"
#include "ops/linear/linear_cuda_test_util.h"
#include "quant/affine.h"

namespace ember::cuda {
namespace {

using namespace lintest;

// The n ≤ 8 path captured in a CUDA graph (first use of these kernels happens inside the capture) gives
// bit-for-bit the eager result.
TEST(LinearCuda, GraphCaptureMatchesEager) {
    SKIP_WITHOUT_GPU();
    std::vector<std::unique_ptr<Case>> cases;
    cases.push_back(make_case({true, DType::BF16, 4, 64}, 1000, 2112, 8, 901));
    cases.push_back(make_case({true, DType::F16, 8, 128}, 77, 4096, 8, 902));
    cases.push_back(make_case({false, DType::BF16, 0, 0}, 129, 512, 8, 903));
    cases.push_back(make_case({true, DType::BF16, 3, 32}, 40, 256, 8, 904));
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (int64_t n : {1, 4, 8}) {
        std::vector<DeviceBuffer> yg, ye;
        for (auto& c : cases) {
            yg.push_back(dalloc(size_t(n * c->rows) * 4));
            ye.push_back(dalloc(size_t(n * c->rows) * 4));
            CUDA_CHECK(cudaMemset(yg.back().get(), 0xff, yg.back().bytes()));
        }
        cudaGraph_t graph;
        CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        for (size_t i = 0; i < cases.size(); ++i)
            linear(cases[i]->dw, cases[i]->d_x.as<float>(), n, yg[i].as<float>(), st, nullptr, 0);
        CUDA_CHECK(cudaStreamEndCapture(st, &graph));
        cudaGraphExec_t exec;
        CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        CUDA_CHECK(cudaGraphLaunch(exec, st));
        CUDA_CHECK(cudaGraphLaunch(exec, st));  // replays give the same result
        for (size_t i = 0; i < cases.size(); ++i)
            linear(cases[i]->dw, cases[i]->d_x.as<float>(), n, ye[i].as<float>(), st, nullptr, 0);
        CUDA_CHECK(cudaStreamSynchronize(st));
        for (size_t i = 0; i < cases.size(); ++i) {
            SCOPED_TRACE(testing::Message() << fmt_name(cases[i]->f) << " n=" << n);
            std::vector<float> g(size_t(n * cases[i]->rows)), e(g.size());
            copy_to_host(g.data(), yg[i].get(), g.size() * 4);
            copy_to_host(e.data(), ye[i].get(), e.size() * 4);
            EXPECT_EQ(0, std::memcmp(g.data(), e.data(), g.size() * 4)) << "graph replay differs from eager";
            check(*cases[i], n, Path::GEMV, "graph", [&](float* y) {
                CUDA_CHECK(cudaMemcpy(y, yg[i].get(), g.size() * 4, cudaMemcpyDeviceToDevice));
            });
        }
        CUDA_CHECK(cudaGraphExecDestroy(exec));
        CUDA_CHECK(cudaGraphDestroy(graph));
    }
    CUDA_CHECK(cudaStreamDestroy(st));
}

// Every format, ragged rows and columns, n = 1..8 (GEMV) and n = 9, 17, 64 (GEMM).
TEST(LinearCuda, AllFormatsMatchReference) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 1;
    for (const Fmt& f : all_formats())
        for (int64_t cols : col_set(f))
            for (int64_t rows : {1, 7, 33, 250}) {
                auto c = make_case(f, rows, cols, 64, seed++);
                for (int64_t n = 1; n <= 8; ++n)
                    check(*c, n, Path::GEMV, "linear", [&](float* y) { run_linear(*c, n, y); });
                for (int64_t n : {9, 17, 64})
                    check(*c, n, Path::GEMM, "linear", [&](float* y) { run_linear(*c, n, y); });
            }
}

// Larger matrices: 4097 rows (ragged for every block height), and a long row (x staged in several slices).
TEST(LinearCuda, LargeShapesMatchReference) {
    SKIP_WITHOUT_GPU();
    const Fmt fmts[] = {{true, DType::BF16, 4, 64}, {true, DType::BF16, 8, 64}, {true, DType::F16, 4, 32},
                        {true, DType::F32, 4, 128}, {false, DType::BF16, 0, 0}};
    uint32_t seed = 500;
    for (const Fmt& f : fmts) {
        auto c = make_case(f, 4097, 2048 + (f.affine ? f.gs : 64), 64, seed++);
        for (int64_t n : {1, 3, 4, 8}) check(*c, n, Path::GEMV, "linear", [&](float* y) { run_linear(*c, n, y); });
        for (int64_t n : {9, 64}) check(*c, n, Path::GEMM, "linear", [&](float* y) { run_linear(*c, n, y); });
    }
    for (const Fmt& f : {Fmt{true, DType::BF16, 4, 64}, Fmt{true, DType::BF16, 8, 32}}) {
        auto c = make_case(f, 70, 17408, 8, seed++);
        for (int64_t n : {1, 2, 8}) check(*c, n, Path::GEMV, "linear", [&](float* y) { run_linear(*c, n, y); });
    }
}

// The "mma" tensor-core GEMV under forced launch shapes: cluster split of the columns (incl. ranks with no columns),
// and a grid of 1 or 3 clusters that each loop over many row blocks (and many stages per row block).
TEST(LinearCuda, GemvLaunchShapes) {
    SKIP_WITHOUT_GPU();
    const Fmt fmts[] = {{true, DType::BF16, 4, 64}, {true, DType::F16, 8, 128}, {true, DType::F32, 4, 32},
                        {true, DType::BF16, 8, 32}, {true, DType::BF16, 4, 128}};
    uint32_t seed = 700;
    for (const Fmt& f : fmts)
        for (int64_t cols : {int64_t(2048 + f.gs), int64_t(3 * f.gs)}) {
            auto c = make_case(f, 250, cols, 8, seed++);
            for (int rpb : {16, 32})
            for (int ck : {1, 2, 3, 8})
                for (int mc : {0, 1, 3})
                    for (int64_t n : {1, 5, 8}) {
                            GemvTuning tune{ck, mc, rpb};
                            tune.kernel = 2;  // the "mma" kernel (linear_gemv_affine.cu)
                            char what[64];
                            std::snprintf(what, sizeof what, "rows/block=%d ck=%d max_clusters=%d", rpb, ck, mc);
                            check(*c, n, Path::GEMV, what,
                                  [&](float* y) { linear_gemv(c->dw, c->d_x.as<float>(), n, y, nullptr, tune); });
                        }
        }
}

// The GEMM path for small n too (linear() uses it only for n > 8), and a misaligned x (scalar fallbacks).
TEST(LinearCuda, GemmSmallNAndMisalignedX) {
    SKIP_WITHOUT_GPU();
    auto c = make_case({true, DType::BF16, 4, 64}, 300, 576, 8, 42);
    for (int64_t n : {1, 8}) {
        check(*c, n, Path::GEMM, "gemm", [&](float* y) {
            const size_t b = linear_gemm_workspace_bytes(c->dw, n);
            DeviceBuffer ws = dalloc(b);
            linear_gemm(c->dw, c->d_x.as<float>(), n, y, nullptr, ws.get(), b);
        });
    }
    for (const Fmt& f : {Fmt{true, DType::BF16, 4, 64}, Fmt{false, DType::F32, 0, 0}}) {
        auto m = make_case(f, 33, 192, 3, 43);
        DeviceBuffer xs = dalloc(m->x.size() * 4 + 16);  // x at a 4-byte (not 16-byte) offset
        copy_to_device(xs.as<float>() + 1, m->x.data(), m->x.size() * 4);
        check(*m, 3, Path::GEMV, "x+1", [&](float* y) { linear(m->dw, xs.as<float>() + 1, 3, y, nullptr, nullptr, 0); });
    }
}

// The streaming "q" GEMV (linear_gemv_q.cu) on every affine 4/8-bit format under forced work splits: groups per
// MMA G (every n ≤ 8/G), K slices S, a capped grid (several tiles and rounds per block, incl. a partial last
// round), and x staged in chunks of 1 or 3 K-units (incl. a ragged last chunk). Columns: 64·odd-style ragged K
// (the last K-unit and span partly outside the row).
TEST(LinearCuda, QKernelWorkSplits) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 1100;
    for (int bits : {4, 8})
        for (int gs : {32, 64, 128})
            for (DType st : {DType::BF16, DType::F16, DType::F32}) {
                const Fmt f{true, st, bits, gs};
                const int64_t cols = st == DType::BF16 ? 7 * 128 + gs : 5 * gs;  // ragged K-units
                auto c = make_case(f, 83, cols, 8, seed++);
                for (int G : {4, 2, 1})
                    for (int S : {1, 2, 4, 8, 16})
                        for (int mb : {0, 1, 3})
                            for (int ch : {0, 1, 3}) {
                                if ((S + mb + ch + G) % 3 != 0 && !(mb == 0 && ch == 0)) continue;  // sample
                                const int64_t n = 1 + (S * 7 + mb + ch) % (8 / G);
                                GemvTuning tune;
                                tune.kernel = 1, tune.q_groups = G, tune.q_slices = S, tune.q_max_blocks = mb;
                                tune.q_chunk = ch;
                                char what[96];
                                std::snprintf(what, sizeof what, "q G=%d S=%d max_blocks=%d chunk=%d", G, S, mb, ch);
                                check(*c, n, Path::GEMV, what,
                                      [&](float* y) { linear_gemv(c->dw, c->d_x.as<float>(), n, y, nullptr, tune); });
                            }
            }
}

// Ragged shapes on the default path (q kernel, automatic split) and the mma kernel: rows 1, 17, 67, 4099;
// columns 64·odd, 2048 + one group, 12288 (large K: chunked x for n ≥ 5 at 8 bits); n = 1..8.
TEST(LinearCuda, QKernelRaggedShapes) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 1300;
    struct Sh { int64_t rows, cols; };
    const Sh shapes[] = {{1, 192}, {17, 64 * 33}, {67, 2048 + 64}, {4099, 64 * 17}, {67, 12288}, {17, 4096 + 128}};
    for (const Fmt& f : {Fmt{true, DType::BF16, 4, 64}, Fmt{true, DType::BF16, 8, 64}, Fmt{true, DType::F16, 4, 128},
                         Fmt{true, DType::F32, 8, 32}})
        for (const Sh& sh : shapes) {
            if (sh.cols % f.gs) continue;
            auto c = make_case(f, sh.rows, sh.cols, 8, seed++);
            for (int64_t n = 1; n <= 8; ++n) {
                check(*c, n, Path::GEMV, "linear (q)", [&](float* y) { run_linear(*c, n, y); });
                if (n == 1 || n == 8) {
                    GemvTuning mma;
                    mma.kernel = 2;
                    check(*c, n, Path::GEMV, "mma",
                          [&](float* y) { linear_gemv(c->dw, c->d_x.as<float>(), n, y, nullptr, mma); });
                }
            }
        }
}

// Weights not 16-byte aligned (both tensor-core kernels decline: generic kernel), x at a 4-byte offset (the q
// kernel stages x with scalar loads), and bit-identical results on repeated runs (fixed reduction order).
TEST(LinearCuda, QKernelMisalignedAndDeterministic) {
    SKIP_WITHOUT_GPU();
    auto m = make_case({true, DType::BF16, 4, 64}, 67, 64 * 9, 8, 1401, /*data_offset=*/4);
    for (int64_t n : {1, 3, 8}) check(*m, n, Path::GEMV, "data+4", [&](float* y) { run_linear(*m, n, y); });
    for (const Fmt& f : {Fmt{true, DType::BF16, 4, 64}, Fmt{true, DType::F16, 8, 128}}) {
        auto c = make_case(f, 67, 64 * 2 * 9, 8, 1402);
        DeviceBuffer xs = dalloc(c->x.size() * 4 + 16);
        copy_to_device(xs.as<float>() + 1, c->x.data(), c->x.size() * 4);
        for (int64_t n : {1, 2, 5, 8})
            check(*c, n, Path::GEMV, "x+1",
                  [&](float* y) { linear(c->dw, xs.as<float>() + 1, n, y, nullptr, nullptr, 0); });
    }
    auto c = make_case({true, DType::BF16, 4, 64}, 4099, 2048 + 64, 8, 1403);
    for (int64_t n : {1, 4, 8}) {
        DeviceBuffer y1 = dalloc(size_t(n * c->rows) * 4), y2 = dalloc(size_t(n * c->rows) * 4);
        run_linear(*c, n, y1.as<float>());
        for (int rep = 0; rep < 3; ++rep) {
            run_linear(*c, n, y2.as<float>());
            CUDA_CHECK(cudaDeviceSynchronize());
            const auto a = download<float>(y1, size_t(n * c->rows)), b = download<float>(y2, size_t(n * c->rows));
            EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "n=" << n << ": run-to-run difference";
        }
    }
}

// Every kernel choice for a shape reports itself (benchmark tables) and the GEMV dispatch accepts each n.
// add_bias: y[t, r] += b[r], the same single fp32 add as the CPU layer (bit-identical); ragged sizes.
TEST(LinearCuda, AddBiasMatchesHost) {
    SKIP_WITHOUT_GPU();
    std::mt19937 rng(77);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto [n, rows] : {std::pair<int64_t, int64_t>{1, 1}, {1, 1000}, {3, 4099}, {17, 96}, {600, 1025}}) {
        std::vector<float> y(static_cast<size_t>(n * rows)), b(static_cast<size_t>(rows));
        for (float& v : y) v = nd(rng);
        for (float& v : b) v = nd(rng);
        DeviceBuffer dy = dalloc(y.size() * 4 + 64), db = dalloc(b.size() * 4);
        CUDA_CHECK(cudaMemset(dy.get(), 0xff, dy.bytes()));
        copy_to_device(dy.get(), y.data(), y.size() * 4);
        copy_to_device(db.get(), b.data(), b.size() * 4);
        add_bias(dy.as<float>(), db.as<float>(), n, rows, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<float> got(y.size() + 16);
        copy_to_host(got.data(), dy.get(), got.size() * 4);
        for (int64_t t = 0; t < n; ++t)
            for (int64_t r = 0; r < rows; ++r)
                ASSERT_EQ(got[size_t(t * rows + r)], y[size_t(t * rows + r)] + b[size_t(r)]) << t << "," << r;
        uint32_t guard;
        std::memcpy(&guard, &got[y.size()], 4);
        EXPECT_EQ(guard, 0xffffffffu) << "wrote past y";
    }
}

TEST(LinearCuda, DescribeNamesTheKernel) {
    Weight W;
    W.format = WeightFormat::AFFINE, W.bits = 4, W.group_size = 64, W.sb_dtype = DType::BF16;
    W.rows = 6144, W.cols = 2048;
    alignas(16) static const uint8_t dummy[16] = {};
    W.data = W.scales = W.biases = dummy;
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device (launch-shape planning reads the SM count)";
    char buf[128];
    for (int64_t n : {1, 2, 4, 8}) {
        EXPECT_EQ(0, std::strncmp(linear_gemv_describe(W, n, buf, sizeof buf), "q4 g64 G", 8)) << buf;
        GemvTuning mma;
        mma.kernel = 2;
        EXPECT_EQ(0, std::strncmp(linear_gemv_describe(W, n, buf, sizeof buf, mma), "mma", 3)) << buf;
    }
}

// Programmatic dependent launch: the q kernel prefetches weights before waiting for the previous kernel, then
// reads x. A chain x → W1 → y1 → W2 → y2 on one stream (y1 is written by the kernel right before the one that
// reads it, and the first kernel is long) must give bit-identical results with PDL on and off, eager and in a
// graph, and match the reference of W2 applied to the y1 actually produced.
TEST(LinearCuda, QKernelPdlChainWaitsForProducer) {
    SKIP_WITHOUT_GPU();
    auto c1 = make_case({true, DType::BF16, 4, 64}, 4096, 4096, 8, 1501);  // y1 = [n, 4096] feeds W2 (cols 4096)
    auto c2 = make_case({true, DType::BF16, 4, 64}, 333, 4096, 1, 1502);
    cudaStream_t st;
    CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    for (int64_t n : {1, 3, 8}) {
        std::vector<std::vector<float>> outs;
        for (int mode = 0; mode < 3; ++mode) {  // 0: PDL off, 1: PDL on, 2: PDL on in a graph
            GemvTuning tune;
            tune.kernel = 1, tune.q_pdl = mode ? 1 : -1;
            DeviceBuffer y1 = dalloc(size_t(n * 4096) * 4), y2 = dalloc(size_t(n * 333) * 4);
            CUDA_CHECK(cudaMemset(y1.get(), 0xff, y1.bytes()));
            CUDA_CHECK(cudaMemset(y2.get(), 0xff, y2.bytes()));
            auto chain = [&] {
                linear_gemv(c1->dw, c1->d_x.as<float>(), n, y1.as<float>(), st, tune);
                linear_gemv(c2->dw, y1.as<float>(), n, y2.as<float>(), st, tune);
            };
            if (mode < 2) {
                chain();
            } else {
                cudaGraph_t graph;
                cudaGraphExec_t exec;
                CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
                chain();
                CUDA_CHECK(cudaStreamEndCapture(st, &graph));
                CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
                CUDA_CHECK(cudaGraphLaunch(exec, st));
                CUDA_CHECK(cudaStreamSynchronize(st));
                CUDA_CHECK(cudaGraphExecDestroy(exec));
                CUDA_CHECK(cudaGraphDestroy(graph));
            }
            CUDA_CHECK(cudaStreamSynchronize(st));
            outs.push_back(download<float>(y2, size_t(n * 333)));
            if (mode == 1) {  // reference of W2 on the y1 that was produced
                const auto y1h = download<float>(y1, size_t(n * 4096));
                std::vector<float> ref(size_t(n * 333));
                linear_ref(c2->hw, y1h.data(), n, ref.data());
                double num = 0, den = 0;  // relative L2 error (stale or unwritten y1 gives ~1)
                for (size_t i = 0; i < ref.size(); ++i) {
                    ASSERT_TRUE(std::isfinite(outs.back()[i])) << "y2[" << i << "] not written";
                    const double d = double(outs.back()[i]) - ref[i];
                    num += d * d, den += double(ref[i]) * ref[i];
                }
                EXPECT_LT(std::sqrt(num / den), 2e-3) << "n=" << n << ": y2 does not match W2·y1";
            }
        }
        EXPECT_EQ(0, std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * 4)) << "n=" << n << ": PDL on/off";
        EXPECT_EQ(0, std::memcmp(outs[0].data(), outs[2].data(), outs[0].size() * 4)) << "n=" << n << ": graph";
    }
    CUDA_CHECK(cudaStreamDestroy(st));
}

}  // namespace
}  // namespace ember::cuda
