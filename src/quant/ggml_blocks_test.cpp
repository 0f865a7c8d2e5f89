// quant/ggml_blocks_test.cpp: ggml_dequantize vs gguf-py's numpy dequantizers (fixtures from
// scripts/make_ggml_block_fixtures.py: random blocks, random-sign fp16 scales), bit for bit; hand-made blocks.
#include "quant/ggml_blocks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace ember {
namespace {

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

std::vector<uint8_t> read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

class GgmlOracle : public ::testing::TestWithParam<GgmlType> {};

// <TYPE>.bin = n_blocks raw blocks, then the n_blocks·block_elems float32 values gguf-py computed from them.
TEST_P(GgmlOracle, MatchesGgufPyBitExactly) {
    const GgmlTypeTraits tr = ggml_type_traits(GetParam());
    const std::vector<uint8_t> file =
        read_file(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/ggml_blocks/" + tr.name + ".bin");
    const size_t per_block = static_cast<size_t>(tr.block_bytes) + 4u * static_cast<size_t>(tr.block_elems);
    ASSERT_GT(file.size(), 0u) << tr.name;
    ASSERT_EQ(file.size() % per_block, 0u) << tr.name;
    const int64_t nb = static_cast<int64_t>(file.size() / per_block), n = nb * tr.block_elems;
    ASSERT_GE(nb, 200) << tr.name;
    std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n), NAN);
    std::memcpy(want.data(), file.data() + nb * tr.block_bytes, static_cast<size_t>(n) * 4);
    ggml_dequantize(GetParam(), file.data(), n, got.data());
    int bad = 0;
    for (int64_t i = 0; i < n; ++i)
        if (bits_of(got[i]) != bits_of(want[i]) && bad++ < 5)
            ADD_FAILURE() << tr.name << " element " << i << " (block " << i / tr.block_elems << "): got " << got[i]
                          << " want " << want[i];
    EXPECT_EQ(bad, 0);
    // Also one block at a time from an unaligned address (the decoders must not assume alignment).
    std::vector<uint8_t> shifted(static_cast<size_t>(tr.block_bytes) + 1);
    for (int64_t b = 0; b < nb; b += 37) {
        std::memcpy(shifted.data() + 1, file.data() + b * tr.block_bytes, static_cast<size_t>(tr.block_bytes));
        ggml_dequantize(GetParam(), shifted.data() + 1, tr.block_elems, got.data());
        for (int j = 0; j < tr.block_elems; ++j)
            ASSERT_EQ(bits_of(got[j]), bits_of(want[b * tr.block_elems + j])) << tr.name << " block " << b;
    }
}

