// ops/linear/linear_stream_cuda_test.cpp: the tiled "stream" GEMV (linear_gemv_stream.cu) through linear() against
// the fp64 reference of the source affine weight (linear_cuda_test_util.h: random codes of every bit pattern,
// scales and biases of either sign, NaN-poisoned y with a guard after it; budget 2e-5·Σ|w||x| + 1e-6, as the q
// kernel's). Covers 4-bit groups 32 / 64 / 128 and 8-bit groups 32 / 64 (two nibbles per code), bf16 / f16 / f32
// scales, warps per block 8..20 (nibble columns / 128 = 8, 12, 17, 20, 40),
// rows not a multiple of 16, more row runs than SMs (blocks loop over runs, the ring crosses run and chunk
// boundaries), n = 1..8 (one launch per token) and n = 20 (linear's n > 8 path), and the describe string.
// GGML Q6_K tiled directly (Q6KMatchesReference). Fusions: linear_fused_cuda_test.cpp TiledStreamModes. Layout: weight_tiles_test.cpp (CPU).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/linear/linear_cuda.h"
#include "ops/linear/ggml_random_blocks.h"
#include "ops/linear/linear_cuda_test_util.h"
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

// GGML Q6_K tiled (the upload tiles it directly: no affine form): random blocks, ragged rows, n = 1 and 3; fp64
// reference of the GGUF blocks (linear_ref), budget 2e-5·Σ|w||x| + 1e-6. (The prologues and the epilogue are the
// affine forms' code: LinearFusedCuda.TiledStreamModes, which does not run a Q6_K weight.)
TEST(LinearStreamCuda, Q6KMatchesReference) {
    SKIP_WITHOUT_GPU();
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1024}, {77, 2560}, {300, 4096}}) {
        std::vector<uint8_t> blocks;
        const Weight W = testing_blocks::random_ggml_blocks(GgmlType::Q6_K, rows, cols, uint32_t(rows * 3 + cols), 0.002f, blocks);
        auto t = tile_weight(W);
        ASSERT_TRUE(t.is_ok()) << t.message();
        DeviceBuffer dc = dalloc(t.value().codes.size()), ds = dalloc(t.value().sb.size());
        copy_to_device(dc.get(), t.value().codes.data(), t.value().codes.size());
        copy_to_device(ds.get(), t.value().sb.data(), t.value().sb.size());
        Weight D = t.value().w;
        D.data = dc.get(), D.scales = ds.get();
        check_device_form(W, D, 3, uint32_t(rows + cols), "Q6_K");
        char buf[96];
        const std::string d = linear_gemv_describe(D, 1, buf, sizeof buf);
        EXPECT_EQ(d.rfind("stream Q6_K", 0), 0u) << d;
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
