// ops/linear/linear_stream_cuda_test.cpp: the tiled "stream" GEMV (linear_gemv_stream.cu) through linear() against
// the fp64 reference of the source affine weight (linear_cuda_test_util.h: random codes of every bit pattern,
// scales and biases of either sign, NaN-poisoned y with a guard after it; budget 2e-5·Σ|w||x| + 1e-6, as the q
// kernel's). Covers 4-bit groups 32 / 64 / 128 and 8-bit groups 32 / 64 (two nibbles per code), bf16 / f16 / f32
// scales, warps per block 8..20 (nibble columns / 128 = 8, 12, 17, 20, 40),
// rows not a multiple of 16, more row runs than SMs (blocks loop over runs, the ring crosses run and chunk
// boundaries), n = 1..8 (one launch per token) and n = 20 (linear's n > 8 path), and the describe string.
// GGML Q6_K tiled directly, n = 1..20 (up to 4 tokens per pass, EMBER_STREAM_ROWS=1, and one per pass), and its
// fusions (Q6K*). Fusions: linear_fused_cuda_test.cpp TiledStreamModes. Layout: weight_tiles_test.cpp (CPU).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/linear/linear_cuda.h"
#include "ops/linear/ggml_random_blocks.h"
#include "ops/linear/linear_cuda_test_util.h"
#include "ops/activation/activation.h"
#include "ops/norm/norm.h"
#include "quant/ggml_type.h"

