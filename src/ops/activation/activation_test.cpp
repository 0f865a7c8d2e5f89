// Tests for elementwise activations: fast vs double reference on random and extreme inputs, torch thresholds.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/activation/activation.h"

namespace ember {
namespace {

constexpr double kEps = 1.1920929e-7;

std::vector<float> inputs(size_t n, uint64_t seed) {
    std::mt19937_64 g(seed);
    std::normal_distribution<float> dist(0.f, 4.f);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(g);
    const float extreme[] = {0.f, -0.f, 1e-8f, -1e-8f, 19.99f, 20.f, 20.001f, -20.f, 50.f, -50.f, 87.f, -87.f, 100.f};
    for (size_t i = 0; i < sizeof(extreme) / sizeof(extreme[0]) && i < n; ++i) v[i * 7 % n] = extreme[i];
    return v;
}

// expf is within 1 ulp; one add, one divide, one multiply: a few ulp relative. Below 1e-30 (x < −88 where
// e^−x overflows float and the result flushes to 0, as in torch) only an absolute bound makes sense.
void expect_rel(double got, double want, const char* what, float x) {
    EXPECT_LE(std::fabs(got - want), 6 * kEps * std::fabs(want) + 1e-30) << what << "(" << x << ")";
}

TEST(Activation, ScalarsMatchDouble) {
    for (float x : inputs(20000, 1)) {
        expect_rel(sigmoid(x), sigmoid_ref(x), "sigmoid", x);
        expect_rel(silu(x), silu_ref(x), "silu", x);
        expect_rel(softplus(x), softplus_ref(x), "softplus", x);
    }
}

TEST(Activation, TorchEdgeSemantics) {
    EXPECT_EQ(softplus(20.5f), 20.5f);                 // above threshold 20: identity
    EXPECT_EQ(softplus(20.f), float(std::log1p(std::exp(20.0))));  // at threshold: still log1p(exp)
    EXPECT_EQ(sigmoid(-200.f), 0.f);
    EXPECT_EQ(sigmoid(200.f), 1.f);
    EXPECT_EQ(silu(-200.f), 0.f);
    EXPECT_EQ(silu(200.f), 200.f);
    EXPECT_EQ(silu(0.f), 0.f);
    EXPECT_EQ(sigmoid(0.f), 0.5f);
    EXPECT_NEAR(softplus(0.f), std::log(2.0), 1e-7);
}

TEST(Activation, SwigluMatchesRef) {
    for (int64_t n : {1, 7, 1000, 16385, 100003}) {
        std::vector<float> g = inputs(size_t(n), 10 + n), u = inputs(size_t(n), 20 + n);
        std::vector<float> out(static_cast<size_t>(n), NAN), want(static_cast<size_t>(n));
        swiglu(g.data(), u.data(), out.data(), n);
        swiglu_ref(g.data(), u.data(), want.data(), n);
        for (int64_t i = 0; i < n; ++i) expect_rel(out[i], want[i], "swiglu", g[i]);
        swiglu(g.data(), u.data(), g.data(), n);  // in place over gate
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g[i], out[i]);
    }
}

TEST(Activation, SigmoidMulMatchesRef) {
    for (int64_t n : {1, 9, 2048, 65537}) {
        std::vector<float> x = inputs(size_t(n), 30 + n), gate = inputs(size_t(n), 40 + n), want = x;
        sigmoid_mul(x.data(), gate.data(), n);
        sigmoid_mul_ref(want.data(), gate.data(), n);
        for (int64_t i = 0; i < n; ++i) expect_rel(x[i], want[i], "sigmoid_mul", gate[i]);
    }
}

}  // namespace
}  // namespace ember
