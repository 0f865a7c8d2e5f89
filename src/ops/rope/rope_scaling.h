// RoPE context-length scaling of GGUF files ({arch}.rope.scaling.*; llama.cpp llama-model.cpp / ggml rope_yarn;
// transformers modeling_rope_utils `linear` / `yarn`), expressed in the two knobs the attention ops already have:
// per-pair frequency divisors (rope.h freq_factors: φ_j = p·inv_freq_j / ff_j) and a multiplier of the
// attention-score scale d^-½.
//   linear (factor f): every angle is divided by f                                  → ff_j ·= f
//   yarn (factor f, original context L, β_fast, β_slow, ext_factor e, attn_factor a), rot_dim R, base θ:
//     c(β) = R·ln(L / (2πβ)) / (2·ln θ);  low = max(0, ⌊c(β_fast)⌋), high = min(R − 1, ⌈c(β_slow)⌉)
//     ramp_j = 1 − clamp((j − low) / max(0.001, high − low), 0, 1);  mix_j = e·ramp_j
//     φ_j = φ_j,extrap·((1 − mix_j)/f + mix_j)                                      → ff_j ·= 1 / ((1 − mix_j)/f + mix_j)
//     cos/sin of q and k scaled by m = a·(1 + 0.1·ln f) (e ≠ 0), i.e. scores by m²  → score multiplier m²
//     (only equal to scaling the scores when every dim is rotated: partial rotary + YaRN is refused).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ember {

struct RopeScaling {
    std::string type = "none";  // "none", "linear", "yarn"
    float factor = 1.f;
    int64_t orig_ctx = 0;       // yarn: original context length (rope.scaling.original_context_length)
    float beta_fast = 32.f, beta_slow = 1.f, ext_factor = 1.f, attn_factor = 1.f;
};

// ff: empty (all 1) or [rot_dim/2] frequency divisors (e.g. a rope_freqs tensor), multiplied in place by the
// scaling's divisors (filled first when empty and the scaling is not "none"). Returns the score multiplier.
// Errors: unknown type, factor ≤ 0, yarn without an original context, yarn with rot_dim < head_dim.
Expected<float> apply_rope_scaling(const RopeScaling& s, int64_t rot_dim, int64_t head_dim, float theta,
                                   std::vector<float>& ff);

}  // namespace ember
