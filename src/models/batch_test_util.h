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

// Mixed steps (CausalLM::batch_step; generic: the base class's form, a prefill call per chunk and one batch_decode
// of the one-token rows): K sequences of ragged prompts (7..40 tokens) join at steps k % 3; each step every live
// sequence feeds either its next prompt chunk (1..9 tokens, random) or, once the prompt is in, its greedy token;
// the sequences in a shuffled order. The logits after each prompt's last token and after each decode token within
// `tol` of the sequence decoded alone (forward() of the whole prompt, then one token at a time), every greedy
// token equal: prefill(N) in chunks beside other sequences' decode rows ≡ prefill(N) alone, and prefill(N) +
// decode(k) ≡ the same run. Returns the worst rel_err; trace (optional): every compared logits row, in order (the
// schedule depends on the seed only, so two forms of the step can be compared bit for bit).
inline double check_mixed_equals_alone(const CausalLM& m, int64_t K, int64_t slots, int64_t steps, double tol,
                                       uint64_t seed, bool generic = false, std::vector<float>* trace = nullptr) {
    const int64_t V = m.info().vocab_size;
    std::vector<Alone> ref;
    for (int64_t k = 0; k < K; ++k)
        ref.push_back(decode_alone(m, make_prompt(V, 7 + (k * 11 + 5) % 34, seed + uint64_t(k)), steps));
    auto b = m.new_batch(slots);
    EXPECT_TRUE(b.is_ok()) << b.message();
    if (!b.is_ok()) return INFINITY;
    BatchState& B = **b;
    std::vector<int64_t> fed(static_cast<size_t>(K), 0);  // tokens fed to sequence k's slot so far
    std::mt19937_64 g(seed * 13 + 5);
    double worst = 0;
    for (int64_t step = 0;; ++step) {
        std::vector<int64_t> live;
        for (int64_t k = 0; k < K; ++k) {
            const int64_t P = int64_t(ref[size_t(k)].prompt.size());
            if (step >= k % 3 && fed[size_t(k)] < P + steps - 1) live.push_back(k);
        }
        if (live.empty()) break;
        std::shuffle(live.begin(), live.end(), g);
        std::vector<int32_t> rs, toks;
        std::vector<int64_t> lens;
        for (int64_t k : live) {
            const Alone& a = ref[size_t(k)];
            const int64_t P = int64_t(a.prompt.size()), at = fed[size_t(k)];
            rs.push_back(int32_t((k * 5 + 2) % slots));
            if (at < P) {
                const int64_t n = std::min<int64_t>(P - at, 1 + int64_t(g() % 9));
                lens.push_back(n);
                toks.insert(toks.end(), a.prompt.begin() + at, a.prompt.begin() + at + n);
            } else {
                lens.push_back(1);
                toks.push_back(a.tokens[size_t(at - P)]);
            }
        }
        const int64_t S = int64_t(live.size());
        std::vector<float> out(size_t(S * V));
        Status s = generic ? m.CausalLM::batch_step(B, rs.data(), lens.data(), toks.data(), S, out.data())
                           : m.batch_step(B, rs.data(), lens.data(), toks.data(), S, out.data());
        EXPECT_TRUE(s.is_ok()) << s.message();
        if (!s.is_ok()) return INFINITY;
        for (int64_t i = 0; i < S; ++i) {
            const int64_t k = live[size_t(i)];
            const Alone& a = ref[size_t(k)];
            const int64_t P = int64_t(a.prompt.size());
            fed[size_t(k)] += lens[size_t(i)];
            EXPECT_EQ(B.pos[size_t(rs[size_t(i)])], fed[size_t(k)]);
            if (fed[size_t(k)] < P) continue;  // a chunk inside the prompt: its logits are not compared
            const int64_t j = fed[size_t(k)] - P;  // logits that chose tokens[j]
            if (trace) trace->insert(trace->end(), out.begin() + i * V, out.begin() + (i + 1) * V);
            const double e = rel_err(&out[size_t(i * V)], a.logits[size_t(j)]);
            worst = std::max(worst, e);
            EXPECT_LE(e, tol) << "sequence " << k << " token " << j << " among " << S << " sequences";
            EXPECT_EQ(argmax(&out[size_t(i * V)], V), a.tokens[size_t(j)]) << "sequence " << k << " token " << j;
        }
    }
    return worst;
}

