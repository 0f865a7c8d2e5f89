// GPU test for apply_token_mask (token_mask_cuda.h) against the CPU reference (token_mask.h): random logits and
// masks (dense, sparse, all-allowed words, a ragged last word), several rows with padded strides, bit for bit;
// then argmax after the mask never picks a masked token. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "ops/sampling/sampling.h"
#include "ops/sampling/sampling_cuda.h"
#include "ops/sampling/token_mask.h"
#include "ops/sampling/token_mask_cuda.h"

namespace ember::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

DeviceBuffer dev_alloc(size_t bytes) {
    auto b = DeviceBuffer::alloc(bytes, "test");
    EMBER_CHECK(b.is_ok(), "%s", b.message().c_str());
    return std::move(b).value();
}

TEST(TokenMaskCuda, MatchesCpuReference) {
    SKIP_WITHOUT_GPU();
    std::mt19937_64 g(1);
    for (int64_t vocab : {1, 31, 33, 1000, 151936, 248320}) {
        const int64_t rows = 3, ld = vocab + 5, W = token_mask_words(vocab) + 2;
        std::vector<float> l(size_t(rows * ld));
        std::normal_distribution<float> nd(0.f, 3.f);
        for (float& x : l) x = nd(g);
        std::vector<uint32_t> m(size_t(rows * W));
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t w = 0; w < W; ++w) {
                const uint64_t x = g();
                // row 0 dense random, row 1 sparse, row 2 mostly all-allowed words
                m[size_t(r * W + w)] = r == 0 ? uint32_t(x) : r == 1 ? (x % 7 == 0 ? 1u << (x % 32) : 0u) : (x % 3 ? ~0u : uint32_t(x));
            }
        std::vector<float> want = l;
        ember::apply_token_mask(want.data(), rows, vocab, ld, m.data(), W);
        DeviceBuffer dl = dev_alloc(l.size() * 4), dm = dev_alloc(m.size() * 4);
        CUDA_CHECK(cudaMemcpy(dl.get(), l.data(), l.size() * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dm.get(), m.data(), m.size() * 4, cudaMemcpyHostToDevice));
        apply_token_mask(static_cast<float*>(dl.get()), rows, vocab, ld, static_cast<uint32_t*>(dm.get()), W, nullptr);
        std::vector<float> got(l.size());
        CUDA_CHECK(cudaMemcpy(got.data(), dl.get(), got.size() * 4, cudaMemcpyDeviceToHost));
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "vocab " << vocab;
    }
}

// The row map of a batched step: some rows constrained (in any order of the packed mask rows), some not.
TEST(TokenMaskCuda, RowMapMatchesCpuReference) {
    SKIP_WITHOUT_GPU();
    std::mt19937_64 g(3);
    for (int64_t vocab : {33, 49152, 248320}) {
        const int64_t rows = 7, ld = vocab + 3, W = token_mask_words(vocab) + 1, nm = 4;
        std::vector<float> l(size_t(rows * ld));
        std::normal_distribution<float> nd(0.f, 3.f);
        for (float& x : l) x = nd(g);
        std::vector<uint32_t> m(size_t(nm * W));
        for (uint32_t& w : m) w = uint32_t(g()) & uint32_t(g());  // about a quarter of the tokens allowed
        const std::vector<int32_t> map = {2, -1, 0, -1, 3, 1, -1};  // rows 1, 3 and 6 unconstrained
        std::vector<float> want = l;
        ember::apply_token_mask_rows(want.data(), rows, vocab, ld, m.data(), W, map.data());
        for (int64_t r = 0; r < rows; ++r) {  // the reference itself: unmapped rows untouched, mapped rows masked
            const bool same = std::memcmp(want.data() + r * ld, l.data() + r * ld, size_t(ld) * 4) == 0;
            ASSERT_EQ(same, map[size_t(r)] < 0) << "row " << r;
        }
        DeviceBuffer dl = dev_alloc(l.size() * 4), dm = dev_alloc(m.size() * 4), dr = dev_alloc(map.size() * 4);
        CUDA_CHECK(cudaMemcpy(dl.get(), l.data(), l.size() * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dm.get(), m.data(), m.size() * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dr.get(), map.data(), map.size() * 4, cudaMemcpyHostToDevice));
        apply_token_mask_rows(static_cast<float*>(dl.get()), rows, vocab, ld, static_cast<uint32_t*>(dm.get()), W,
                              static_cast<int32_t*>(dr.get()), nullptr);
        std::vector<float> got(l.size());
        CUDA_CHECK(cudaMemcpy(got.data(), dl.get(), got.size() * 4, cudaMemcpyDeviceToHost));
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "vocab " << vocab;
    }
}

TEST(TokenMaskCuda, ArgmaxAfterMaskPicksAnAllowedToken) {
    SKIP_WITHOUT_GPU();
    const int64_t V = 248320, W = token_mask_words(V);
    std::mt19937_64 g(2);
    std::normal_distribution<float> nd(0.f, 3.f);
    std::vector<float> l(static_cast<size_t>(V));
    for (float& x : l) x = nd(g);
    DeviceBuffer dl = dev_alloc(size_t(V) * 4), dm = dev_alloc(size_t(W) * 4), out = dev_alloc(4),
                 ws = dev_alloc(argmax_workspace_bytes(V));
    for (int trial = 0; trial < 20; ++trial) {
        std::vector<uint32_t> m(size_t(W), 0u);
        for (int k = 0; k < 1 + trial * 3; ++k) {
            const int64_t v = int64_t(g() % uint64_t(V));
            m[size_t(v / 32)] |= 1u << (v % 32);
        }
        std::vector<float> masked = l;
        ember::apply_token_mask(masked.data(), 1, V, V, m.data(), W);
        CUDA_CHECK(cudaMemcpy(dl.get(), l.data(), size_t(V) * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dm.get(), m.data(), size_t(W) * 4, cudaMemcpyHostToDevice));
        apply_token_mask(static_cast<float*>(dl.get()), 1, V, V, static_cast<uint32_t*>(dm.get()), W, nullptr);
        argmax(static_cast<float*>(dl.get()), V, static_cast<int32_t*>(out.get()), ws.get(), nullptr);
        int32_t id = -1;
        CUDA_CHECK(cudaMemcpy(&id, out.get(), 4, cudaMemcpyDeviceToHost));
        EXPECT_TRUE(token_allowed(m.data(), id)) << id;
        EXPECT_EQ(id, ember::argmax(masked.data(), V));
    }
}

}  // namespace
}  // namespace ember::cuda
