// models/batch_test_util.h: the batched-engine checks shared by the CPU tests (tests/runtime/batch_test.cpp) and
// the GPU tests (backend/cuda/cuda_batch_cuda_test.cpp). The oracle of a batched step is the same model run one
// sequence at a time (forward() on its own state): every row's logits must match it, and greedy tokens must be
// equal, whatever else is in the batch, in whatever order, joining at whatever step.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "models/model.h"
#include "ops/sampling/sampling.h"

namespace ember::batchtest {

// A sequence decoded alone: the prompt, then `steps` greedy tokens; logits of every step (the prompt's last
// token's logits first).
struct Alone {
    std::vector<int32_t> prompt, tokens;
    std::vector<std::vector<float>> logits;  // [steps][vocab]: logits that chose tokens[i]
};

inline std::vector<int32_t> make_prompt(int64_t vocab, int64_t len, uint64_t seed) {
    std::mt19937_64 g(seed);
    std::vector<int32_t> p(static_cast<size_t>(len));
    for (auto& t : p) t = int32_t(g() % uint64_t(vocab));
    return p;
}

inline Alone decode_alone(const CausalLM& m, std::vector<int32_t> prompt, int64_t steps) {
    const int64_t V = m.info().vocab_size;
    Alone a;
    a.prompt = prompt;
    auto st = m.new_state();
    std::vector<float> lg(static_cast<size_t>(V));
    Status s = m.forward(*st, prompt.data(), int64_t(prompt.size()), lg.data(), false);
    EXPECT_TRUE(s.is_ok()) << s.message();
    for (int64_t i = 0; i < steps; ++i) {
        const int32_t t = argmax(lg.data(), V);
        a.tokens.push_back(t);
        a.logits.push_back(lg);
        if (i + 1 < steps) {
            s = m.forward(*st, &t, 1, lg.data(), false);
            EXPECT_TRUE(s.is_ok()) << s.message();
        }
    }
    return a;
}

// max |got − want| / max(max |want|, 1): the logits' error relative to their scale.
inline double rel_err(const float* got, const std::vector<float>& want) {
    double e = 0, w = 1;
    for (size_t i = 0; i < want.size(); ++i) {
        const double d = std::fabs(double(got[i]) - want[i]);
        e = std::isnan(d) ? INFINITY : std::max(e, d);
        w = std::max(w, std::fabs(double(want[i])));
    }
    return e / w;
}

// K sequences of ragged prompt lengths in a pool of `slots` (slot of sequence k scattered over the pool);
// sequence k joins after `k % 3` steps; every step runs the live rows in a shuffled order, alternating
// batch_decode (logits) and batch_decode_greedy (ids) — or batch_decode only (logits_only). Every row's logits
// within `tol` (rel_err) of the sequence decoded alone and every greedy token equal. Returns the worst rel_err.
inline double check_batch_equals_alone(const CausalLM& m, int64_t K, int64_t slots, int64_t steps, double tol,
                                       uint64_t seed, bool logits_only = false) {
    const int64_t V = m.info().vocab_size;
    std::vector<Alone> ref;
    for (int64_t k = 0; k < K; ++k)
        ref.push_back(decode_alone(m, make_prompt(V, 2 + (k * 7 + 3) % 19, seed + uint64_t(k)), steps));
    auto b = m.new_batch(slots);
    EXPECT_TRUE(b.is_ok()) << b.message();
    if (!b.is_ok()) return INFINITY;
    BatchState& B = **b;
    std::vector<int32_t> slot_of(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) slot_of[size_t(k)] = int32_t((k * 5 + 2) % slots);
    {  // distinct slots (5 and slots coprime in the callers; checked here)
        std::vector<int32_t> s = slot_of;
        std::sort(s.begin(), s.end());
        EXPECT_TRUE(std::adjacent_find(s.begin(), s.end()) == s.end()) << "test setup: slots collide";
    }
    std::vector<int64_t> done(static_cast<size_t>(K), -1);  // tokens of sequence k checked so far (−1: not joined)
    std::vector<float> lg(static_cast<size_t>(V));
    std::mt19937_64 g(seed * 7 + 1);
    double worst = 0;
    for (int64_t step = 0; step < steps + 3; ++step) {
        for (int64_t k = 0; k < K; ++k) {
            if (done[size_t(k)] >= 0 || step < k % 3) continue;
            const Alone& a = ref[size_t(k)];
            Status s = m.batch_prefill(B, slot_of[size_t(k)], a.prompt.data(), int64_t(a.prompt.size()), lg.data());
            EXPECT_TRUE(s.is_ok()) << s.message();
            worst = std::max(worst, rel_err(lg.data(), a.logits[0]));
            EXPECT_EQ(argmax(lg.data(), V), a.tokens[0]) << "prefill of sequence " << k;
            done[size_t(k)] = 1;
        }
        std::vector<int64_t> live;
        for (int64_t k = 0; k < K; ++k)
            if (done[size_t(k)] >= 1 && done[size_t(k)] < steps) live.push_back(k);
        if (live.empty()) continue;
        std::shuffle(live.begin(), live.end(), g);
        std::vector<int32_t> rs, toks, ids(live.size());
        for (int64_t k : live) {
            rs.push_back(slot_of[size_t(k)]);
            toks.push_back(ref[size_t(k)].tokens[size_t(done[size_t(k)] - 1)]);
        }
        const int64_t R = int64_t(live.size());
        if (step % 2 == 0 || logits_only) {
            std::vector<float> out(size_t(R * V));
            Status s = m.batch_decode(B, rs.data(), toks.data(), R, out.data());
            EXPECT_TRUE(s.is_ok()) << s.message();
            for (int64_t r = 0; r < R; ++r) {
                const Alone& a = ref[size_t(live[size_t(r)])];
                const int64_t i = done[size_t(live[size_t(r)])];
                const double e = rel_err(&out[size_t(r * V)], a.logits[size_t(i)]);
                worst = std::max(worst, e);
                EXPECT_LE(e, tol) << "sequence " << live[size_t(r)] << " step " << i << " among " << R << " rows";
                ids[size_t(r)] = argmax(&out[size_t(r * V)], V);
            }
        } else {
            Status s = m.batch_decode_greedy(B, rs.data(), toks.data(), R, ids.data());
            EXPECT_TRUE(s.is_ok()) << s.message();
        }
        for (int64_t r = 0; r < R; ++r) {
            const int64_t k = live[size_t(r)], i = done[size_t(k)];
            EXPECT_EQ(ids[size_t(r)], ref[size_t(k)].tokens[size_t(i)]) << "sequence " << k << " step " << i;
            EXPECT_EQ(B.pos[size_t(slot_of[size_t(k)])], int64_t(ref[size_t(k)].prompt.size()) + i);
            done[size_t(k)] = i + 1;
        }
    }
    return worst;
}

// Bad steps are refused with a clear error and leave the pool as it was: the next valid step still matches
// the sequence decoded alone. Then a slot is reset and reused for another prompt.
inline void check_errors_and_reuse(const CausalLM& m, double tol) {
    const int64_t V = m.info().vocab_size;
    const Alone a = decode_alone(m, make_prompt(V, 5, 11), 4), c = decode_alone(m, make_prompt(V, 9, 12), 3);
    auto b = m.new_batch(3);
    ASSERT_TRUE(b.is_ok()) << b.message();
    BatchState& B = **b;
    std::vector<float> lg(static_cast<size_t>(V));
    ASSERT_TRUE(m.batch_prefill(B, 1, a.prompt.data(), int64_t(a.prompt.size()), lg.data()).is_ok());
    int32_t id = -1;
    const int32_t t0 = a.tokens[0], bad = int32_t(V);
    const int32_t two[2] = {1, 1}, toks2[2] = {t0, t0}, out_of_pool = 3, neg = -1, one = 1;
    EXPECT_FALSE(m.batch_decode_greedy(B, two, toks2, 2, &id).is_ok()) << "the same slot twice";
    EXPECT_FALSE(m.batch_decode_greedy(B, &out_of_pool, &t0, 1, &id).is_ok()) << "slot outside the pool";
    EXPECT_FALSE(m.batch_decode_greedy(B, &neg, &t0, 1, &id).is_ok()) << "negative slot";
    EXPECT_FALSE(m.batch_decode_greedy(B, &one, &bad, 1, &id).is_ok()) << "token id out of range";
    EXPECT_FALSE(m.batch_decode_greedy(B, &one, &t0, 0, &id).is_ok()) << "no rows";
    EXPECT_FALSE(m.batch_prefill(B, 3, a.prompt.data(), 1, nullptr).is_ok()) << "prefill outside the pool";
    EXPECT_FALSE(m.new_batch(0).is_ok());
    EXPECT_EQ(B.pos[1], int64_t(a.prompt.size()));
    std::vector<float> out(static_cast<size_t>(V));
    for (int i = 1; i < 4; ++i) {
        const int32_t t = a.tokens[size_t(i - 1)];
        ASSERT_TRUE(m.batch_decode(B, &one, &t, 1, out.data()).is_ok());
        EXPECT_LE(rel_err(out.data(), a.logits[size_t(i)]), tol);
        EXPECT_EQ(argmax(out.data(), V), a.tokens[size_t(i)]);
    }
    ASSERT_TRUE(m.batch_reset(B, 1).is_ok());
    EXPECT_EQ(B.pos[1], 0);
    ASSERT_TRUE(m.batch_prefill(B, 1, c.prompt.data(), int64_t(c.prompt.size()), lg.data()).is_ok());
    EXPECT_LE(rel_err(lg.data(), c.logits[0]), tol);
    for (int i = 1; i < 3; ++i) {
        const int32_t t = c.tokens[size_t(i - 1)];
        ASSERT_TRUE(m.batch_decode(B, &one, &t, 1, out.data()).is_ok());
        EXPECT_LE(rel_err(out.data(), c.logits[size_t(i)]), tol) << "reused slot, step " << i;
    }
}

}  // namespace ember::batchtest
