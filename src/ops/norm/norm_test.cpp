// Tests for ops/norm: rmsnorm, rmsnorm_gated and l2norm against the fp64 references, plus hand-computed cases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ops/norm/norm.h"
#include "ops/norm/silu.h"

namespace ember {
namespace {

constexpr float kEps32 = std::numeric_limits<float>::epsilon();

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (auto& e : v) e = dist(gen);
    return v;
}

// Worst-case relative error of the fp32 kernels: Σx² of d positive terms in 16 partial sums, then a
// sequential sum of the 16 partials, is off by at most (d/16 + 16 + 1)·ε relative (the +1: rounding of x²);
// 1/sqrt halves that; then ≤ 8 more roundings (mean, +eps, sqrt, divide, multiplies, silu's exp/divide,
// rounding of the fp64 reference). Applied relative to |ref|.
float rel_budget(int64_t d) { return (static_cast<float>(d) / 32.0f + 9.0f + 8.0f) * kEps32; }

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float rel) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(std::isfinite(got[i])) << "element " << i << " not written";
        ASSERT_LE(std::fabs(got[i] - want[i]), rel * std::fabs(want[i]) + 1e-30f) << "element " << i;
    }
}

struct Shape { int64_t rows, d; };
const Shape kShapes[] = {{1, 1}, {3, 5}, {7, 16}, {2, 127}, {5, 128}, {33, 2048}, {1, 4095}, {4, 4096}};
const float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(Norm, RmsnormMatchesRef) {
    uint32_t seed = 100;
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(testing::Message() << "rows=" << s.rows << " d=" << s.d << " seed=" << seed);
        auto x = randn(s.rows * s.d, seed++, 3.0f), w = randn(s.d, seed++);
        std::vector<float> got(x.size(), kNaN), want(x.size(), kNaN);
        rmsnorm_ref(x.data(), w.data(), want.data(), s.rows, s.d, 1e-6f);
        rmsnorm(x.data(), w.data(), got.data(), s.rows, s.d, 1e-6f);
        expect_close(got, want, rel_budget(s.d));
        rmsnorm(x.data(), w.data(), x.data(), s.rows, s.d, 1e-6f);  // in place
        expect_close(x, want, rel_budget(s.d));
    }
}

TEST(Norm, RmsnormGatedMatchesRef) {
    uint32_t seed = 200;
    for (const Shape& s : kShapes) {
        SCOPED_TRACE(testing::Message() << "rows=" << s.rows << " d=" << s.d << " seed=" << seed);
        auto x = randn(s.rows * s.d, seed++, 2.0f), z = randn(s.rows * s.d, seed++, 3.0f), w = randn(s.d, seed++);
        std::vector<float> got(x.size(), kNaN), want(x.size(), kNaN);
        rmsnorm_gated_ref(x.data(), z.data(), w.data(), want.data(), s.rows, s.d, 1e-6f);
        rmsnorm_gated(x.data(), z.data(), w.data(), got.data(), s.rows, s.d, 1e-6f);
        expect_close(got, want, rel_budget(s.d));
        rmsnorm_gated(x.data(), z.data(), w.data(), x.data(), s.rows, s.d, 1e-6f);  // in place
        expect_close(x, want, rel_budget(s.d));
    }
}

TEST(Norm, L2normMatchesRef) {
    uint32_t seed = 300;
    for (const Shape& s : kShapes) {
        for (float scale : {1.0f, 1.0f / std::sqrt(128.0f)}) {
            SCOPED_TRACE(testing::Message() << "rows=" << s.rows << " d=" << s.d << " seed=" << seed);
            auto x = randn(s.rows * s.d, seed++, 0.7f);
            std::vector<float> got(x.size(), kNaN), want(x.size(), kNaN);
            l2norm_ref(x.data(), want.data(), s.rows, s.d, 1e-6f, scale);
            l2norm(x.data(), got.data(), s.rows, s.d, 1e-6f, scale);
            expect_close(got, want, rel_budget(s.d));
            l2norm(x.data(), x.data(), s.rows, s.d, 1e-6f, scale);  // in place
            expect_close(x, want, rel_budget(s.d));
        }
    }
}