// batch_step's ids and want: on two pools fed alike, a step with ids and want = {0, 1, 0} (logits poisoned with NaN)
// writes only row 1's logits, equal to the twin step's that returns every row, and ids equal the argmax of the
// twin's rows (a decode row beside two prompt chunks).
inline void check_mixed_ids_want(const CausalLM& m) {
    const int64_t V = m.info().vocab_size;
    auto b1 = m.new_batch(3), b2 = m.new_batch(3);
    ASSERT_TRUE(b1.is_ok() && b2.is_ok());
    const std::vector<int32_t> p = make_prompt(V, 16, 31);  // 5 prefilled, then 1 + 7 + 3 in the step
    for (BatchState* B : {b1->get(), b2->get()}) ASSERT_TRUE(m.batch_prefill(*B, 0, p.data(), 5, nullptr).is_ok());
    const int32_t slots[3] = {0, 1, 2};
    const int64_t lens[3] = {1, 7, 3};
    const uint8_t want[3] = {0, 1, 0};
    std::vector<float> got(size_t(3 * V), NAN), all(size_t(3 * V));
    int32_t ids[3] = {-1, -1, -1};
    ASSERT_TRUE(m.batch_step(**b1, slots, lens, p.data() + 5, 3, got.data(), ids, want).is_ok());
    ASSERT_TRUE(m.batch_step(**b2, slots, lens, p.data() + 5, 3, all.data()).is_ok());
    for (int64_t i = 0; i < 3; ++i) {
        EXPECT_EQ(ids[i], argmax(&all[size_t(i * V)], V)) << i;
        for (int64_t v = 0; v < V; ++v) {
            const float g = got[size_t(i * V + v)];
            if (want[i]) ASSERT_EQ(g, all[size_t(i * V + v)]) << i << " " << v;
            else ASSERT_TRUE(std::isnan(g)) << "row " << i << " written without being asked for";
        }
    }
    EXPECT_EQ((*b1)->pos[0], 6);
    EXPECT_EQ((*b1)->pos[1], 7);
    EXPECT_EQ((*b1)->pos[2], 3);
}

// Bad mixed steps are refused with a clear error before anything runs: the pool is as it was.
inline void check_mixed_errors(const CausalLM& m) {
    const int64_t V = m.info().vocab_size, ctx = m.info().max_context;
    auto b = m.new_batch(3);
    ASSERT_TRUE(b.is_ok()) << b.message();
    BatchState& B = **b;
    const std::vector<int32_t> p = make_prompt(V, 6, 21);
    ASSERT_TRUE(m.batch_prefill(B, 1, p.data(), 3, nullptr).is_ok());
    std::vector<float> out(static_cast<size_t>(3 * V));
    auto step = [&](std::vector<int32_t> slots, std::vector<int64_t> lens, std::vector<int32_t> toks) {
        return m.batch_step(B, slots.data(), lens.data(), toks.data(), int64_t(slots.size()), out.data());
    };
    const int32_t t = p[3];
    for (auto [what, st] : std::vector<std::pair<const char*, Status>>{
             {"slot twice", step({1, 1}, {1, 2}, {t, t, t})},
             {"slot outside the pool", step({0, 3}, {2, 1}, {t, t, t})},
             {"negative slot", step({-1}, {1}, {t})},
             {"no tokens for a sequence", step({0, 1}, {0, 1}, {t})},
             {"token id out of range", step({0, 1}, {2, 1}, {t, int32_t(V), t})},
             {"negative token id", step({1, 0}, {1, 2}, {t, t, -1})},
             {"beyond the context", step({0, 1}, {1, ctx - 2}, std::vector<int32_t>(size_t(ctx - 1), t))},
             {"no sequences", step({}, {}, {})}}) {
        EXPECT_FALSE(st.is_ok()) << what;
        EXPECT_FALSE(st.message().empty()) << what;
    }
    EXPECT_EQ(B.pos[0], 0);
    EXPECT_EQ(B.pos[1], 3);
    EXPECT_EQ(B.pos[2], 0);
    // The pool is untouched: slot 1 continues as the prompt fed whole would.
    const Alone a = decode_alone(m, p, 1);
    ASSERT_TRUE(step({2, 1}, {2, 3}, {p[0], p[1], p[3], p[4], p[5]}).is_ok());
    EXPECT_EQ(argmax(&out[size_t(V)], V), a.tokens[0]);
    EXPECT_EQ(B.pos[1], 6);
    EXPECT_EQ(B.pos[2], 2);
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
