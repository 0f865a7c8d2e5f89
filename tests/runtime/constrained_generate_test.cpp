// Session::generate with a TokenConstraint (structured output plumbing, CPU): every selected token is in the
// constraint's mask (greedy and sampled), the constraint sees each token, generation stops when it is done, and
// the constrained greedy token equals the argmax over the allowed set of the unconstrained logits.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "models/model.h"
#include "ops/sampling/token_mask.h"
#include "runtime/session.h"

namespace ember {
namespace {

// Allows a fixed set of tokens; done after `stop_after` tokens.
class SetConstraint : public TokenConstraint {
public:
    SetConstraint(std::set<int32_t> allowed, int64_t vocab, int stop_after) : allowed_(std::move(allowed)), V_(vocab), stop_(stop_after) {}
    void fill_mask(uint32_t* w) override {
        for (int64_t i = 0; i < token_mask_words(V_); ++i) w[i] = 0;
        for (int32_t t : allowed_) w[t >> 5] |= 1u << (t & 31);
    }
    Status accept(int32_t t) override {
        EMBER_REQUIRE(allowed_.count(t), "token %d not allowed", t);
        seen.push_back(t);
        return Status::ok();
    }
    bool done() const override { return int(seen.size()) >= stop_; }
    std::vector<int32_t> seen;

private:
    std::set<int32_t> allowed_;
    int64_t V_;
    int stop_;
};

TEST(ConstrainedGenerate, TokensStayInsideTheMask) {
    auto m = load_model(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/qwen35/mm_tied");
    ASSERT_TRUE(m.is_ok()) << m.message();
    const int64_t V = (*m)->info().vocab_size;
    const std::vector<int32_t> prompt = {1, 5, 9, 2};
    const std::set<int32_t> allowed = {3, 17, int32_t(V - 1), 40};
    for (float T : {0.f, 1.f}) {
        SamplingParams sp;
        sp.temperature = T;
        sp.seed = 7;
        Session s(**m);
        SetConstraint c(allowed, V, 6);
        std::vector<int32_t> out;
        auto st = s.generate(prompt, 20, sp, {}, [&](int32_t id) { out.push_back(id); return true; }, &c);
        ASSERT_TRUE(st.is_ok()) << st.message();
        EXPECT_EQ(out.size(), 6u);  // stopped when the constraint was done
        EXPECT_EQ(c.seen, out);
        for (int32_t t : out) EXPECT_TRUE(allowed.count(t)) << t;
    }
    // Greedy: the first token is the argmax of the prompt's logits over the allowed set.
    Session ref(**m);
    auto logits = ref.prefill(prompt);
    ASSERT_TRUE(logits.is_ok());
    int32_t best = -1;
    for (int32_t t : allowed)
        if (best < 0 || logits.value()[size_t(t)] > logits.value()[size_t(best)]) best = t;
    Session s(**m);
    SetConstraint c(allowed, V, 1);
    std::vector<int32_t> out;
    ASSERT_TRUE(s.generate(prompt, 5, SamplingParams{}, {}, [&](int32_t id) { out.push_back(id); return true; }, &c).is_ok());
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0], best);
}

}  // namespace
}  // namespace ember
