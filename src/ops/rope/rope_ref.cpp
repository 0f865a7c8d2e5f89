// Partial NeoX RoPE reference: the header's formula in plain loops; cos/sin and rotation in double.
#include <cmath>

#include "core/check.h"
#include "ops/rope/rope.h"

namespace ember {

void rope_neox_ref(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos0,
                   float theta) {
    EMBER_CHECK(rot_dim > 0 && rot_dim % 2 == 0 && rot_dim <= head_dim, "bad rot_dim");
    const int64_t half = rot_dim / 2;
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t h = 0; h < n_heads; ++h) {
            float* v = x + (t * n_heads + h) * head_dim;
            for (int64_t j = 0; j < half; ++j) {
                // The float32 angle is part of the definition (it is what HF computes).
                const float e = static_cast<float>(2 * j) / static_cast<float>(rot_dim);
                const float inv = 1.0f / static_cast<float>(std::pow(double(theta), double(e)));
                const double phi = static_cast<double>(static_cast<float>(pos0 + t) * inv);
                const double c = std::cos(phi), s = std::sin(phi);
                const double a = v[j], b = v[j + half];
                v[j] = static_cast<float>(a * c - b * s);
                v[j + half] = static_cast<float>(b * c + a * s);
            }
        }
    }
}

}  // namespace ember
