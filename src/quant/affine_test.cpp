// quant/affine_test.cpp: MLX affine format — bit layout, mlx goldens, quantize/dequantize round trips.
#include "quant/affine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace ember {
namespace {

float as_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// Independent bit-stream model: a vector<bool> of stream bits, LSB of word 0 first.
std::vector<uint32_t> pack_via_bitvector(const std::vector<int>& q, int bits) {
    std::vector<bool> stream;
    for (int v : q)
        for (int i = 0; i < bits; ++i) stream.push_back((v >> i) & 1);
    std::vector<uint32_t> words((stream.size() + 31) / 32, 0u);
    for (size_t i = 0; i < stream.size(); ++i)
        if (stream[i]) words[i / 32] |= 1u << (i % 32);
    return words;
}

TEST(Affine, KnownBitPatterns) {
    // 4-bit: codes 0..7 fill word 0 nibble by nibble, LSB first.
    std::vector<uint32_t> w4(4, 0u);
    for (int c = 0; c < 32; ++c) affine_put(w4.data(), c, 4, static_cast<uint32_t>(c % 16));
    EXPECT_EQ(w4[0], 0x76543210u);
    EXPECT_EQ(w4[1], 0xfedcba98u);
    // 8-bit: bytes, little-endian.
    std::vector<uint32_t> w8(8, 0u);
    for (int c = 0; c < 32; ++c) affine_put(w8.data(), c, 8, static_cast<uint32_t>(c + 0xa0));
    EXPECT_EQ(w8[0], 0xa3a2a1a0u);
    EXPECT_EQ(w8[7], 0xbfbebdbcu);
    // 2-bit: 16 codes per word.
    std::vector<uint32_t> w2(2, 0u);
    for (int c = 0; c < 32; ++c) affine_put(w2.data(), c, 2, static_cast<uint32_t>(c % 4));
    EXPECT_EQ(w2[0], 0xe4e4e4e4u);
    // 3-bit: code 10 occupies stream bits 30..32 and straddles words 0 and 1.
    std::vector<uint32_t> w3(3, 0u);
    affine_put(w3.data(), 10, 3, 0b101u);
    EXPECT_EQ(w3[0], 0x40000000u);
    EXPECT_EQ(w3[1], 0x00000001u);
    EXPECT_EQ(affine_get(w3.data(), 10, 3), 5);
    EXPECT_EQ(affine_get(w3.data(), 9, 3), 0);
    EXPECT_EQ(affine_get(w3.data(), 11, 3), 0);
    // 5-bit: code 6 occupies bits 30..34; 6-bit: code 5 occupies bits 30..35.
    std::vector<uint32_t> w5(5, 0u);
    affine_put(w5.data(), 6, 5, 0b11111u);
    EXPECT_EQ(w5[0], 0xc0000000u);
    EXPECT_EQ(w5[1], 0x00000007u);
    std::vector<uint32_t> w6(6, 0u);
    affine_put(w6.data(), 5, 6, 0b100001u);
    EXPECT_EQ(w6[0], 0x40000000u);
    EXPECT_EQ(w6[1], 0x00000008u);
    // All-ones 3-bit codes for 32 elements fill exactly 3 words.
    std::vector<uint32_t> w3b(3, 0u);
    for (int c = 0; c < 32; ++c) affine_put(w3b.data(), c, 3, 7u);
    for (uint32_t v : w3b) EXPECT_EQ(v, 0xffffffffu);
}

TEST(Affine, GetPutMatchBitStreamModel) {
    std::mt19937 rng(7);
    for (int bits : {2, 3, 4, 5, 6, 8}) {
        const int cols = 32 * 7;
        std::vector<int> q(cols);
        for (int& v : q) v = static_cast<int>(rng() % (1u << bits));
        std::vector<uint32_t> want = pack_via_bitvector(q, bits);
        ASSERT_EQ(static_cast<int64_t>(want.size()), affine_row_words(cols, bits));
        std::vector<uint32_t> got(want.size(), 0u);
        for (int c = 0; c < cols; ++c) affine_put(got.data(), c, bits, static_cast<uint32_t>(q[c]));
        EXPECT_EQ(got, want) << "bits=" << bits;
        for (int c = 0; c < cols; ++c) ASSERT_EQ(affine_get(want.data(), c, bits), q[c]) << bits << " " << c;
    }
}

// mx.quantize goldens (mlx 0.32.4), w[c] = ((c*37)%101 - 50)/32, +3 for c in [40,48), group 32.
struct Golden { int bits; std::vector<uint32_t> packed, scales, biases; };
const Golden kGolden[] = {
    {2, {0xb6dcb6dfu, 0xc72db72du, 0x45149aaeu, 0xe9a6eba6u}, {0xbf480000u, 0xc0040000u}, {0x3fc80000u, 0x40840000u}},
    {3, {0xf078ceafu, 0x50f19d5eu, 0xa1e33abdu, 0x99cee97cu, 0xf99d40b0u, 0xf33ba5d2u}, {0xbec80000u, 0xbf533333u},
     {0x3fc80000u, 0x40840000u}},
    {4, {0x7d38e4afu, 0x8e4af5b1u, 0x9f5b06c2u, 0xa06c28d3u, 0xd7ae8be9u, 0x50361472u, 0xe9cf9c7au, 0xe9c7ad8bu},
     {0xbe480000u, 0xbec00000u}, {0x3fc80000u, 0x40840000u}},
    {5, {0x8b1ea29fu, 0x3faec276u, 0xb724870fu, 0x66979550u, 0xa01981bfu, 0x2dc8e3d3u, 0xd121e3dcu, 0x69f5580cu,
         0x17ecb1fau, 0xf4f4eaeeu}, {0xbdc80000u, 0xbe37a6f5u}, {0x3fc80000u, 0x40840000u}},
    {6, {0xa2e91a3fu, 0x5b447332u, 0x8383e6f9u, 0xeb09ac48u, 0xed8d93c4u, 0xa4062f19u, 0x7a8f0fa7u, 0x1787da0bu,
         0x5c035a11u, 0xbfa357ecu, 0x886eee5cu, 0xfa7d1eafu}, {0xbd480000u, 0xbdb3bea3u}, {0x3fc80000u, 0x40840000u}},
    {8, {0xe643a1ffu, 0x6ecd2988u, 0xf854b30fu, 0x80df3b9au, 0x0866c521u, 0x92f14dacu, 0x1a78d733u, 0xa4005fbdu,
         0x8ec4f99du, 0xdc80b5ebu, 0x0e44791du, 0x5c00356bu, 0xa3d87cb1u, 0xf094caffu, 0xade286bbu, 0xfa9ed477u},
     {0xbc480000u, 0xbcb1da46u}, {0x3fc80000u, 0x40840000u}},
};

TEST(Affine, QuantizeMatchesMlxGolden) {
    float w[64];
    for (int c = 0; c < 64; ++c) w[c] = static_cast<float>((c * 37) % 101 - 50) / 32.0f + (c >= 40 && c < 48 ? 3.0f : 0.0f);
    for (const Golden& g : kGolden) {
        std::vector<uint32_t> packed(affine_row_words(64, g.bits));
        float s[2], b[2];
        affine_quantize_row(w, 64, g.bits, 32, packed.data(), s, b);
        EXPECT_EQ(packed, g.packed) << "bits=" << g.bits;
        for (int i = 0; i < 2; ++i) {
            EXPECT_EQ(s[i], as_float(g.scales[i])) << "bits=" << g.bits << " group " << i;
            EXPECT_EQ(b[i], as_float(g.biases[i])) << "bits=" << g.bits << " group " << i;
        }
    }
}

// Fill a row with groups of different character: normal, shifted, all-positive, all-negative, constant, zero.
void fill_row(std::mt19937& rng, float* w, int64_t cols, int gs) {
    std::normal_distribution<float> nd(0.0f, 0.05f);
    for (int64_t g = 0; g < cols / gs; ++g) {
        int kind = static_cast<int>(rng() % 6);
        float c0 = nd(rng) * 20.0f;
        for (int64_t c = g * gs; c < (g + 1) * gs; ++c) {
            float v = nd(rng);
            switch (kind) {
                case 1: v += 0.3f; break;
                case 2: v = std::abs(v); break;
                case 3: v = -std::abs(v); break;
                case 4: v = c0; break;
                case 5: v = 0.0f; break;
                default: break;
            }
            w[c] = v;
        }
    }
}

TEST(Affine, RandomRoundTrip) {
    std::mt19937 rng(12345);
    for (int bits : {2, 3, 4, 5, 6, 8}) {
        for (int gs : {32, 64, 128}) {
            const int64_t rows = 9, cols = gs * 5, ng = cols / gs, nw = affine_row_words(cols, bits);
            const int n_bins = (1 << bits) - 1;
            std::vector<float> w(rows * cols), s(rows * ng), b(rows * ng), d(rows * cols, NAN);
            std::vector<uint32_t> p(rows * nw);
            for (int64_t r = 0; r < rows; ++r) {
                fill_row(rng, &w[r * cols], cols, gs);
                affine_quantize_row(&w[r * cols], cols, bits, gs, &p[r * nw], &s[r * ng], &b[r * ng]);
            }
            Weight W;
            W.format = WeightFormat::AFFINE;
            W.rows = rows, W.cols = cols, W.bits = bits, W.group_size = gs;
            W.data = p.data(), W.scales = s.data(), W.biases = b.data(), W.sb_dtype = DType::F32;
            for (int64_t r = 0; r < rows; ++r) affine_dequantize_row(W, r, &d[r * cols]);
            for (int64_t r = 0; r < rows; ++r) {
                for (int64_t c = 0; c < cols; ++c) {
                    const int64_t g = r * ng + c / gs;
                    const int q = affine_get(&p[r * nw], c, bits);
                    const float sq = s[g] * static_cast<float>(q);
                    ASSERT_EQ(d[r * cols + c], sq + b[g]) << "affine formula, bits=" << bits << " gs=" << gs;
                    // The code is the clamped nearest code (MLX rule); unclamped codes are within |s|/2,
                    // clamped far-end codes within |s| (MLX's scale adjustment q0 can overshoot the range).
                    const float err = std::abs(d[r * cols + c] - w[r * cols + c]);
                    const float tol = std::abs(s[g]) * (q > 0 && q < n_bins ? 0.5f : 1.0f) * (1.0f + 1e-5f) + 1e-7f;
                    ASSERT_LE(err, tol) << "bits=" << bits << " gs=" << gs << " r=" << r << " c=" << c << " q=" << q;
                    float qq = std::rint((w[r * cols + c] - b[g]) / s[g]);
                    qq = std::fmin(std::fmax(qq, 0.0f), static_cast<float>(n_bins));
                    ASSERT_EQ(q, static_cast<int>(qq));
                }
            }
        }
    }
}

TEST(Affine, DequantizeHalfScaleDtypes) {
    std::mt19937 rng(99);
    for (DType dt : {DType::BF16, DType::F16}) {
        for (int bits : {3, 4, 8}) {
            const int gs = 64;
            const int64_t cols = 256, ng = cols / gs, nw = affine_row_words(cols, bits);
            std::vector<float> w(cols), s(ng), b(ng), d(cols);
            std::vector<uint32_t> p(nw);
            fill_row(rng, w.data(), cols, gs);
            affine_quantize_row(w.data(), cols, bits, gs, p.data(), s.data(), b.data());
            std::vector<uint16_t> s16(ng), b16(ng);
            for (int64_t g = 0; g < ng; ++g) {
                s16[g] = dt == DType::BF16 ? f32_to_bf16(s[g]) : f32_to_f16(s[g]);
                b16[g] = dt == DType::BF16 ? f32_to_bf16(b[g]) : f32_to_f16(b[g]);
            }
            Weight W;
            W.format = WeightFormat::AFFINE;
            W.rows = 1, W.cols = cols, W.bits = bits, W.group_size = gs;
            W.data = p.data(), W.scales = s16.data(), W.biases = b16.data(), W.sb_dtype = dt;
            affine_dequantize_row(W, 0, d.data());
            for (int64_t c = 0; c < cols; ++c) {
                const float sv = load_float(s16.data(), dt, static_cast<size_t>(c / gs));
                const float bv = load_float(b16.data(), dt, static_cast<size_t>(c / gs));
                const float sq = sv * static_cast<float>(affine_get(p.data(), c, bits));
                ASSERT_EQ(d[c], sq + bv);
            }
        }
    }
}

}  // namespace
}  // namespace ember
