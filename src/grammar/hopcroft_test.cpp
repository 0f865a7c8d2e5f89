// hopcroft_classes against Moore's refinement (the definition: states are equivalent iff same label and, per
// symbol, both without a transition or both to equivalent states) on random partial DFAs, and its work bound.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "grammar/hopcroft.h"

namespace ember::grammar {
namespace {

std::vector<int32_t> moore(int32_t n, int32_t m, const std::vector<int32_t>& delta, const std::vector<int32_t>& label) {
    std::vector<int32_t> cls(label);
    for (int32_t k = 0;; ++k) {
        std::map<std::vector<int32_t>, int32_t> ids;
        std::vector<int32_t> next(static_cast<size_t>(n));
        for (int32_t s = 0; s < n; ++s) {
            std::vector<int32_t> sig = {cls[size_t(s)]};
            for (int32_t a = 0; a < m; ++a) {
                const int32_t t = delta[size_t(s) * size_t(m) + size_t(a)];
                sig.push_back(t < 0 ? -1 : cls[size_t(t)]);
            }
            next[size_t(s)] = ids.emplace(sig, int32_t(ids.size())).first->second;
        }
        const bool stable = [&] {
            for (int32_t s = 0; s < n; ++s)
                for (int32_t r = 0; r < s; ++r)
                    if ((cls[size_t(s)] == cls[size_t(r)]) != (next[size_t(s)] == next[size_t(r)])) return false;
            return true;
        }();
        cls.swap(next);
        if (stable && k > 0) return cls;
    }
}

TEST(Hopcroft, MatchesMooreOnRandomPartialDfas) {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 300; ++trial) {
        const int32_t n = 1 + int32_t(rng() % 40), m = 1 + int32_t(rng() % 6), labels = 1 + int32_t(rng() % 3);
        const int density = 1 + int(rng() % 4);  // of 4: how many transitions exist
        std::vector<int32_t> delta(static_cast<size_t>(n) * size_t(m)), label(static_cast<size_t>(n));
        // few distinct targets, so that equivalent states are common
        const int32_t span = 1 + int32_t(rng() % size_t(n));
        for (auto& t : delta) t = int(rng() % 4) < density ? int32_t(rng() % size_t(span)) : -1;
        for (auto& l : label) l = int32_t(rng() % size_t(labels)) * 7 - 3;
        const std::vector<int32_t> got = hopcroft_classes(n, m, delta, label), want = moore(n, m, delta, label);
        int32_t next_new = 0;
        for (int32_t s = 0; s < n; ++s) {
            if (got[size_t(s)] == next_new) ++next_new;
            ASSERT_LT(got[size_t(s)], next_new) << "classes not numbered by first occurrence";
            for (int32_t r = 0; r < s; ++r)
                ASSERT_EQ(got[size_t(s)] == got[size_t(r)], want[size_t(s)] == want[size_t(r)])
                    << "trial " << trial << " states " << r << ", " << s;
        }
    }
}

// A sparse automaton (a chain over 200 symbols, one transition per state): the work follows the transitions
// present, not states × symbols (the sink-state form visited all 200 × 4,001 pairs before splitting).
TEST(Hopcroft, WorkFollowsTransitions) {
    const int32_t n = 4000, m = 200;
    std::vector<int32_t> delta(size_t(n) * size_t(m), -1), label(size_t(n), 0);
    for (int32_t s = 0; s + 1 < n; ++s) delta[size_t(s) * size_t(m) + size_t(s % m)] = s + 1;
    label[size_t(n) - 1] = 1;
    int64_t work = 0;
    const std::vector<int32_t> cls = hopcroft_classes(n, m, delta, label, &work);
    int32_t k = 0;
    for (int32_t c : cls) k = std::max(k, c + 1);
    EXPECT_EQ(k, n);  // a chain: no two states equivalent
    EXPECT_LT(work, int64_t(n) * 40);
}

}  // namespace
}  // namespace ember::grammar
