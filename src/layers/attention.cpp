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

void attention_layer(const AttentionWeights& w, const StdAttentionShape& s, KVCache& cache, int64_t pos0,
                     const float* x, int64_t n, float* out) {
    const int64_t H = s.n_heads, G = s.n_kv, d = s.head_dim;
    std::vector<float> q(n * H * d), k(n * G * d), v(n * G * d), o(n * H * d);
    linear(w.q_proj, x, n, q.data());
    linear(w.k_proj, x, n, k.data());
    linear(w.v_proj, x, n, v.data());
    add_bias(q.data(), w.q_bias, n);
    add_bias(k.data(), w.k_bias, n);
    add_bias(v.data(), w.v_bias, n);
    if (!w.q_norm.empty()) rmsnorm(q.data(), w.q_norm.data(), q.data(), n * H, d, s.eps);
    if (!w.k_norm.empty()) rmsnorm(k.data(), w.k_norm.data(), k.data(), n * G, d, s.eps);
    const float* ff = s.freq_factors.empty() ? nullptr : s.freq_factors.data();
    rope(q.data(), n, H, d, s.rot_dim, pos0, s.rope_theta, s.rope_style, ff);
    rope(k.data(), n, G, d, s.rot_dim, pos0, s.rope_theta, s.rope_style, ff);
    cache.append(k.data(), v.data(), pos0, n);
    attention_causal(q.data(), n, H, G, d, cache.k.data(), cache.v.data(), cache.capacity, pos0,
                     s.score_mul / std::sqrt(static_cast<float>(d)), o.data());
    linear(w.o_proj, o.data(), n, out);
}

}  // namespace ember
