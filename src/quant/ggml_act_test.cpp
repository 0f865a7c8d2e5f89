// quant/ggml_act_test.cpp: the 8-bit activation blocks of quant/ggml_act.h — the rounding rules of llama.cpp's
// x86 CPU backend on hand-made blocks (ties to even, fp16 scales, Q8_1's s from the unrounded d, Q8_K's sign
// convention), and the error bound |x − d·q| ≤ |d|/2 (+ the fp16 rounding of d) on random blocks.
#include "quant/ggml_act.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"

namespace ember {
namespace {

struct Out {
    std::vector<int8_t> q;
    std::vector<float> d, s;
};
Out quantize(ActBlocks t, const std::vector<float>& x) {
    Out o{std::vector<int8_t>(x.size()), std::vector<float>(x.size() / 32), std::vector<float>(x.size() / 32)};
    ggml_quantize_act(t, x.data(), static_cast<int64_t>(x.size()), o.q.data(), o.d.data(), o.s.data());
    return o;
}

TEST(GgmlAct, Pairing) {
    EXPECT_EQ(ggml_act_blocks(GgmlType::Q4_0), ActBlocks::Q8_0);
    EXPECT_EQ(ggml_act_blocks(GgmlType::Q5_0), ActBlocks::Q8_0);
    EXPECT_EQ(ggml_act_blocks(GgmlType::Q8_0), ActBlocks::Q8_0);
    EXPECT_EQ(ggml_act_blocks(GgmlType::Q4_1), ActBlocks::Q8_1);
    EXPECT_EQ(ggml_act_blocks(GgmlType::Q4_K), ActBlocks::Q8_K);
    EXPECT_EQ(ggml_act_blocks(GgmlType::Q5_K), ActBlocks::Q8_K);
    EXPECT_EQ(ggml_act_blocks(GgmlType::Q6_K), ActBlocks::Q8_K);
    EXPECT_EQ(ggml_act_block_elems(ActBlocks::Q8_K), 256);
    EXPECT_EQ(ggml_act_block_elems(ActBlocks::Q8_1), 32);
}

// amax = 127 makes id = 1 exactly, so x·id = k + 0.5 is an exact tie: rounded to even (roundf would go away
// from zero: 3, −3, 5).
TEST(GgmlAct, Q8_0TiesToEvenAndFp16Scale) {
    std::vector<float> x(64, 0.0f);
    x[0] = 127.0f, x[1] = 2.5f, x[2] = -2.5f, x[3] = 3.5f, x[4] = 4.5f, x[5] = 0.49f, x[6] = -126.5f;
    x[32] = 0.1f, x[33] = -0.3f;  // second block: amax 0.3
    const Out o = quantize(ActBlocks::Q8_0, x);
    EXPECT_EQ(o.q[0], 127);
    EXPECT_EQ(o.q[1], 2);
    EXPECT_EQ(o.q[2], -2);
    EXPECT_EQ(o.q[3], 4);
    EXPECT_EQ(o.q[4], 4);
    EXPECT_EQ(o.q[5], 0);
    EXPECT_EQ(o.q[6], -126);
    EXPECT_EQ(o.d[0], 1.0f);
    const float d1 = 0.3f / 127.0f, id1 = 127.0f / 0.3f;
    EXPECT_EQ(o.d[1], f16_to_f32(f32_to_f16(d1)));  // the stored fp16 scale
    EXPECT_NE(o.d[1], d1);                           // (which is not the fp32 one here)
    EXPECT_EQ(o.q[32], static_cast<int>(std::nearbyint(0.1f * id1)));
    EXPECT_EQ(o.q[33], -127);
    EXPECT_EQ(o.s[1], o.d[1] * static_cast<float>(o.q[32] + o.q[33]));  // Q8_0: d·Σq
}

// Q8_1's s is fp16(d·Σq) with the fp32 d, not the fp16-rounded scale times Σq.
TEST(GgmlAct, Q8_1SumUsesUnroundedScale) {
    std::vector<float> x(32);
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (float& v : x) v = 0.37f * nd(rng);
    const Out o = quantize(ActBlocks::Q8_1, x);
    float a = 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) a = std::fmax(a, std::fabs(x[j])), sum += o.q[j];
    const float d = a / 127.0f;
    EXPECT_EQ(o.d[0], f16_to_f32(f32_to_f16(d)));
    EXPECT_EQ(o.s[0], f16_to_f32(f32_to_f16(d * static_cast<float>(sum))));
    const Out o0 = quantize(ActBlocks::Q8_0, x);  // same codes as Q8_0
    for (int j = 0; j < 32; ++j) EXPECT_EQ(o.q[j], o0.q[j]);
}

// Q8_K: the scale comes from the first element of largest magnitude, with its sign: that element becomes −127
// and d = 1 / (−127 / m) (fp32, not rounded to fp16).
TEST(GgmlAct, Q8_KSignConventionAndZeros) {
    std::vector<float> x(512, 0.0f);
    for (int j = 0; j < 256; ++j) x[j] = 0.01f * static_cast<float>(j % 17) - 0.05f;
    x[40] = 4.0f, x[41] = -4.0f;  // both of largest magnitude: the first (positive) sets the sign
    x[256 + 9] = -2.0f, x[256 + 10] = 1.0f;
    const Out o = quantize(ActBlocks::Q8_K, x);
    EXPECT_EQ(o.q[40], -127);
    EXPECT_EQ(o.q[41], 127);
    const float is0 = -127.0f / 4.0f;
    for (int s = 0; s < 8; ++s) EXPECT_EQ(o.d[s], 1.0f / is0);
    EXPECT_LT(o.d[0], 0.0f);
    EXPECT_EQ(o.q[256 + 9], -127);
    EXPECT_EQ(o.q[256 + 10], 64);  // (−127 / −2)·1 = 63.5 → 64 (even)
    EXPECT_EQ(o.d[8], 1.0f / (-127.0f / -2.0f));
    std::vector<float> z(256, 0.0f);
    const Out oz = quantize(ActBlocks::Q8_K, z);
    for (int j = 0; j < 256; ++j) EXPECT_EQ(oz.q[j], 0);
    for (int s = 0; s < 8; ++s) {
        EXPECT_EQ(oz.d[s], 0.0f);
        EXPECT_EQ(oz.s[s], 0.0f);
    }
    int sum = 0;
    for (int j = 32; j < 64; ++j) sum += o.q[j];
    EXPECT_EQ(o.s[1], o.d[1] * static_cast<float>(sum));  // d·Σq per 32 columns
}

// Random blocks of very different magnitudes: every value is within half a step of d·q (plus, for the fp16
// scales, the relative error 2^-11 of d times |q| ≤ 127), and |q| ≤ 127.
TEST(GgmlAct, RandomBlocksWithinHalfAStep) {
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> ue(-6.0f, 6.0f);  // keeps the fp16 scales normal (d ≥ 2^-14)
    for (ActBlocks t : {ActBlocks::Q8_0, ActBlocks::Q8_1, ActBlocks::Q8_K}) {
        const int B = ggml_act_block_elems(t);
        std::vector<float> x(static_cast<size_t>(B) * 40);
        for (size_t b = 0; b < x.size() / B; ++b) {
            const float scale = std::exp2(ue(rng));
            for (int j = 0; j < B; ++j) x[b * B + j] = scale * nd(rng);
        }
        const Out o = quantize(t, x);
        for (size_t i = 0; i < x.size(); ++i) {
            const double d = o.d[i / 32], q = o.q[i];
            ASSERT_LE(std::abs(q), 127.0);
            const double tol = std::abs(d) * (0.5 + 1e-5) + (t == ActBlocks::Q8_K ? 0.0 : std::abs(d) * 127 * 0x1p-11);
            ASSERT_LE(std::abs(x[i] - d * q), tol) << static_cast<int>(t) << " i=" << i;
        }
    }
}

TEST(GgmlActDeathTest, RaggedColumnsAbort) {
    std::vector<float> x(48, 1.0f), d(2), s(2);
    std::vector<int8_t> q(48);
    EXPECT_DEATH(ggml_quantize_act(ActBlocks::Q8_0, x.data(), 48, q.data(), d.data(), s.data()), "multiple of 32");
    EXPECT_DEATH(ggml_act_blocks(GgmlType::F16), "no 8-bit activation pairing");
}

}  // namespace
}  // namespace ember
