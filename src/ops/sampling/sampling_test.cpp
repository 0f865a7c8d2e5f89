// Tests for sampling: greedy/argmax, penalties, the filtered distribution vs the reference, allowed sets and
// empirical frequencies of top-p/min-p, seeding, RNG goldens and a timing print for vocab 248320.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "ops/sampling/sampling.h"
#include "ops/sampling/token_mask.h"

namespace ember {
namespace {

std::vector<float> rand_logits(size_t n, uint64_t seed, float sd = 3.f) {
    std::mt19937_64 g(seed);
    std::normal_distribution<float> d(0.f, sd);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

std::vector<TokenProb> by_id(std::vector<TokenProb> v) {
    std::sort(v.begin(), v.end(), [](const TokenProb& a, const TokenProb& b) { return a.id < b.id; });
    return v;
}

TEST(Sampling, RngGoldens) {
    // splitmix64 seeding + xoshiro256** (reference algorithm, first outputs computed independently in Python).
    Rng r0(0), r42(42);
    const uint64_t want0[] = {0x99ec5f36cb75f2b4ULL, 0xbf6e1f784956452aULL, 0x1a5f849d4933e6e0ULL, 0x6aa594f1262d2d2cULL};
    const uint64_t want42[] = {0x15780b2e0c2ec716ULL, 0x6104d9866d113a7eULL, 0xae17533239e499a1ULL, 0xecb8ad4703b360a1ULL};
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r0.next(), want0[i]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(r42.next(), want42[i]);
    Rng r(7);
    for (int i = 0; i < 10000; ++i) {
        const double u = r.uniform();
        ASSERT_TRUE(u >= 0.0 && u < 1.0);
    }
}

TEST(Sampling, ArgmaxTiesAndNaN) {
    const float a[] = {1.f, 3.f, 3.f, -2.f};
    EXPECT_EQ(argmax(a, 4), 1);
    const float b[] = {NAN, -5.f, NAN, -1.f, -1.f};
    EXPECT_EQ(argmax(b, 5), 3);
    const float c[] = {-INFINITY, -INFINITY};
    EXPECT_EQ(argmax(c, 2), 0);
}

TEST(Sampling, GreedyIsArgmax) {
    Sampler s(SamplingParams{});  // temperature 0
    for (uint64_t seed = 0; seed < 20; ++seed) {
        std::vector<float> l = rand_logits(1000 + seed * 37, seed);
        EXPECT_EQ(s.sample(l.data(), int64_t(l.size()), {}), argmax(l.data(), int64_t(l.size())));
    }
    std::vector<float> tie = {0.f, 5.f, 1.f, 5.f};
    EXPECT_EQ(s.sample(tie.data(), 4, {}), 1);
}

TEST(Sampling, TopK1IsGreedyAtAnyTemperature) {
    for (float T : {0.1f, 1.f, 5.f, 100.f}) {
        SamplingParams p;
        p.temperature = T;
        p.top_k = 1;
        p.seed = 3;
        Sampler s(p);
        for (uint64_t seed = 0; seed < 20; ++seed) {
            std::vector<float> l = rand_logits(5003, seed);
            EXPECT_EQ(s.sample(l.data(), 5003, {}), argmax(l.data(), 5003)) << "T=" << T;
        }
    }
}

TEST(Sampling, PenaltiesChangeTheRightLogitsByTheRightAmounts) {
    SamplingParams p;
    p.repetition_penalty = 2.f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    p.penalty_last_n = 6;
    const std::vector<float> l0 = {4.f, -4.f, 0.f, 1.f, -1.f, 3.f, 2.f, 7.f};
    // Window = last 6: {1, 1, 3, 1, 0, 5}; token 7 (first entry) and token 6 are outside.
    const std::vector<int32_t> hist = {7, 7, 1, 1, 3, 1, 0, 5};
    std::vector<float> l = l0;
    std::vector<int32_t> counts;
    apply_penalties(l.data(), 8, hist, p, counts);
    EXPECT_FLOAT_EQ(l[0], 4.f / 2 - 0.25f * 1 - 0.5f);   // positive → divided, count 1
    EXPECT_FLOAT_EQ(l[1], -4.f * 2 - 0.25f * 3 - 0.5f);  // negative → multiplied, count 3
    EXPECT_EQ(l[2], l0[2]);
    EXPECT_FLOAT_EQ(l[3], 1.f / 2 - 0.25f - 0.5f);
    EXPECT_EQ(l[4], l0[4]);
    EXPECT_FLOAT_EQ(l[5], 3.f / 2 - 0.25f - 0.5f);
    EXPECT_EQ(l[6], l0[6]);
    EXPECT_EQ(l[7], l0[7]);  // outside the window
    for (int32_t c : counts) EXPECT_EQ(c, 0);

    p.penalty_last_n = -1;  // whole history: token 7 now counts twice
    l = l0;
    apply_penalties(l.data(), 8, hist, p, counts);
    EXPECT_FLOAT_EQ(l[7], 7.f / 2 - 0.25f * 2 - 0.5f);
    p.penalty_last_n = 0;  // no window
    l = l0;
    apply_penalties(l.data(), 8, hist, p, counts);
    EXPECT_EQ(l, l0);

    // Zero logit: HF multiplies (0·rp = 0); the OpenAI terms still apply.
    SamplingParams q;
    q.repetition_penalty = 1.3f;
    q.frequency_penalty = 1.f;
    std::vector<float> z = {0.f, 1.f};
    apply_penalties(z.data(), 2, {0, 0}, q, counts);
    EXPECT_FLOAT_EQ(z[0], -2.f);
    EXPECT_EQ(z[1], 1.f);

    // Through the sampler: greedy on penalised logits. Token 7 wins unpenalised, loses when in the window.
    SamplingParams g;
    g.repetition_penalty = 4.f;
    g.penalty_last_n = 2;
    Sampler s(g);
    EXPECT_EQ(s.sample(l0.data(), 8, {0, 1}), 7);
    EXPECT_EQ(s.sample(l0.data(), 8, {0, 7}), 5);  // 7/4 = 1.75 < 3; 0 → 4/4 = 1
}

TEST(Sampling, DistributionMatchesReference) {
    struct Case { float T; int k; float top_p, min_p, rp, pres, freq; int last_n; };
    const Case cases[] = {{1.f, 0, 1.f, 0.f, 1.f, 0.f, 0.f, 64},     {0.7f, 40, 1.f, 0.f, 1.f, 0.f, 0.f, 64},
                          {1.f, 0, 0.9f, 0.f, 1.f, 0.f, 0.f, 64},    {0.8f, 0, 0.95f, 0.05f, 1.1f, 0.f, 0.f, 64},
                          {1.5f, 100, 0.8f, 0.1f, 1.f, 0.5f, 0.3f, -1}, {1.f, 20, 1.f, 0.2f, 1.f, 0.f, 0.f, 64},
                          {0.6f, 0, 0.f, 0.f, 1.f, 0.f, 0.f, 64},    {2.f, 5000, 0.5f, 0.f, 1.3f, 0.f, 0.f, 10},
                          {1.f, 0, 1.f, 1.f, 1.f, 0.f, 0.f, 64},     {0.f, 0, 0.5f, 0.f, 1.5f, 1.f, 0.f, 64}};
    uint64_t seed = 100;
    for (const Case& c : cases) {
        for (int64_t vocab : {7, 1000, 32003, 248320}) {
            SamplingParams p;
            p.temperature = c.T, p.top_k = c.k, p.top_p = c.top_p, p.min_p = c.min_p;
            p.repetition_penalty = c.rp, p.presence_penalty = c.pres, p.frequency_penalty = c.freq;
            p.penalty_last_n = c.last_n;
            std::vector<float> l = rand_logits(size_t(vocab), seed++);
            if (seed % 2)  // many exact ties: exercises the (logit, id) order at top-k / top-p boundaries
                for (float& x : l) x = std::round(x * 2.f) / 2.f;
            std::vector<int32_t> hist;
            std::mt19937 g{static_cast<uint32_t>(seed)};
            for (int i = 0; i < 100; ++i) hist.push_back(int32_t(g() % uint32_t(std::min<int64_t>(vocab, 50))));
            Sampler s(p);
            auto got = by_id(s.distribution(l.data(), vocab, hist));
            auto want = by_id(sampling_distribution_ref(l.data(), vocab, hist, p));
            ASSERT_EQ(got.size(), want.size()) << "vocab " << vocab << " T " << c.T << " k " << c.k;
            for (size_t i = 0; i < got.size(); ++i) {
                ASSERT_EQ(got[i].id, want[i].id);
                EXPECT_NEAR(got[i].p, want[i].p, 1e-6 * std::max(1.0, want[i].p * 10));
            }
        }
    }
}

// Probabilities {0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02} placed on scrambled ids of an 11-token vocab (the other
// 4 tokens have probability 0: logit −inf).
struct Crafted {
    std::vector<float> logits = std::vector<float>(11, -INFINITY);
    const int32_t ids[7] = {6, 2, 9, 0, 4, 10, 1};
    const double probs[7] = {0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02};
    Crafted() {
        for (int i = 0; i < 7; ++i) logits[size_t(ids[i])] = float(std::log(probs[i]));
    }
};

// Draws many tokens and checks (a) none outside the first `allowed` ranks, (b) chi-square of the empirical
// frequencies vs the renormalised probabilities (fixed seed, so the statistic is deterministic).
void check_allowed(const SamplingParams& p, int allowed) {
    Crafted c;
    Sampler s(p);
    const int draws = 200000;
    std::vector<int> hits(11, 0);
    for (int i = 0; i < draws; ++i) ++hits[size_t(s.sample(c.logits.data(), 11, {}))];
    double mass = 0;
    for (int r = 0; r < allowed; ++r) mass += c.probs[r];
    double chi2 = 0;
    int inside = 0;
    for (int r = 0; r < allowed; ++r) {
        const double e = draws * c.probs[r] / mass;
        const double o = hits[size_t(c.ids[r])];
        chi2 += (o - e) * (o - e) / e;
        inside += hits[size_t(c.ids[r])];
    }
    EXPECT_EQ(inside, draws) << "tokens sampled outside the allowed set";
    // df = allowed − 1 ≤ 6; P(chi2 > 40) < 1e-6 for df 6, so this only fails for a real bias.
    EXPECT_LT(chi2, 40.0) << "top_p " << p.top_p << " min_p " << p.min_p;
}

TEST(Sampling, TopPAndMinPStayInsideAllowedSet) {
    SamplingParams p;
    p.temperature = 1.f;
    p.seed = 1234;
    check_allowed(p, 7);  // nothing on: all 7 finite tokens, never the −inf ones
    p.top_p = 0.7f;       // 0.4 + 0.25 = 0.65 < 0.7 → need 3 tokens
    check_allowed(p, 3);
    p.top_p = 0.64f;  // 0.65 ≥ 0.64 → 2 tokens (0.65 itself would sit on a rounding edge)
    check_allowed(p, 2);
    p.top_p = 0.1f;  // at least one token
    check_allowed(p, 1);
    p.top_p = 1.f;
    p.min_p = 0.3f;  // p ≥ 0.12 → 3 tokens
    check_allowed(p, 3);
    p.min_p = 0.5f;  // p ≥ 0.2 → 2 tokens
    check_allowed(p, 2);
    p.min_p = 0.2f;  // p ≥ 0.08 → 4 tokens, then top-p 0.7 → 3
    p.top_p = 0.7f;
    check_allowed(p, 3);
    p.top_p = 0.95f;  // top-p 0.95 → 5 tokens (0.95), min-p 0.2 → 4
    check_allowed(p, 4);
    p.top_p = 1.f, p.min_p = 0.f, p.top_k = 4;
    check_allowed(p, 4);
}

TEST(Sampling, SeedDeterminism) {
    std::vector<float> l = rand_logits(5000, 9, 1.f);
    SamplingParams p;
    p.temperature = 1.f;
    p.top_p = 0.95f;
    auto run = [&](Sampler& s) {
        std::vector<int32_t> out;
        for (int i = 0; i < 200; ++i) out.push_back(s.sample(l.data(), 5000, out));
        return out;
    };
    p.seed = 11;
    Sampler a(p), b(p);
    const auto sa = run(a), sb = run(b);
    EXPECT_EQ(sa, sb);
    p.seed = 12;
    Sampler c(p);
    EXPECT_NE(run(c), sa);
    a.reset(11);
    EXPECT_EQ(run(a), sa);
}

TEST(Sampling, LargeVocabTiming) {
    const int64_t V = 248320;
    std::vector<float> l = rand_logits(size_t(V), 5, 2.5f);
    std::vector<int32_t> hist(200);
    for (size_t i = 0; i < hist.size(); ++i) hist[i] = int32_t((i * 7919) % size_t(V));
    struct Case { const char* name; float T; int k; float top_p, min_p, rp; };
    const Case cases[] = {{"greedy", 0.f, 0, 1.f, 0.f, 1.f},        {"T=1 full", 1.f, 0, 1.f, 0.f, 1.f},
                          {"top_k=40", 0.8f, 40, 1.f, 0.f, 1.f},     {"top_p=0.9", 0.8f, 0, 0.9f, 0.f, 1.f},
                          {"qwen k20 p0.95 rp1.1", 0.6f, 20, 0.95f, 0.f, 1.1f}, {"min_p=0.05", 1.f, 0, 1.f, 0.05f, 1.f}};
    for (const Case& c : cases) {
        SamplingParams p;
        p.temperature = c.T, p.top_k = c.k, p.top_p = c.top_p, p.min_p = c.min_p, p.repetition_penalty = c.rp;
        Sampler s(p);
        const int reps = 20;
        int32_t sink = 0;
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < reps; ++i) sink ^= s.sample(l.data(), V, hist);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
        std::printf("  sample V=%lld %-22s %7.3f ms/token (id %d)\n", (long long)V, c.name, ms, sink);
        EXPECT_LT(ms, 100.0);  // loose: catches accidental O(V log V) full sorts under sanitizers only barely
    }
}

}  // namespace
}  // namespace ember

