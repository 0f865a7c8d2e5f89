// RoPE context-length scaling as frequency divisors and a score multiplier (spec: rope_scaling.h).
#include "ops/rope/rope_scaling.h"

#include <algorithm>
#include <cmath>

namespace ember {

Expected<float> apply_rope_scaling(const RopeScaling& s, int64_t rot_dim, int64_t head_dim, float theta,
                                   std::vector<float>& ff) {
    if (s.type == "none") return 1.f;
    EMBER_REQUIRE(s.type == "linear" || s.type == "yarn",
                  "rope scaling type '%s' is not supported (none, linear, yarn)", s.type.c_str());
    EMBER_REQUIRE(std::isfinite(s.factor) && s.factor > 0.f, "rope scaling factor %g is not positive", s.factor);
    EMBER_REQUIRE(rot_dim > 0 && rot_dim % 2 == 0, "rope scaling: rotary dims %lld", (long long)rot_dim);
    const int64_t P = rot_dim / 2;
    EMBER_REQUIRE(ff.empty() || static_cast<int64_t>(ff.size()) == P, "rope scaling: %zu frequency factors for %lld pairs",
                  ff.size(), (long long)P);
    if (ff.empty()) ff.assign(P, 1.f);
    if (s.type == "linear") {
        for (float& v : ff) v *= s.factor;
        return 1.f;
    }
    EMBER_REQUIRE(s.orig_ctx > 0, "yarn rope scaling needs rope.scaling.original_context_length");
    EMBER_REQUIRE(rot_dim == head_dim, "yarn rope scaling with partial rotary dims (%lld of %lld) is not supported",
                  (long long)rot_dim, (long long)head_dim);
    EMBER_REQUIRE(theta > 1.f, "yarn rope scaling: rope base %g", theta);
    // ggml's rope_yarn_corr_dims / rope_yarn_ramp, in float as there.
    auto corr = [&](float beta) {
        return static_cast<float>(rot_dim) * logf(static_cast<float>(s.orig_ctx) / (beta * 2.f * static_cast<float>(M_PI))) /
               (2.f * logf(theta));
    };
    const float low = std::max(0.f, floorf(corr(s.beta_fast)));
    const float high = std::min(static_cast<float>(rot_dim - 1), ceilf(corr(s.beta_slow)));
    for (int64_t j = 0; j < P; ++j) {
        const float y = (static_cast<float>(j) - low) / std::max(0.001f, high - low);
        const float mix = (1.f - std::min(1.f, std::max(0.f, y))) * s.ext_factor;
        ff[j] /= (1.f - mix) / s.factor + mix;
    }
    // llama.cpp: context attn factor get_mscale(f) / (1 + 0.1·ln f), times (1 + 0.1·ln f) inside rope_yarn.
    const float g = s.factor <= 1.f ? 1.f : 1.f + 0.1f * logf(s.factor);
    const float m = s.ext_factor != 0.f ? s.attn_factor * g : s.attn_factor;
    return m * m;
}

}  // namespace ember
