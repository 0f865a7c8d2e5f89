// Partial NeoX RoPE reference: the header's formula in plain loops; cos/sin and rotation in double.
#include <cmath>

#include "core/check.h"
#include "ops/rope/rope.h"

namespace ember {

void rope_ref(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos0,
              float theta, RopeStyle style, const float* freq_factors) {
    EMBER_CHECK(rot_dim > 0 && rot_dim % 2 == 0 && rot_dim <= head_dim, "bad rot_dim");
    const int64_t half = rot_dim / 2;
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t h = 0; h < n_heads; ++h) {
            float* v = x + (t * n_heads + h) * head_dim;
            for (int64_t j = 0; j < half; ++j) {
                // The float32 angle is part of the definition (it is what HF / llama.cpp compute).
                const float e = static_cast<float>(2 * j) / static_cast<float>(rot_dim);
                const float inv = 1.0f / static_cast<float>(std::pow(double(theta), double(e)));
                float ang = static_cast<float>(pos0 + t) * inv;
                if (freq_factors) ang = ang / freq_factors[j];
                const double phi = static_cast<double>(ang);
                const double c = std::cos(phi), s = std::sin(phi);
                const int64_t ia = style == RopeStyle::NEOX ? j : 2 * j, ib = style == RopeStyle::NEOX ? j + half : 2 * j + 1;
                const double a = v[ia], b = v[ib];
                v[ia] = static_cast<float>(a * c - b * s);
                v[ib] = static_cast<float>(b * c + a * s);
            }
        }
    }
}

void rope_neox_ref(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos0,
                   float theta) {
    rope_ref(x, n_tokens, n_heads, head_dim, rot_dim, pos0, theta, RopeStyle::NEOX);
}

}  // namespace ember
