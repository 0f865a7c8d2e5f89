// Tests for ops/causal_conv1d: kernel vs reference, hand-computed case, state continuation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ops/causal_conv1d/causal_conv1d.h"

namespace ember {
namespace {

constexpr float kEps32 = std::numeric_limits<float>::epsilon();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> randn(size_t n, uint32_t seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto& e : v) e = dist(gen);
    return v;
}

// The fp32 kernel sums K products sequentially: |err| ≤ K·ε·Σ|w·x| before SiLU; silu' ≤ 1.1, and the
// SiLU itself adds ≤ 4ε·|y|. Budget per element: (K + 1)·ε·Σ_j|w_j x_j|·1.1 + 4ε|y| (computed per element).
void expect_conv_close(const std::vector<float>& got, const std::vector<float>& want,
                       const std::vector<float>& abs_sum, int K) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(std::isfinite(got[i])) << "element " << i << " not written";
        const float tol = (K + 1) * kEps32 * abs_sum[i] * 1.1f + 4 * kEps32 * std::fabs(want[i]) + 1e-30f;
        ASSERT_LE(std::fabs(got[i] - want[i]), tol) << "element " << i;
    }
}

// Σ_j |w[c,j] · xx[t+j,c]| for the budget.
std::vector<float> abs_terms(const std::vector<float>& x, int64_t T, int64_t C, const std::vector<float>& w, int K,
                             const std::vector<float>& state) {
    const int64_t S = K - 1;
    std::vector<float> out(T * C);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t c = 0; c < C; ++c) {
            double s = 0;
            for (int j = 0; j < K; ++j) {
                int64_t r = t + j;
                float v = r < S ? state[r * C + c] : x[(r - S) * C + c];
                s += std::fabs(static_cast<double>(w[c * K + j]) * v);
            }
            out[t * C + c] = static_cast<float>(s);
        }
    return out;
}

TEST(CausalConv1d, MatchesRef) {
    uint32_t seed = 1000;
    for (int K : {4, 1, 2, 3}) {
        for (int64_t C : {1, 7, 64, 65, 200}) {
            for (int64_t T = (K == 4 ? 1 : 0); T <= 10; ++T) {
                if (K != 4 && T > 5) break;
                SCOPED_TRACE(testing::Message() << "K=" << K << " C=" << C << " T=" << T << " seed=" << seed);
                auto x = randn(T * C, seed++), w = randn(C * K, seed++), st0 = randn((K - 1) * C, seed++);
                auto st_got = st0, st_want = st0;
                std::vector<float> got(T * C, kNaN), want(T * C, kNaN);
                causal_conv1d_silu_ref(x.data(), T, C, w.data(), K, st_want.data(), want.data());
                causal_conv1d_silu(x.data(), T, C, w.data(), K, st_got.data(), got.data());
                expect_conv_close(got, want, abs_terms(x, T, C, w, K, st0), K);
                EXPECT_EQ(st_got, st_want);  // the state is a copy of inputs: exact
            }
        }
    }
}

// One call over T tokens ≡ two calls over T1 then T − T1 (state carries the last K−1 inputs).
TEST(CausalConv1d, StateContinuation) {
    uint32_t seed = 2000;
    const int K = 4;
    const int64_t C = 70;
    for (int64_t T = 1; T <= 10; ++T) {
        for (int64_t T1 = 0; T1 <= T; ++T1) {
            SCOPED_TRACE(testing::Message() << "T=" << T << " T1=" << T1 << " seed=" << seed);
            auto x = randn(T * C, seed++), w = randn(C * K, seed++), st0 = randn((K - 1) * C, seed++);
            auto st_one = st0, st_two = st0;
            std::vector<float> y_one(T * C, kNaN), y_two(T * C, kNaN);
            causal_conv1d_silu(x.data(), T, C, w.data(), K, st_one.data(), y_one.data());
            causal_conv1d_silu(x.data(), T1, C, w.data(), K, st_two.data(), y_two.data());
            causal_conv1d_silu(x.data() + T1 * C, T - T1, C, w.data(), K, st_two.data(), y_two.data() + T1 * C);
            EXPECT_EQ(y_one, y_two);  // same products summed in the same order: bit-identical
            EXPECT_EQ(st_one, st_two);
        }
    }
}

// Hand-computed, C = 1, K = 3, state [a, b] = [1, 2], x = [3], w = [0.5, −1, 2]:
// s = 0.5·1 − 1·2 + 2·3 = 4.5, y = 4.5/(1 + e^−4.5); new state [2, 3].
TEST(CausalConv1d, HandCase) {
    const float w[3] = {0.5f, -1.0f, 2.0f}, x[1] = {3.0f};
    float st[2] = {1.0f, 2.0f}, y[1];
    causal_conv1d_silu(x, 1, 1, w, 3, st, y);
    EXPECT_NEAR(y[0], 4.5 / (1.0 + std::exp(-4.5)), 8 * kEps32);
    EXPECT_EQ(st[0], 2.0f);
    EXPECT_EQ(st[1], 3.0f);
}

}  // namespace
}  // namespace ember