namespace ember {
namespace {

// Token masks: masked tokens are excluded before every stage; the distribution equals the reference's with the
// same mask, and no draw (greedy or random) ever returns a masked token.
TEST(Sampling, TokenMaskExcludesBeforeEveryStage) {
    struct Case {
        float T;
        int k;
        float top_p, min_p, rp;
    };
    const Case cases[] = {{0.f, 0, 1.f, 0.f, 1.f}, {1.f, 0, 1.f, 0.f, 1.f}, {0.8f, 40, 0.9f, 0.05f, 1.3f}, {1.2f, 0, 0.5f, 0.f, 1.f}};
    uint64_t seed = 500;
    for (const Case& c : cases)
        for (int64_t vocab : {5, 1000, 248320}) {
            SamplingParams p;
            p.temperature = c.T, p.top_k = c.k, p.top_p = c.top_p, p.min_p = c.min_p, p.repetition_penalty = c.rp;
            p.seed = seed;
            std::vector<float> l = rand_logits(size_t(vocab), seed++);
            std::mt19937_64 g(seed++);
            std::vector<uint32_t> mask(size_t(token_mask_words(vocab)), 0u);
            const int64_t allowed = vocab < 10 ? 2 : 37;
            for (int64_t i = 0; i < allowed; ++i) {
                const int64_t v = int64_t(g() % uint64_t(vocab));
                mask[size_t(v / 32)] |= 1u << (v % 32);
            }
            const int32_t top = argmax(l.data(), vocab);
            mask[size_t(top / 32)] &= ~(1u << (top % 32));  // the unmasked argmax is never allowed
            if (token_mask_count(mask.data(), vocab) == 0) mask[0] |= 2u;
            std::vector<int32_t> hist = {int32_t(g() % uint64_t(vocab)), top};
            Sampler s(p);
            auto got = by_id(s.distribution(l.data(), vocab, hist, mask.data()));
            auto want = by_id(sampling_distribution_ref(l.data(), vocab, hist, p, mask.data()));
            ASSERT_EQ(got.size(), want.size()) << "vocab " << vocab << " T " << c.T;
            for (size_t i = 0; i < got.size(); ++i) {
                ASSERT_EQ(got[i].id, want[i].id);
                EXPECT_TRUE(token_allowed(mask.data(), got[i].id));
                EXPECT_NEAR(got[i].p, want[i].p, 1e-6 * std::max(1.0, want[i].p * 10));
            }
            for (int i = 0; i < 50; ++i) {
                const int32_t id = s.sample(l.data(), vocab, hist, mask.data());
                ASSERT_TRUE(token_allowed(mask.data(), id)) << id;
            }
        }
}

TEST(Sampling, ApplyTokenMaskRows) {
    const int64_t V = 70, rows = 3, ld = 75, W = token_mask_words(V) + 1;
    std::vector<float> l(size_t(rows * ld), 1.f);
    std::vector<uint32_t> m(size_t(rows * W), 0u);
    m[0] = 1u;                // row 0: token 0
    m[size_t(W) + 2] = 32u;   // row 1: token 69
    m[size_t(2 * W)] = ~0u;   // row 2: tokens 0..31
    apply_token_mask(l.data(), rows, V, ld, m.data(), W);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t v = 0; v < ld; ++v) {
            const bool keep = v >= V || (r == 0 && v == 0) || (r == 1 && v == 69) || (r == 2 && v < 32);
            EXPECT_EQ(l[size_t(r * ld + v)], keep ? 1.f : -INFINITY) << r << " " << v;
        }
}

// The word-wise count and "any" against a bit-by-bit count; bits past the vocabulary in the last word never count.
TEST(Sampling, TokenMaskCountMatchesBitByBit) {
    std::mt19937_64 g(5);
    for (int64_t V : {1, 31, 32, 33, 63, 64, 65, 1000, 248320}) {
        std::vector<uint32_t> m(size_t(token_mask_words(V)));
        for (int trial = 0; trial < 7; ++trial) {
            for (uint32_t& w : m) w = trial == 0 ? ~0u : trial == 1 ? 0u : uint32_t(g()) & (trial == 3 ? uint32_t(g()) : ~0u);
            if (trial == 4) {  // only bits past the vocabulary (none when V fills its last word)
                std::fill(m.begin(), m.end(), 0u);
                if (V % 32) m.back() = ~0u << (V % 32);
            }
            if (trial == 5 || trial == 6) {  // one token: the last one, or a random one
                std::fill(m.begin(), m.end(), 0u);
                const int64_t v = trial == 5 ? V - 1 : int64_t(g() % uint64_t(V));
                m[size_t(v / 32)] |= 1u << (v % 32);
            }
            int64_t want = 0;
            for (int64_t v = 0; v < V; ++v) want += token_allowed(m.data(), v);
            EXPECT_EQ(token_mask_count(m.data(), V), want) << V << " " << trial;
            EXPECT_EQ(token_mask_any(m.data(), V), want > 0) << V << " " << trial;
        }
    }
}

// The row map of a batched step: rows 0 and 2 take packed mask rows 1 and 0, row 1 none.
TEST(Sampling, ApplyTokenMaskRowMap) {
    const int64_t V = 40, rows = 3, ld = 41, W = token_mask_words(V);
    std::vector<float> l(size_t(rows * ld), 1.f);
    std::vector<uint32_t> m(size_t(2 * W), 0u);
    m[0] = 4u;                // packed row 0: token 2
    m[size_t(W) + 1] = 1u;    // packed row 1: token 32
    const int32_t map[3] = {1, -1, 0};
    apply_token_mask_rows(l.data(), rows, V, ld, m.data(), W, map);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t v = 0; v < ld; ++v) {
            const bool keep = v >= V || r == 1 || (r == 0 && v == 32) || (r == 2 && v == 2);
            EXPECT_EQ(l[size_t(r * ld + v)], keep ? 1.f : -INFINITY) << r << " " << v;
        }
}

}  // namespace
}  // namespace ember
