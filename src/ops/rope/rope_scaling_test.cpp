// ops/rope/rope_scaling_test.cpp: apply_rope_scaling against transformers' own formulas
// (modeling_rope_utils._compute_linear_scaling_rope_parameters / _compute_yarn_parameters, re-derived here in
// double: mix the interpolated and extrapolated inverse frequencies with the linear ramp), combined with
// existing frequency factors, and the refused configurations.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/rope/rope_scaling.h"

namespace ember {
namespace {

// transformers' YaRN inverse frequencies and attention factor (truncate = True, mscale defaults).
std::vector<double> hf_yarn(int64_t dim, double base, double factor, double orig, double beta_fast, double beta_slow,
                            double& attention_factor) {
    auto corr_dim = [&](double rot) { return dim * std::log(orig / (rot * 2 * M_PI)) / (2 * std::log(base)); };
    double low = std::max(std::floor(corr_dim(beta_fast)), 0.0);
    double high = std::min(std::ceil(corr_dim(beta_slow)), double(dim - 1));
    if (low == high) high += 0.001;
    std::vector<double> inv(dim / 2);
    for (int64_t j = 0; j < dim / 2; ++j) {
        const double pos_freq = std::pow(base, double(2 * j) / double(dim));
        const double extrap = 1.0 / pos_freq, interp = 1.0 / (factor * pos_freq);
        const double ramp = std::clamp((double(j) - low) / (high - low), 0.0, 1.0);
        const double w_extrap = 1.0 - ramp;
        inv[j] = interp * (1 - w_extrap) + extrap * w_extrap;
    }
    attention_factor = factor <= 1 ? 1.0 : 0.1 * std::log(factor) + 1.0;
    return inv;
}

TEST(RopeScaling, YarnMatchesTransformers) {
    for (auto [dim, base, factor, orig] : {std::tuple{64, 10000.0, 4.0, 64.0}, {128, 1000000.0, 4.0, 32768.0},
                                         {32, 500000.0, 8.0, 8192.0}, {128, 10000.0, 2.5, 2048.0}}) {
        RopeScaling s;
        s.type = "yarn", s.factor = float(factor), s.orig_ctx = int64_t(orig);
        std::vector<float> ff;
        auto mul = apply_rope_scaling(s, dim, dim, float(base), ff);
        ASSERT_TRUE(mul.is_ok()) << mul.message();
        double af;
        const auto want = hf_yarn(dim, base, factor, orig, 32, 1, af);
        ASSERT_EQ(ff.size(), want.size());
        int interpolated = 0, extrapolated = 0;
        for (int64_t j = 0; j < dim / 2; ++j) {
            const double inv = std::pow(base, -double(2 * j) / double(dim)) / ff[j];
            EXPECT_NEAR(inv / want[j], 1.0, 2e-6) << "dim " << dim << " pair " << j;
            interpolated += std::fabs(ff[j] - factor) < 1e-5, extrapolated += std::fabs(ff[j] - 1) < 1e-6;
        }
        EXPECT_GT(interpolated + extrapolated, 0);  // the ramp has both ends (not a constant)
        EXPECT_NEAR(mul.value(), af * af, 1e-6);
    }
}

TEST(RopeScaling, LinearAndExistingFactors) {
    RopeScaling s;
    s.type = "linear", s.factor = 4.f;
    std::vector<float> ff = {1.f, 2.f, 8.f};  // e.g. a rope_freqs tensor
    auto mul = apply_rope_scaling(s, 6, 6, 10000.f, ff);
    ASSERT_TRUE(mul.is_ok());
    EXPECT_EQ(mul.value(), 1.f);
    EXPECT_EQ(ff, (std::vector<float>{4.f, 8.f, 32.f}));
    std::vector<float> none;
    s.type = "none";
    EXPECT_EQ(apply_rope_scaling(s, 6, 6, 10000.f, none).value(), 1.f);
    EXPECT_TRUE(none.empty());
}

TEST(RopeScaling, Errors) {
    std::vector<float> ff;
    auto err = [&](RopeScaling s, int64_t rot, int64_t hd, const char* needle) {
        ff.clear();
        auto r = apply_rope_scaling(s, rot, hd, 10000.f, ff);
        ASSERT_FALSE(r.is_ok()) << needle;
        EXPECT_NE(r.message().find(needle), std::string::npos) << r.message();
    };
    RopeScaling s;
    s.type = "longrope";
    err(s, 64, 64, "'longrope' is not supported");
    s.type = "linear", s.factor = 0.f;
    err(s, 64, 64, "factor 0 is not positive");
    s.type = "yarn", s.factor = 4.f;
    err(s, 64, 64, "original_context_length");
    s.orig_ctx = 4096;
    err(s, 32, 64, "partial rotary dims (32 of 64)");
}

}  // namespace
}  // namespace ember
