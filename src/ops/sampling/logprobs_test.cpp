// token_logprobs (logprobs.h): the log-softmax and its top entries against a plain computation and a full sort.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/sampling/logprobs.h"

namespace ember {
namespace {

TEST(Logprobs, TopKMatchesAFullSort) {
    std::vector<float> l = {0.5f, 2.f, 2.f, -1.f, 3.f, 0.5f};
    auto [lp, top] = token_logprobs(l.data(), 6, 3, 4);
    double z = 0;
    for (float x : l) z += std::exp(double(x));
    EXPECT_NEAR(lp, -1.0 - std::log(z), 1e-6);
    ASSERT_EQ(top.size(), 4u);
    EXPECT_EQ(top[0].first, 4);
    EXPECT_EQ(top[1].first, 1);  // ties → lower id first
    EXPECT_EQ(top[2].first, 2);
    EXPECT_EQ(top[3].first, 0);
}

}  // namespace
}  // namespace ember