// Hand-computed: x = [3, 4] → mean x² = 12.5; eps = 0 so y = x / √12.5 · w.
TEST(Norm, RmsnormHandCase) {
    const float x[2] = {3, 4}, w[2] = {2, -1};
    float y[2], yr[2];
    rmsnorm(x, w, y, 1, 2, 0.0f);
    rmsnorm_ref(x, w, yr, 1, 2, 0.0f);
    const double r = 1.0 / std::sqrt(12.5);
    for (int i = 0; i < 2; ++i) {
        EXPECT_NEAR(y[i], x[i] * r * w[i], 4 * kEps32);
        EXPECT_NEAR(yr[i], x[i] * r * w[i], 2 * kEps32);
    }
}

// Gated norm uses plain w (not 1 + w) and silu of z: x = [1, −1] normalises to itself (eps = 0),
// w = [2, 3], z = [0, 20]: y = [2·1·silu(0), 3·(−1)·silu(20)] = [0, −60/(1 + e^−20)].
TEST(Norm, RmsnormGatedHandCaseUsesPlainW) {
    const float x[2] = {1, -1}, z[2] = {0, 20}, w[2] = {2, 3};
    float y[2], yr[2];
    rmsnorm_gated(x, z, w, y, 1, 2, 0.0f);
    rmsnorm_gated_ref(x, z, w, yr, 1, 2, 0.0f);
    const double want1 = -60.0 / (1.0 + std::exp(-20.0));
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_EQ(yr[0], 0.0f);
    EXPECT_NEAR(y[1], want1, 60 * 4 * kEps32);
    EXPECT_NEAR(yr[1], want1, 60 * 2 * kEps32);
    // Doubling w doubles y exactly (a 1 + w convention would not).
    const float w2[2] = {4, 6};
    float y2[2];
    rmsnorm_gated(x, z, w2, y2, 1, 2, 0.0f);
    EXPECT_EQ(y2[1], 2 * y[1]);
}

// l2norm: x = [3, 4] → ‖x‖ = 5; eps = 0, scale 0.5 → [0.3, 0.4].
TEST(Norm, L2normHandCase) {
    const float x[2] = {3, 4};
    float y[2];
    l2norm(x, y, 1, 2, 0.0f, 0.5f);
    EXPECT_NEAR(y[0], 0.3f, 2 * kEps32);
    EXPECT_NEAR(y[1], 0.4f, 2 * kEps32);
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// fuzz_gguf_model found exp_vec(NaN) converting NaN to int (undefined behaviour; UBSan aborts): a NaN weight in
// a GGUF file reached silu through the causal conv. NaN and ±inf must give NaN through plain bit arithmetic,
// and the finite range must still be Cephes-accurate (≤ 2 ulp; beyond the clamp, the clamp's value).
TEST(Norm, ExpVecOfNanIsNanWithoutUndefinedCast) {
    const float inf = std::numeric_limits<float>::infinity();
    for (float x : {kNaN, -kNaN, inf, -inf}) EXPECT_TRUE(std::isnan(exp_vec(x))) << x;
    EXPECT_TRUE(std::isnan(silu_vec(kNaN)));
    for (float x = -87.3f; x <= 88.f; x += 0.37f) {
        const double want = std::exp(double(x));
        EXPECT_LE(std::fabs(exp_vec(x) - want), 2.0 * kEps32 * want) << x;
    }
    EXPECT_EQ(exp_vec(-200.f), exp_vec(-87.33654f));
    EXPECT_EQ(exp_vec(200.f), exp_vec(88.f));
}

}  // namespace
}  // namespace ember
