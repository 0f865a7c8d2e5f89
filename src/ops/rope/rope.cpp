// Partial NeoX RoPE (fast CPU path): cos/sin table per token, then a threaded pass over (token, head).
#include "ops/rope/rope.h"

#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"

namespace ember {

void rope_inv_freq(int64_t rot_dim, float theta, float* inv_freq) {
    EMBER_CHECK(rot_dim > 0 && rot_dim % 2 == 0, "rot_dim %lld must be even and > 0", (long long)rot_dim);
    EMBER_CHECK(theta > 0.f, "theta must be > 0");
    for (int64_t j = 0; j < rot_dim / 2; ++j) {
        // torch: arange(0, rot, 2).float() / rot  (float32 division)
        float e = static_cast<float>(2 * j) / static_cast<float>(rot_dim);
        // torch: base ** e in float32 (Sleef powf, ~correctly rounded) — computed in double and rounded once.
        float p = static_cast<float>(std::pow(static_cast<double>(theta), static_cast<double>(e)));
        inv_freq[j] = 1.0f / p;  // torch: reciprocal in float32
    }
}

void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos0, float theta,
          RopeStyle style, const float* freq_factors) {
    EMBER_CHECK(n_tokens >= 0 && n_heads > 0 && pos0 >= 0, "bad rope shape");
    EMBER_CHECK(rot_dim > 0 && rot_dim % 2 == 0 && rot_dim <= head_dim, "rot_dim %lld, head_dim %lld",
                (long long)rot_dim, (long long)head_dim);
    if (n_tokens == 0) return;
    const int64_t half = rot_dim / 2;
    std::vector<float> inv_freq(half);
    rope_inv_freq(rot_dim, theta, inv_freq.data());

    // cs [n_tokens, 2, half]: cos then sin for each token. Built once, shared by all heads.
    std::vector<float> cs(static_cast<size_t>(n_tokens * 2 * half));
    parallel_for(n_tokens, 64, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
            const float pos = static_cast<float>(pos0 + t);
            float* c = cs.data() + t * 2 * half;
            float* s = c + half;
            for (int64_t j = 0; j < half; ++j) {
                float ang = pos * inv_freq[j];  // float32 product, as HF
                if (freq_factors) ang = ang / freq_factors[j];
                const double phi = static_cast<double>(ang);
                c[j] = static_cast<float>(std::cos(phi));
                s[j] = static_cast<float>(std::sin(phi));
            }
        }
    });

    // Rotation: two products and one add/sub in float, like torch (no FMA is generated for the baseline
    // x86-64 target this file is built for).
    const int64_t rows = n_tokens * n_heads;
    const int64_t ia = style == RopeStyle::NEOX ? 1 : 2, ib = style == RopeStyle::NEOX ? half : 1;  // a = x[ia·j]
    parallel_for(rows, 256, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const float* c = cs.data() + (r / n_heads) * 2 * half;
            const float* s = c + half;
            float* v = x + r * head_dim;
            for (int64_t j = 0; j < half; ++j) {
                float* a = v + ia * j;
                float* b = a + ib;
                const float aj = *a, bj = *b;
                *a = aj * c[j] - bj * s[j];
                *b = bj * c[j] + aj * s[j];
            }
        }
    });
}

void rope_neox(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t rot_dim, int64_t pos0,
               float theta) {
    rope(x, n_tokens, n_heads, head_dim, rot_dim, pos0, theta, RopeStyle::NEOX);
}

}  // namespace ember
