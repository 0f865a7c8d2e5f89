// backend/cuda/weight_upload_cuda_test.cpp: DeviceArena::upload's storage choice for large matrices
// (weight_upload.h): a single matrix with ≥ 64 MiB of weights that the tiled stream GEMV takes (4/8-bit affine,
// GGML Q6_K) is stored TILED, a small one stays as it was, and either way linear() on the uploaded weight matches
// the fp64 reference of the host weight (budget 2e-5·Σ|w||x| + 1e-6, the q kernel's). The kernels themselves:
// ops/linear/linear_stream_cuda_test.cpp; the layout: ops/linear/weight_tiles_test.cpp.
// Also upload_gather_table for GGML tables: stored as the blocks, and embed_rows on them equal to weight_row's rows
// bit for bit (NaN rows for ids out of range).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/weight_upload.h"
#include "ops/embedding/embedding_cuda.h"
#include "ops/linear/ggml_random_blocks.h"
#include "ops/linear/linear_cuda_test_util.h"
#include "quant/ggml_type.h"

namespace ember::cuda {
namespace {

using namespace lintest;

// EMBER_TILED (0 / 1) overrides the size rule for the whole process: the size expectations then do not apply.
bool size_rule_active() { return std::getenv("EMBER_TILED") == nullptr; }

std::string describe(const Weight& W) {
    char buf[96];
    return linear_gemv_describe(W, 1, buf, sizeof buf);
}

TEST(WeightUploadCuda, LargeAffineMatrixIsTiledAndMatches) {
    SKIP_WITHOUT_GPU();
    // 36,011 × 4096 4-bit g64 bf16: 73.7 MB of codes + 9.2 MB of scales and biases (≥ 64 MiB), ragged last tile.
    auto c = make_case({true, DType::BF16, 4, 64}, 36011, 4096, 2, 4100);
    DeviceArena arena;
    auto up = arena.upload(c->hw, "test large affine");
    ASSERT_TRUE(up.is_ok()) << up.message();
    if (size_rule_active()) {
        EXPECT_EQ(up->format, WeightFormat::TILED);
        EXPECT_EQ(describe(*up).rfind("stream q4 g64", 0), 0u) << describe(*up);
    }
    for (int64_t n : {1, 2})
        check(*c, n, Path::GEMV, "uploaded", [&](float* y) {
            linear(*up, c->d_x.as<float>(), n, y, nullptr, nullptr, 0);
        });
    auto small = make_case({true, DType::BF16, 4, 64}, 300, 4096, 1, 4101);
    auto us = arena.upload(small->hw, "test small affine");
    ASSERT_TRUE(us.is_ok()) << us.message();
    if (size_rule_active()) {
        EXPECT_EQ(us->format, WeightFormat::AFFINE);
    }
}

TEST(WeightUploadCuda, LargeQ6KMatrixIsTiledAndMatches) {
    SKIP_WITHOUT_GPU();
    // 20,483 × 4096 GGML Q6_K: 68.8 MB of blocks (≥ 64 MiB), ragged last tile.
    const int64_t rows = 20483, cols = 4096, n = 2;
    std::vector<uint8_t> blocks;
    const Weight W = testing_blocks::random_ggml_blocks(GgmlType::Q6_K, rows, cols, 4200u, 0.002f, blocks);
    DeviceArena arena;
    auto up = arena.upload(W, "test large Q6_K");
    ASSERT_TRUE(up.is_ok()) << up.message();
    if (size_rule_active()) {
        EXPECT_EQ(up->format, WeightFormat::TILED);
        EXPECT_EQ(describe(*up).rfind("stream Q6_K", 0), 0u) << describe(*up);
    }
    check_device_form(W, *up, n, 4201u, "uploaded Q6_K");
    std::vector<uint8_t> small_blocks;
    const Weight S = testing_blocks::random_ggml_blocks(GgmlType::Q6_K, 64, 1024, 4202u, 0.002f, small_blocks);
    auto us = arena.upload(S, "test small Q6_K");
    ASSERT_TRUE(us.is_ok()) << us.message();
    if (size_rule_active()) {
        EXPECT_EQ(us->format, WeightFormat::GGML);
    }
}

TEST(WeightUploadCuda, GgmlGatherTablesGiveTheBlocksRows) {
    SKIP_WITHOUT_GPU();
    const int64_t rows = 301, cols = 512;
    const std::vector<int32_t> ids = {0, 300, 17, 17, 150, 299, 1, -1, 301};  // the last two: out of range
    DeviceBuffer d_ids = dalloc(ids.size() * 4);
    copy_to_device(d_ids.get(), ids.data(), ids.size() * 4);
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_0,
                       GgmlType::Q5_K}) {
        SCOPED_TRACE(ggml_type_traits(t).name);
        std::vector<uint8_t> blocks;
        const Weight E = testing_blocks::random_ggml_blocks(t, rows, cols, 4300u + uint32_t(t), 0.01f, blocks);
        DeviceArena arena;
        auto up = arena.upload_gather_table(E, "test table");
        ASSERT_TRUE(up.is_ok()) << up.message();
        EXPECT_EQ(up->format, WeightFormat::GGML);
        EXPECT_EQ(arena.bytes(), int64_t(blocks.size()));  // as stored
        DeviceBuffer out = dalloc(ids.size() * size_t(cols) * 4);
        embed_rows(*up, d_ids.as<int32_t>(), int64_t(ids.size()), out.as<float>(), nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        const std::vector<float> got = download<float>(out, ids.size() * size_t(cols));
        std::vector<float> want(static_cast<size_t>(cols));
        for (size_t i = 0; i < ids.size(); ++i) {
            const float* g = &got[i * size_t(cols)];
            if (ids[i] < 0 || ids[i] >= rows) {
                for (int64_t c = 0; c < cols; ++c) ASSERT_TRUE(std::isnan(g[c])) << "bad id " << ids[i];
                continue;
            }
            weight_row(E, ids[i], want.data());
            ASSERT_EQ(std::memcmp(g, want.data(), size_t(cols) * 4), 0) << "id " << ids[i];
        }
    }
}

}  // namespace
}  // namespace ember::cuda
