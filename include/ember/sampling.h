// ember/sampling.h: how a sequence selects its tokens (the pipeline is described in src/ops/sampling/sampling.h:
// mask → penalties → temperature → top-k → top-p → min-p → a seeded draw; temperature ≤ 0 is greedy).
#pragma once
#include <cstdint>

namespace ember {

struct SamplingParams {
    float temperature = 0.f;         // <= 0 → greedy (argmax; ties → lowest id)
    int top_k = 0;                   // 0 = off
    float top_p = 1.f;               // 1 = off
    float min_p = 0.f;               // 0 = off (keep tokens with p ≥ min_p · p_max)
    float repetition_penalty = 1.f;  // HF semantics: logit>0 → /rp, else ·rp, for tokens seen in the window
    float presence_penalty = 0.f;    // OpenAI semantics: −presence if count>0
    float frequency_penalty = 0.f;   // −frequency·count
    int penalty_last_n = 64;         // window of history used for penalties (−1 = all, 0 = none)
    uint64_t seed = 0;
};

}  // namespace ember
