// GPU tests for embed_rows (embedding_cuda.h): bit-exact against weight_row for dense F32/F16/BF16 (vector and
// scalar paths) and MLX affine rows of every bit width, group size and scale dtype; invalid ids give NaN rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "core/dtype.h"
#include "ops/embedding/embedding_cuda.h"
#include "ops/linear/linear.h"
#include "quant/affine.h"

namespace ember::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

template <class T>
DeviceBuffer up(const std::vector<T>& v) {
    auto b = upload(v, "test");
    EMBER_CHECK(b.is_ok(), "%s", b.message().c_str());
    return std::move(b).value();
}

std::vector<float> randn(size_t n, uint64_t seed) {
    std::mt19937_64 g(seed);
    std::normal_distribution<float> d(0.f, 0.05f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

std::vector<int32_t> make_ids(int64_t n, int64_t rows, uint64_t seed) {
    std::mt19937_64 g(seed);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (auto& i : ids) i = int32_t(g() % uint64_t(rows));
    ids[0] = 0;
    if (n > 1) ids[1] = int32_t(rows - 1);
    if (n > 2) ids[2] = ids[1];  // repeats
    return ids;
}

// Host weight W_h (host pointers) and its device twin W_d; compares embed_rows with weight_row bit for bit.
void check_rows(const Weight& W_h, const Weight& W_d, int64_t n, uint64_t seed) {
    const std::vector<int32_t> ids = make_ids(n, W_h.rows, seed);
    DeviceBuffer d_ids = up(ids);
    auto ob = DeviceBuffer::alloc(size_t(n * W_h.cols) * 4, "out");
    EMBER_CHECK(ob.is_ok(), "alloc");
    DeviceBuffer d_out = std::move(ob).value();
    CUDA_CHECK(cudaMemset(d_out.get(), 0xff, d_out.bytes()));
    embed_rows(W_d, d_ids.as<int32_t>(), n, d_out.as<float>(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> got = download<float>(d_out, size_t(n * W_h.cols)), want(size_t(W_h.cols));
    for (int64_t t = 0; t < n; ++t) {
        weight_row(W_h, ids[size_t(t)], want.data());
        ASSERT_EQ(std::memcmp(&got[size_t(t * W_h.cols)], want.data(), size_t(W_h.cols) * 4), 0)
            << "token " << t << " id " << ids[size_t(t)];
    }
}

TEST(EmbeddingCuda, DenseRowsAreExact) {
    SKIP_WITHOUT_GPU();
    uint64_t seed = 1;
    for (DType t : {DType::F32, DType::F16, DType::BF16})
        for (int64_t cols : {2048, 1001, 12, 8}) {
            SCOPED_TRACE(testing::Message() << dtype_name(t) << " cols=" << cols);
            const int64_t rows = 53;
            std::vector<float> w = randn(size_t(rows * cols), seed++);
            std::vector<uint8_t> raw(size_t(rows * cols) * dtype_size(t));
            for (size_t i = 0; i < w.size(); ++i) store_float(raw.data(), t, i, w[i]);
            DeviceBuffer d_raw = up(raw);
            Weight Wh, Wd;
            Wh.format = Wd.format = WeightFormat::DENSE;
            Wh.dtype = Wd.dtype = t;
            Wh.rows = Wd.rows = rows;
            Wh.cols = Wd.cols = cols;
            Wh.data = raw.data();
            Wd.data = d_raw.get();
            for (int64_t n : {1, 7, 130}) check_rows(Wh, Wd, n, seed++);
        }
}

TEST(EmbeddingCuda, AffineRowsAreExact) {
    SKIP_WITHOUT_GPU();
    uint64_t seed = 100;
    for (int bits : {2, 3, 4, 5, 6, 8})
        for (int gs : {32, 64, 128})
            for (DType sbt : {DType::F32, DType::F16, DType::BF16}) {
                SCOPED_TRACE(testing::Message() << "bits=" << bits << " group=" << gs << " sb=" << dtype_name(sbt));
                const int64_t rows = 29, cols = 384, ng = cols / gs;
                std::vector<float> w = randn(size_t(rows * cols), seed++);
                std::vector<uint32_t> packed(size_t(rows * affine_row_words(cols, bits)));
                std::vector<float> s32(size_t(rows * ng)), b32(size_t(rows * ng));
                for (int64_t r = 0; r < rows; ++r)
                    affine_quantize_row(&w[size_t(r * cols)], cols, bits, gs,
                                        &packed[size_t(r * affine_row_words(cols, bits))], &s32[size_t(r * ng)],
                                        &b32[size_t(r * ng)]);
                std::vector<uint8_t> sc(s32.size() * dtype_size(sbt)), bi(b32.size() * dtype_size(sbt));
                for (size_t i = 0; i < s32.size(); ++i) {
                    store_float(sc.data(), sbt, i, s32[i]);
                    store_float(bi.data(), sbt, i, b32[i]);
                }
                DeviceBuffer d_packed = up(packed), d_sc = up(sc), d_bi = up(bi);
                Weight Wh;
                Wh.format = WeightFormat::AFFINE;
                Wh.rows = rows;
                Wh.cols = cols;
                Wh.bits = bits;
                Wh.group_size = gs;
                Wh.sb_dtype = sbt;
                Wh.data = packed.data();
                Wh.scales = sc.data();
                Wh.biases = bi.data();
                Weight Wd = Wh;
                Wd.data = d_packed.get();
                Wd.scales = d_sc.get();
                Wd.biases = d_bi.get();
                for (int64_t n : {1, 5, 64}) check_rows(Wh, Wd, n, seed++);
            }
}

TEST(EmbeddingCuda, InvalidIdsGiveNaNRows) {
    SKIP_WITHOUT_GPU();
    const int64_t rows = 10, cols = 64;
    std::vector<float> w = randn(size_t(rows * cols), 7);
    DeviceBuffer d_w = up(w);
    Weight W;
    W.dtype = DType::F32;
    W.rows = rows;
    W.cols = cols;
    W.data = d_w.get();
    const std::vector<int32_t> ids = {3, -1, 10, 9};
    DeviceBuffer d_ids = up(ids);
    auto ob = DeviceBuffer::alloc(size_t(4 * cols) * 4, "out");
    EMBER_CHECK(ob.is_ok(), "alloc");
    DeviceBuffer d_out = std::move(ob).value();
    embed_rows(W, d_ids.as<int32_t>(), 4, d_out.as<float>(), nullptr);
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> got = download<float>(d_out, size_t(4 * cols));
    for (int64_t c = 0; c < cols; ++c) {
        EXPECT_EQ(got[size_t(c)], w[size_t(3 * cols + c)]);
        EXPECT_TRUE(std::isnan(got[size_t(cols + c)]));
        EXPECT_TRUE(std::isnan(got[size_t(2 * cols + c)]));
        EXPECT_EQ(got[size_t(3 * cols + c)], w[size_t(9 * cols + c)]);
    }
}

}  // namespace
}  // namespace ember::cuda
