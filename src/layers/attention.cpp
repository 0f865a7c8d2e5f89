// Standard causal self-attention layer, written in terms of ops.
#include "layers/attention.h"

#include <cmath>

#include "ops/attention/attention.h"
#include "ops/linear/linear.h"
#include "ops/norm/norm.h"

namespace ember {

namespace {
void add_bias(float* y, const std::vector<float>& b, int64_t n) {
    if (b.empty()) return;
    const int64_t m = static_cast<int64_t>(b.size());
    for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < m; ++i) y[t * m + i] += b[i];
}
}  // namespace

void attention_in(const AttentionWeights& w, const StdAttentionShape& s, const float* x, int64_t n, AttentionRows& p) {
    const int64_t H = s.n_heads, G = s.n_kv, d = s.head_dim;
    p.q.resize(n * H * d), p.k.resize(n * G * d), p.v.resize(n * G * d);
    linear(w.q_proj, x, n, p.q.data());
    linear(w.k_proj, x, n, p.k.data());
    linear(w.v_proj, x, n, p.v.data());
    add_bias(p.q.data(), w.q_bias, n);
    add_bias(p.k.data(), w.k_bias, n);
    add_bias(p.v.data(), w.v_bias, n);
}

void attention_core(const AttentionWeights& w, const StdAttentionShape& s, KVCache& cache, int64_t pos0,
                    const AttentionRows& p, int64_t r0, int64_t m, float* o) {
    const int64_t H = s.n_heads, G = s.n_kv, d = s.head_dim;
    std::vector<float> q(p.q.begin() + r0 * H * d, p.q.begin() + (r0 + m) * H * d),
        k(p.k.begin() + r0 * G * d, p.k.begin() + (r0 + m) * G * d);
    if (!w.q_norm.empty()) rmsnorm(q.data(), w.q_norm.data(), q.data(), m * H, d, s.eps);
    if (!w.k_norm.empty()) rmsnorm(k.data(), w.k_norm.data(), k.data(), m * G, d, s.eps);
    const float* ff = s.freq_factors.empty() ? nullptr : s.freq_factors.data();
    rope(q.data(), m, H, d, s.rot_dim, pos0, s.rope_theta, s.rope_style, ff);
    rope(k.data(), m, G, d, s.rot_dim, pos0, s.rope_theta, s.rope_style, ff);
    cache.append(k.data(), &p.v[r0 * G * d], pos0, m);
    attention_causal(q.data(), m, H, G, d, cache.k.data(), cache.v.data(), cache.capacity, pos0,
                     s.score_mul / std::sqrt(static_cast<float>(d)), o + r0 * H * d);
}

}  // namespace ember