// ggml_decompose: code·scale + min, in fp32, equals gguf-py's value bit for bit (block-quantized types).
class GgmlDecomposeOracle : public ::testing::TestWithParam<GgmlType> {};
TEST_P(GgmlDecomposeOracle, ReproducesGgufPy) {
    const GgmlTypeTraits tr = ggml_type_traits(GetParam());
    const std::vector<uint8_t> file =
        read_file(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/ggml_blocks/" + tr.name + ".bin");
    const size_t per_block = static_cast<size_t>(tr.block_bytes) + 4u * static_cast<size_t>(tr.block_elems);
    ASSERT_GT(file.size(), 0u);
    const int64_t nb = static_cast<int64_t>(file.size() / per_block);
    std::vector<int8_t> codes(static_cast<size_t>(tr.block_elems));
    float scale[16], mn[16];
    int64_t nonzero_min = 0;
    const bool has_min = GetParam() == GgmlType::Q4_1 || GetParam() == GgmlType::Q4_K || GetParam() == GgmlType::Q5_K;
    for (int64_t b = 0; b < nb; ++b) {
        const int sl = ggml_decompose(GetParam(), file.data() + b * tr.block_bytes, codes.data(), scale, mn).sub_len;
        ASSERT_EQ(sl, GetParam() == GgmlType::Q6_K ? 16 : 32);
        for (int j = 0; j < tr.block_elems; ++j) {
            float want;
            std::memcpy(&want, file.data() + nb * tr.block_bytes + 4 * (b * tr.block_elems + j), 4);
            float got = scale[j / sl] * static_cast<float>(codes[j]);
            if (has_min) got += mn[j / sl];  // (adding the +0 min of the other types would turn −0 into +0)
            ASSERT_EQ(bits_of(got), bits_of(want)) << tr.name << " block " << b << " element " << j;
        }
        for (int s = 0; s < tr.block_elems / sl; ++s) nonzero_min += mn[s] != 0.0f;
    }
    EXPECT_EQ(nonzero_min > 0, has_min) << tr.name;
}

INSTANTIATE_TEST_SUITE_P(All, GgmlDecomposeOracle,
                         ::testing::Values(GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0,
                                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K),
                         [](const ::testing::TestParamInfo<GgmlType>& i) {
                             return std::string(ggml_type_traits(i.param).name);
                         });
INSTANTIATE_TEST_SUITE_P(All, GgmlOracle,
                         ::testing::Values(GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q8_0,
                                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::F32,
                                           GgmlType::F16, GgmlType::BF16),
                         [](const ::testing::TestParamInfo<GgmlType>& i) {
                             return std::string(ggml_type_traits(i.param).name);
                         });

// Hand-made blocks checking the header's layout description directly.
TEST(GgmlBlocks, HandMadeQ4_0AndQ5_0) {
    uint8_t b[22] = {};
    const uint16_t d = f32_to_f16(0.5f);
    std::memcpy(b, &d, 2);
    b[2 + 3] = 0xA1;  // Q4_0: element 3 = lo 1, element 19 = hi 10
    float w[32];
    ggml_dequantize(GgmlType::Q4_0, b, 32, w);
    EXPECT_EQ(w[3], 0.5f * (1 - 8));
    EXPECT_EQ(w[19], 0.5f * (10 - 8));
    EXPECT_EQ(w[0], 0.5f * -8);
    uint8_t c[22] = {};
    std::memcpy(c, &d, 2);
    const uint32_t qh = (1u << 3) | (1u << 19);
    std::memcpy(c + 2, &qh, 4);
    c[6 + 3] = 0xA1;  // Q5_0: element 3 = 1 | 16, element 19 = 10 | 16, element 4 = 0
    ggml_dequantize(GgmlType::Q5_0, c, 32, w);
    EXPECT_EQ(w[3], 0.5f * (17 - 16));
    EXPECT_EQ(w[19], 0.5f * (26 - 16));
    EXPECT_EQ(w[4], 0.5f * -16);
}

TEST(GgmlBlocks, HandMadeQ4_KScalePacking) {
    uint8_t b[144] = {};
    const uint16_t d = f32_to_f16(1.0f), dmin = f32_to_f16(0.25f);
    std::memcpy(b, &d, 2);
    std::memcpy(b + 2, &dmin, 2);
    uint8_t* sc = b + 4;
    // sub-block 1: scale 5, min 7; sub-block 6: scale 0b110011 = 51, min 0b100101 = 37
    sc[1] = 5, sc[5] = 7;
    sc[10] = (51 & 15) | (37 & 15) << 4;
    sc[2] = static_cast<uint8_t>((51 >> 4) << 6);
    sc[6] = static_cast<uint8_t>((37 >> 4) << 6);
    uint8_t* qs = b + 16;
    qs[0 * 32 + 4] = 0x90;  // chunk 0 byte 4: sub-block 1 (hi) element 32 + 4 → q = 9
    qs[3 * 32 + 7] = 0x0C;  // chunk 3 byte 7: sub-block 6 (lo) element 192 + 7 → q = 12
    float w[256];
    ggml_dequantize(GgmlType::Q4_K, b, 256, w);
    EXPECT_EQ(w[36], 5.0f * 9 - 0.25f * 7);
    EXPECT_EQ(w[199], 51.0f * 12 - 0.25f * 37);
    EXPECT_EQ(w[200], -0.25f * 37);
    EXPECT_EQ(w[0], 0.0f);
}

TEST(GgmlBlocks, HandMadeQ6_K) {
    uint8_t b[210] = {};
    const uint16_t d = f32_to_f16(2.0f);
    std::memcpy(b + 208, &d, 2);
    b[192 + 13] = static_cast<uint8_t>(-3);  // scale of elements 208..223 (half 1, k = 2, l 16..31)
    b[64 + 32 * 0 + 17] = 0x50;              // ql half 1, (k & 1) = 0, l = 17; k = 2 takes the high nibble 5
    b[128 + 32 + 17] = 2 << 4;               // qh half 1, l = 17, bits 4..5 (k = 2) = 2
    float w[256];
    ggml_dequantize(GgmlType::Q6_K, b, 256, w);
    EXPECT_EQ(w[128 + 64 + 17], 2.0f * -3 * ((5 | 2 << 4) - 32));
    EXPECT_EQ(w[128 + 17], 0.0f);  // scale 0
}

TEST(GgmlBlocksDeathTest, UnsupportedTypeAborts) {
    uint8_t b[84] = {};
    float w[256];
    EXPECT_DEATH(ggml_dequantize(GgmlType::Q2_K, b, 256, w), "unsupported");
    EXPECT_DEATH(ggml_dequantize(GgmlType::Q4_0, b, 31, w), "elements");
}

}  // namespace
}  // namespace ember
