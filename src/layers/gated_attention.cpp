// Gated full attention layer, written in terms of ops (qwen35.md §2.4).
#include "layers/gated_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/activation/activation.h"
#include "ops/attention/attention.h"
#include "ops/linear/linear.h"
#include "ops/norm/norm.h"
#include "ops/rope/rope.h"

namespace ember {

void KVCache::ensure(int64_t n_tokens) {
    if (n_tokens <= capacity) return;
    int64_t cap = std::max<int64_t>(n_tokens, std::max<int64_t>(256, capacity * 2));
    std::vector<float> nk(static_cast<size_t>(n_kv * cap * head_dim)), nv(nk.size());
    for (int64_t g = 0; g < n_kv && capacity > 0; ++g) {
        std::memcpy(&nk[g * cap * head_dim], &k[g * capacity * head_dim], capacity * head_dim * sizeof(float));
        std::memcpy(&nv[g * cap * head_dim], &v[g * capacity * head_dim], capacity * head_dim * sizeof(float));
    }
    k.swap(nk);
    v.swap(nv);
    capacity = cap;
}

void KVCache::append(const float* kr, const float* vr, int64_t pos0, int64_t n) {
    ensure(pos0 + n);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t g = 0; g < n_kv; ++g) {
            const int64_t dst = (g * capacity + pos0 + t) * head_dim;
            std::memcpy(&k[dst], &kr[(t * n_kv + g) * head_dim], head_dim * sizeof(float));
            std::memcpy(&v[dst], &vr[(t * n_kv + g) * head_dim], head_dim * sizeof(float));
        }
}

void gated_attention(const GatedAttentionWeights& w, const AttentionShape& s, KVCache& cache, int64_t pos0,
                     const float* x, int64_t n, float* out) {
    const int64_t H = s.n_heads, G = s.n_kv, d = s.head_dim;
    std::vector<float> qg(n * H * 2 * d), q(n * H * d), gate(n * H * d), k(n * G * d), v(n * G * d), o(n * H * d);
    linear(w.q_proj, x, n, qg.data());  // [n, H, 2d]
    linear(w.k_proj, x, n, k.data());   // [n, G, d]
    linear(w.v_proj, x, n, v.data());   // [n, G, d]
    for (int64_t t = 0; t < n; ++t)     // de-interleave: per head [query | gate]
        for (int64_t h = 0; h < H; ++h) {
            const float* src = &qg[(t * H + h) * 2 * d];
            std::memcpy(&q[(t * H + h) * d], src, d * sizeof(float));
            std::memcpy(&gate[(t * H + h) * d], src + d, d * sizeof(float));
        }
    rmsnorm(q.data(), w.q_norm.data(), q.data(), n * H, d, s.eps);
    rmsnorm(k.data(), w.k_norm.data(), k.data(), n * G, d, s.eps);
    rope_neox(q.data(), n, H, d, s.rot_dim, pos0, s.rope_theta);
    rope_neox(k.data(), n, G, d, s.rot_dim, pos0, s.rope_theta);
    cache.append(k.data(), v.data(), pos0, n);
    attention_causal(q.data(), n, H, G, d, cache.k.data(), cache.v.data(), cache.capacity, pos0,
                     1.0f / std::sqrt(static_cast<float>(d)), o.data());
    sigmoid_mul(o.data(), gate.data(), n * H * d);
    linear(w.o_proj, o.data(), n, out);
}

}  // namespace ember
