// Token sampling on the CPU with the knobs llama.cpp / vLLM / OpenAI users expect: repetition, presence and
// frequency penalties, temperature, top-k, top-p, min-p, and a seeded, platform-independent RNG.
//
// Pipeline of Sampler::sample (each stage sees the previous one's output):
//   0. token mask (optional; token_mask.h): disallowed tokens get logit −inf
//   1. penalties over the last penalty_last_n tokens of history (apply_penalties):
//        HF repetition:   l ← l > 0 ? l / rp : l · rp      (once per distinct token in the window)
//        OpenAI:          l ← l − frequency · count − presence · [count > 0]
//   2. temperature ≤ 0 → greedy: argmax of the penalised logits (ties → lowest id); no randomness used.
//   3. l ← l / T
//   4. top-k: keep the k largest (ties at the boundary → lower ids first); 0 = off
//   5. softmax over the kept tokens
//   6. top-p: keep the smallest prefix in descending order whose cumulative probability ≥ top_p (≥ 1 token)
//   7. min-p: keep tokens with p ≥ min_p · p_max
//   8. renormalise and draw with xoshiro256** (u = 53 random bits · 2^-53, inverse CDF in double); exactly one
//      draw per non-greedy call. Tokens of probability 0 (logit −inf or exp underflow) are dropped.
// The candidate order for the draw is fixed by the logits alone (no library-specific order leaks in), so a
// given seed gives the same tokens on every platform; the only platform-dependent step is expf, which may
// differ in the last ulp between C libraries.
// Cost for vocab 248320: O(V) passes (max, exp, a k-heap or nth_element for top-k, a 4096-bin histogram for
// top-p); only the top-k set and top-p's boundary bin are sorted.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "ember/sampling.h"  // SamplingParams (the library API uses them too)

namespace ember {

// xoshiro256** (Blackman & Vigna), state seeded from a 64-bit seed with splitmix64. Platform-independent.
class Rng {
 public:
    explicit Rng(uint64_t seed = 0) { seed_with(seed); }
    void seed_with(uint64_t seed);
    uint64_t next();
    double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1), 53 bits
    // The generator's whole state (saved sessions: a restored Rng continues the same stream).
    std::array<uint64_t, 4> state() const { return {s_[0], s_[1], s_[2], s_[3]}; }
    void set_state(const std::array<uint64_t, 4>& s) { for (int i = 0; i < 4; ++i) s_[i] = s[i]; }

 private:
    uint64_t s_[4];
};

struct TokenProb {
    int32_t id;
    double p;
};

// x [n]: index of the maximum; ties → lowest index. NaN entries are never chosen (unless all are NaN → 0).
// Greedy (no randomness) and penalties on: the host's view of a request (the device samplers' fast paths, the
// engine's mixed rounds).
inline bool sampling_is_greedy(const SamplingParams& p) { return p.temperature <= 0.f || p.top_k == 1; }
inline bool sampling_has_penalties(const SamplingParams& p) {
    return p.penalty_last_n != 0 &&
           (p.repetition_penalty != 1.f || p.presence_penalty != 0.f || p.frequency_penalty != 0.f);
}
int32_t argmax(const float* x, int64_t n);

// Stage 1 in place. logits [vocab]; history = prompt + generated ids (each in [0, vocab)); only its last
// penalty_last_n entries count (−1 = all). counts: scratch, sized to vocab on first use, left all-zero.
void apply_penalties(float* logits, int64_t vocab, const std::vector<int32_t>& history, const SamplingParams& p,
                     std::vector<int32_t>& counts);

class Sampler {
 public:
    explicit Sampler(const SamplingParams& p);
    // logits [vocab] (not modified; NaN aborts, and with temperature > 0 so does a non-finite maximum);
    // history = prompt + generated. Returns the sampled id.
    // mask (optional, token_mask.h layout): tokens whose bit is clear are excluded before every other stage
    // (their logit becomes −inf); at least one token must be allowed.
    int32_t sample(const float* logits, int64_t vocab, const std::vector<int32_t>& history,
                   const uint32_t* mask = nullptr);
    // Re-seed the RNG (the next draws repeat those of a fresh Sampler with this seed).
    void reset(uint64_t seed);
    // Stages 1–8 without the draw: the renormalised distribution sample() draws from, in draw order.
    // Valid until the next call. Greedy gives one entry with p = 1.
    const std::vector<TokenProb>& distribution(const float* logits, int64_t vocab, const std::vector<int32_t>& history,
                                               const uint32_t* mask = nullptr);
    const SamplingParams& params() const { return p_; }
    Rng& rng() { return rng_; }

 private:
    struct Cand {
        int32_t id;
        float w;  // exp((l − l_max) / T), unnormalised
    };
    // Stages 1–7: returns the greedy id, or −1 with the survivors in cand_ (draw order) and their Σ w in total_.
    int32_t prepare(const float* logits, int64_t vocab, const std::vector<int32_t>& history, const uint32_t* mask);
    void top_p_filter(const float* L, float M, float T, double target);

    SamplingParams p_;
    Rng rng_;
    std::vector<float> logits_;  // penalised copy [vocab]
    std::vector<int32_t> counts_;
    std::vector<Cand> cand_;
    std::vector<uint16_t> bins_;
    double total_ = 0;
    std::vector<TokenProb> dist_;
};

// Reference for distribution(): the pipeline above in double with a full sort, plain and slow.
// Returned in descending probability (ties → ascending id).
std::vector<TokenProb> sampling_distribution_ref(const float* logits, int64_t vocab,
                                                 const std::vector<int32_t>& history, const SamplingParams& p,
                                                 const uint32_t* mask = nullptr);

}  // namespace ember
