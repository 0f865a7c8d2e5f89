// ops/linear/weight_repack_test.cpp: GGML → affine repacking is exact — every dequantized value of the result
// equals to the source block's (quant/ggml_blocks.cpp, itself bit-exact against gguf-py), on random blocks
// (every code bit pattern and 6-bit sub-block scale, random fp16 d / m / dmin of either sign), ragged shapes, scales that force the F32 fallback;
// non-finite scales and other types are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "ops/linear/linear.h"
#include "ops/linear/weight_repack.h"

namespace ember {
namespace {

struct Src {
    std::vector<uint8_t> bytes;
    Weight w;
};

// Random blocks; `d_amp` scales the fp16 d (and Q4_1 m) fields.
Src random_ggml(GgmlType t, int64_t rows, int64_t cols, uint32_t seed, float d_amp) {
    Src s;
    const GgmlTypeTraits tr = ggml_type_traits(t);
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 1.f);
    s.bytes.resize(size_t(rows * (cols / tr.block_elems) * tr.block_bytes));
    for (uint8_t& b : s.bytes) b = uint8_t(rng());
    for (size_t blk = 0; blk < s.bytes.size() / size_t(tr.block_bytes); ++blk)
        for (int off : t == GgmlType::Q4_1 || t == GgmlType::Q4_K ? std::vector<int>{0, 2} : std::vector<int>{0}) {
            const uint16_t h = f32_to_f16(d_amp * nd(rng));
            std::memcpy(s.bytes.data() + blk * size_t(tr.block_bytes) + size_t(off), &h, 2);
        }
    s.w.format = WeightFormat::GGML, s.w.ggml_type = t, s.w.rows = rows, s.w.cols = cols, s.w.data = s.bytes.data();
    return s;
}

void expect_same_rows(const Weight& a, const Weight& b) {
    ASSERT_EQ(a.rows, b.rows);
    ASSERT_EQ(a.cols, b.cols);
    std::vector<float> ra(size_t(a.cols)), rb(size_t(a.cols));
    for (int64_t r = 0; r < a.rows; ++r) {
        weight_row(a, r, ra.data());
        weight_row(b, r, rb.data());
        for (int64_t c = 0; c < a.cols; ++c)
            ASSERT_EQ(ra[size_t(c)], rb[size_t(c)])  // (== : a zero may change sign, see weight_repack.h)
                << "row " << r << " col " << c << ": " << ra[size_t(c)] << " vs " << rb[size_t(c)];
    }
}

TEST(WeightRepack, GgmlToAffineIsBitExact) {
    uint32_t seed = 1;
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q4_K})
        for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 32}, {7, 96}, {33, 576}, {3, 4096}}) {
            if (t == GgmlType::Q4_K && cols % 256) continue;
            SCOPED_TRACE(std::string(ggml_type_traits(t).name) + " " + std::to_string(rows) + "x" + std::to_string(cols));
            const Src s = random_ggml(t, rows, cols, seed++, 0.02f);
            auto r = ggml_to_affine(s.w);
            ASSERT_TRUE(r.is_ok()) << r.message();
            const RepackedWeight R = std::move(r).value();
            EXPECT_EQ(R.w.format, WeightFormat::AFFINE);
            EXPECT_EQ(R.w.group_size, 32);
            EXPECT_EQ(R.w.bits, t == GgmlType::Q8_0 ? 8 : 4);
            // small scales: biases exact in F16; Q4_K's d·sc and dmin·m are not
            EXPECT_EQ(R.w.sb_dtype, t == GgmlType::Q4_K ? DType::F32 : DType::F16);
            expect_same_rows(s.w, R.w);
        }
}

TEST(WeightRepack, LargeScalesFallBackToF32) {
    // |8d| (Q4_0) or |128d| (Q8_0) beyond the F16 range: biases are not F16-exact, both arrays become F32.
    for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0}) {
        Src s = random_ggml(t, 5, 64, 77, 0.02f);
        const uint16_t big = f32_to_f16(t == GgmlType::Q4_0 ? -9000.f : 700.f);
        std::memcpy(s.bytes.data() + ggml_type_traits(t).block_bytes * 3, &big, 2);
        auto r = ggml_to_affine(s.w);
        ASSERT_TRUE(r.is_ok()) << r.message();
        const RepackedWeight R = std::move(r).value();
        EXPECT_EQ(R.w.sb_dtype, DType::F32);
        expect_same_rows(s.w, R.w);
    }
}

TEST(WeightRepack, RefusesWhatItCannotConvertExactly) {
    Src s = random_ggml(GgmlType::Q4_0, 2, 64, 5, 0.02f);
    const uint16_t inf = 0x7c00;
    std::memcpy(s.bytes.data() + 18, &inf, 2);
    auto r = ggml_to_affine(s.w);
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.message().find("non-finite"), std::string::npos) << r.message();
    Src k = random_ggml(GgmlType::Q4_K, 2, 256, 6, 0.02f);
    std::memcpy(k.bytes.data() + 144 + 2, &inf, 2);  // dmin of the second block
    EXPECT_FALSE(ggml_to_affine(k.w).is_ok());
    Weight w = k.w;
    w.ggml_type = GgmlType::Q6_K;
    EXPECT_FALSE(ggml_to_affine(w).is_ok());
    EXPECT_FALSE(ggml_affine_exact(GgmlType::Q6_K));
    EXPECT_FALSE(ggml_affine_exact(GgmlType::Q5_K));
    Weight dense;
    dense.rows = 1, dense.cols = 32, dense.data = k.bytes.data();
    EXPECT_FALSE(ggml_to_affine(dense).is_ok());
}

}  // namespace
}  // namespace ember