namespace ember::cuda {
namespace {

using namespace lintest;

TEST(LinearStreamCuda, MatchesReference) {
    SKIP_WITHOUT_GPU();
    uint32_t seed = 3100;
    const Fmt fmts[] = {{true, DType::BF16, 4, 64}, {true, DType::F16, 4, 64}, {true, DType::F32, 4, 64},
                        {true, DType::BF16, 4, 32}, {true, DType::F16, 4, 32}, {true, DType::F32, 4, 32},
                        {true, DType::BF16, 4, 128}, {true, DType::F16, 8, 32}, {true, DType::BF16, 8, 64},
                        {true, DType::F32, 8, 32}};
    struct Sh { int64_t rows, cols; };
    const Sh shapes[] = {{1, 1024}, {67, 1536}, {129, 2176}, {250, 2560}, {35, 5120}};
    for (const Fmt& f : fmts)
        for (const Sh& sh : shapes) {
            if (f.bits == 8 && sh.cols > 2560) continue;  // 8-bit: 2·cols nibble columns (40 chunks: W = 20 at 2560)
            auto c = make_case(f, sh.rows, sh.cols, 8, seed++);
            to_tiled(*c);
            for (int64_t n : {1, 3, 8})
                check(*c, n, Path::GEMV, "stream", [&](float* y) { run_linear(*c, n, y); });
        }
}

TEST(LinearStreamCuda, ManyRunsAndLongBatches) {
    SKIP_WITHOUT_GPU();
    // 40,013 rows: 2,501 tiles = 157 runs of 16 tiles, more than the SMs of any current GPU.
    auto c = make_case({true, DType::BF16, 4, 64}, 40013, 1024, 1, 3200);
    to_tiled(*c);
    check(*c, 1, Path::GEMV, "stream, many runs", [&](float* y) { run_linear(*c, 1, y); });
    auto d = make_case({true, DType::F16, 4, 32}, 77, 2048, 20, 3201);
    to_tiled(*d);
    check(*d, 20, Path::GEMV, "stream, n = 20", [&](float* y) { run_linear(*d, 20, y); });
}

// Sets an environment variable for a scope (restoring the previous value).
struct ScopedEnv {
    std::string name, old;
    bool had;
    ScopedEnv(const char* n, const char* v) : name(n), had(std::getenv(n) != nullptr) {
        if (had) old = std::getenv(n);
        setenv(n, v, 1);
    }
    ~ScopedEnv() { had ? (void)setenv(name.c_str(), old.c_str(), 1) : (void)unsetenv(name.c_str()); }
};

// A Q6_K weight tiled on the device (the upload tiles it directly: no affine form); `W` keeps the host blocks.
struct Q6KCase {
    std::vector<uint8_t> blocks;
    Weight W, D;
    DeviceBuffer dc, ds;
};
std::unique_ptr<Q6KCase> q6k_case(int64_t rows, int64_t cols, uint32_t seed) {
    auto c = std::make_unique<Q6KCase>();
    c->W = testing_blocks::random_ggml_blocks(GgmlType::Q6_K, rows, cols, seed, 0.002f, c->blocks);
    auto t = tile_weight(c->W);
    EXPECT_TRUE(t.is_ok()) << t.message();
    if (!t.is_ok()) return nullptr;
    c->dc = dalloc(t.value().codes.size()), c->ds = dalloc(t.value().sb.size());
    copy_to_device(c->dc.get(), t.value().codes.data(), t.value().codes.size());
    copy_to_device(c->ds.get(), t.value().sb.data(), t.value().sb.size());
    c->D = t.value().w;
    c->D.data = c->dc.get(), c->D.scales = c->ds.get();
    return c;
}

// GGML Q6_K tiled: random blocks, ragged rows; n = 1 (one token per pass) and n = 2..8, 20 (up to 4 tokens per
// pass: K 1,024-4,096 four, K 5,120 two, with a single-token pass for the odd one out); fp64 reference of the
// GGUF blocks (linear_ref), budget 2e-5·Σ|w||x| + 1e-6. 40,013 rows: more row runs than SMs for every pass width.
TEST(LinearStreamCuda, Q6KMatchesReference) {
    SKIP_WITHOUT_GPU();
    struct Sh { int64_t rows, cols; std::vector<int64_t> ns; };
    const Sh shapes[] = {{1, 1024, {3}}, {77, 2560, {2, 3, 4, 5, 8}}, {300, 4096, {4, 7, 20}}, {130, 5120, {2, 3, 8}},
                         {40013, 1024, {4, 6}}};
    for (const char* rows_env : {"1", "0"}) {  // EMBER_STREAM_ROWS=0: one pass per token
        ScopedEnv env("EMBER_STREAM_ROWS", rows_env);
        for (const Sh& sh : shapes) {
            if (rows_env[0] == '0' && sh.rows > 1000) continue;
            auto c = q6k_case(sh.rows, sh.cols, uint32_t(sh.rows * 3 + sh.cols));
            ASSERT_TRUE(c);
            for (int64_t n : sh.ns)
                check_device_form(c->W, c->D, n, uint32_t(sh.rows + sh.cols + n),
                                  std::string("Q6_K EMBER_STREAM_ROWS=") + rows_env);
            char buf[96];
            const std::string d1 = linear_gemv_describe(c->D, 1, buf, sizeof buf);
            EXPECT_EQ(d1.rfind("stream Q6_K", 0), 0u) << d1;
            EXPECT_EQ(d1.find(" x"), std::string::npos) << d1;
            const std::string d8 = linear_gemv_describe(c->D, 8, buf, sizeof buf);
            if (rows_env[0] == '1') EXPECT_NE(d8.find(sh.cols <= 4096 ? " x4" : " x2"), std::string::npos) << d8;
            else EXPECT_EQ(d8.find(" x"), std::string::npos) << d8;
        }
    }
}

// The prologues and the epilogue on Q6_K at n = 1..8 (several tokens per pass from 2): RMSNorm + accumulate and
// SwiGLU, against rmsnorm_ref / swiglu_ref → linear_ref (+ the residual); budget 2e-5·(Σ|w||x'| + |residual|) + 1e-6.
TEST(LinearStreamCuda, Q6KFusionsMatchReference) {
    SKIP_WITHOUT_GPU();
    ScopedEnv env("EMBER_STREAM_ROWS", "1");
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{93, 2048}, {35, 5120}}) {
        auto c = q6k_case(rows, cols, uint32_t(rows + 7 * cols));
        ASSERT_TRUE(c);
        std::mt19937 rng(uint32_t(rows * cols));
        std::normal_distribution<float> nd(0.f, 1.f);
        std::vector<float> raw(static_cast<size_t>(16 * cols)), nw(static_cast<size_t>(cols)),
            res(static_cast<size_t>(8 * rows));
        for (float& v : raw) v = 0.3f + 2.f * nd(rng);
        for (float& v : nw) v = 1.f + 0.3f * nd(rng);
        for (float& v : res) v = nd(rng);
        DeviceBuffer d_raw = dalloc(raw.size() * 4), d_nw = dalloc(nw.size() * 4), d_res = dalloc(res.size() * 4);
        copy_to_device(d_raw.get(), raw.data(), raw.size() * 4);
        copy_to_device(d_nw.get(), nw.data(), nw.size() * 4);
        copy_to_device(d_res.get(), res.data(), res.size() * 4);
        for (bool norm : {true, false}) {
            std::vector<float> xp(static_cast<size_t>(8 * cols));
            if (norm) rmsnorm_ref(raw.data(), nw.data(), xp.data(), 8, cols, 1e-6f);
            else
                for (int64_t t = 0; t < 8; ++t)
                    swiglu_ref(raw.data() + 2 * t * cols, raw.data() + (2 * t + 1) * cols, xp.data() + t * cols, cols);
            std::vector<float> ref(static_cast<size_t>(8 * rows));
            linear_ref(c->W, xp.data(), 8, ref.data());
            std::vector<float> A = abs_products(c->W, xp, 8);
            if (norm)
                for (size_t i = 0; i < ref.size(); ++i) ref[i] += res[i], A[i] += std::fabs(res[i]);
            LinearFusion fz;
            if (norm) fz.norm_w = d_nw.as<float>(), fz.eps = 1e-6f, fz.accumulate = true;
            else fz.swiglu = true;
            for (int64_t n = 1; n <= 8; ++n) {
                SCOPED_TRACE(testing::Message() << "Q6_K " << rows << "x" << cols << (norm ? " rmsnorm+acc" : " swiglu")
                                                << " n=" << n);
                check_poisoned(size_t(n * rows), rows, ref, [&](size_t i) { return 2e-5 * A[i] + 1e-6; },
                               [&](float* y) {
                                   if (norm)
                                       CUDA_CHECK(cudaMemcpy(y, d_res.get(), size_t(n * rows) * 4,
                                                             cudaMemcpyDeviceToDevice));
                                   linear_fused(c->D, d_raw.as<float>(), n, y, fz, nullptr, nullptr, 0);
                               });
            }
        }
    }
}

TEST(LinearStreamCuda, Describe) {
    SKIP_WITHOUT_GPU();
    auto c = make_case({true, DType::BF16, 4, 64}, 32, 2048, 1, 3300);
    to_tiled(*c);
    char buf[96];
    const std::string d = linear_gemv_describe(c->dw, 1, buf, sizeof buf);
    EXPECT_EQ(d.rfind("stream q4 g64 W16 P4", 0), 0u) << d;
}

}  // namespace
}  // namespace ember::cuda
