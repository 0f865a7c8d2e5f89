// GPU test for apply_token_mask (token_mask_cuda.h) against the CPU reference (token_mask.h): random logits and
// masks (dense, sparse, all-allowed words, a ragged last word), several rows with padded strides, bit for bit;
// then argmax after the mask never picks a masked token, and the fused argmax_rows_masked selects exactly what
// apply_token_mask_rows then argmax_rows do (ids and chosen logits, ties, NaN, rows whose allowed logits are all
// −inf). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
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


// The batched engine's greedy masked selection: argmax_rows_masked on the raw logits == apply_token_mask_rows then
// argmax_rows (the separate path), bit for bit in ids and chosen logits, with a row map, and == the CPU argmax of the
// masked row where it is defined. Row kinds: sparse masks, dense masks, ties among allowed tokens, NaN (allowed and
// masked), every allowed logit −inf (the chosen token may then be a masked one: its logit reads −inf either way).
TEST(TokenMaskCuda, FusedArgmaxEqualsMaskThenArgmax) {
    SKIP_WITHOUT_GPU();
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    std::mt19937_64 g(4);
    std::normal_distribution<float> nd(0.f, 3.f);
    for (int64_t vocab : {1, 33, 2049, 49152, 248320}) {
        const int64_t rows = 9, W = token_mask_words(vocab) + 1, nm = 7;
        const std::vector<int32_t> map = {3, -1, 0, 6, 1, -1, 2, 5, 4};  // rows 1 and 5 unconstrained
        std::vector<float> l(size_t(rows * vocab));
        for (float& x : l) x = nd(g);
        std::vector<uint32_t> m(size_t(nm * W), 0u);
        for (int64_t k = 0; k < nm; ++k) {
            uint32_t* mk = m.data() + k * W;
            if (k == 1) {  // dense: about half allowed
                for (int64_t w = 0; w < W; ++w) mk[w] = uint32_t(g());
            } else {  // sparse: a few dozen tokens
                for (int j = 0; j < 40; ++j) {
                    const int64_t v = int64_t(g() % uint64_t(vocab));
                    mk[v / 32] |= 1u << (v % 32);
                }
            }
            mk[W - 1] |= ~0u;  // padding words and bits past the vocabulary are never read as tokens
        }
        auto row = [&](int64_t r) { return l.data() + r * vocab; };
        auto allowed = [&](int64_t r, int64_t v) { return token_allowed(m.data() + map[size_t(r)] * W, v); };
        // row 2 (mask 0): ties among allowed tokens at a large value
        for (int64_t v = 0; v < vocab; ++v)
            if (allowed(2, v)) row(2)[v] = 7.5f;
        // row 3 (mask 6): NaN everywhere masked, and on its first allowed token
        for (int64_t v = 0, first = 1; v < vocab; ++v)
            if (!allowed(3, v)) row(3)[v] = nan;
            else if (first) row(3)[v] = nan, first = 0;
        // row 4 (mask 1): every allowed logit −inf, the masked ones large
        for (int64_t v = 0; v < vocab; ++v) row(4)[v] = allowed(4, v) ? -inf : 100.f;
        // row 5 (unconstrained): a NaN and a +inf
        row(5)[vocab / 2] = nan;
        row(5)[vocab - 1] = inf;
        std::vector<float> masked = l;
        ember::apply_token_mask_rows(masked.data(), rows, vocab, vocab, m.data(), W, map.data());

        DeviceBuffer dl = dev_alloc(l.size() * 4), dml = dev_alloc(l.size() * 4), dm = dev_alloc(m.size() * 4),
                     dr = dev_alloc(map.size() * 4), ws = dev_alloc(argmax_rows_workspace_bytes(rows, vocab)),
                     ids = dev_alloc(size_t(2 * rows) * 4), lg = dev_alloc(size_t(2 * rows) * 4);
        CUDA_CHECK(cudaMemcpy(dl.get(), l.data(), l.size() * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dml.get(), l.data(), l.size() * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dm.get(), m.data(), m.size() * 4, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(dr.get(), map.data(), map.size() * 4, cudaMemcpyHostToDevice));
        auto* id0 = static_cast<int32_t*>(ids.get());
        auto* lg0 = static_cast<float*>(lg.get());
        // separate: mask kernel in place, then argmax_rows; fused: the raw logits
        apply_token_mask_rows(static_cast<float*>(dml.get()), rows, vocab, vocab, static_cast<uint32_t*>(dm.get()), W,
                              static_cast<int32_t*>(dr.get()), nullptr);
        argmax_rows(static_cast<float*>(dml.get()), rows, vocab, id0, lg0, ws.get(), nullptr);
        argmax_rows_masked(static_cast<float*>(dl.get()), rows, vocab, static_cast<uint32_t*>(dm.get()), W,
                           static_cast<int32_t*>(dr.get()), id0 + rows, lg0 + rows, ws.get(), nullptr);
        std::vector<int32_t> got_id(size_t(2 * rows));
        std::vector<float> got_lg(size_t(2 * rows)), after(l.size());
        CUDA_CHECK(cudaMemcpy(got_id.data(), id0, got_id.size() * 4, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(got_lg.data(), lg0, got_lg.size() * 4, cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(after.data(), dl.get(), after.size() * 4, cudaMemcpyDeviceToHost));
        ASSERT_EQ(std::memcmp(after.data(), l.data(), l.size() * 4), 0) << "the fused argmax wrote the logits";
        for (int64_t r = 0; r < rows; ++r) {
            SCOPED_TRACE(testing::Message() << "vocab " << vocab << " row " << r);
            const int32_t sep = got_id[size_t(r)], fus = got_id[size_t(rows + r)];
            EXPECT_EQ(fus, sep);
            EXPECT_EQ(std::memcmp(&got_lg[size_t(r)], &got_lg[size_t(rows + r)], 4), 0)
                << got_lg[size_t(r)] << " vs " << got_lg[size_t(rows + r)];
            if (r != 4 && r != 5) {  // a finite allowed maximum: the CPU argmax of the masked row, an allowed token
                EXPECT_EQ(fus, ember::argmax(masked.data() + r * vocab, vocab));
                if (map[size_t(r)] >= 0) {
                    EXPECT_TRUE(allowed(r, fus)) << fus;
                }
            }
        }
    }
}

}  // namespace
}  // namespace ember::cuda
