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

void gated_attention_in(const GatedAttentionWeights& w, const AttentionShape& s, const float* x, int64_t n,
                        GatedAttentionRows& p) {
    const int64_t H = s.n_heads, G = s.n_kv, d = s.head_dim;
    p.qg.resize(n * H * 2 * d), p.k.resize(n * G * d), p.v.resize(n * G * d);
    linear(w.q_proj, x, n, p.qg.data());  // [n, H, 2d]
    linear(w.k_proj, x, n, p.k.data());   // [n, G, d]
    linear(w.v_proj, x, n, p.v.data());   // [n, G, d]
}

void gated_attention_core(const GatedAttentionWeights& w, const AttentionShape& s, KVCache& cache, int64_t pos0,
                          const GatedAttentionRows& p, int64_t r0, int64_t m, float* o) {
    const int64_t H = s.n_heads, G = s.n_kv, d = s.head_dim;
    std::vector<float> q(m * H * d), gate(m * H * d), k(p.k.begin() + r0 * G * d, p.k.begin() + (r0 + m) * G * d);
    for (int64_t t = 0; t < m; ++t)  // de-interleave: per head [query | gate]
        for (int64_t h = 0; h < H; ++h) {
            const float* src = &p.qg[((r0 + t) * H + h) * 2 * d];
            std::memcpy(&q[(t * H + h) * d], src, d * sizeof(float));
            std::memcpy(&gate[(t * H + h) * d], src + d, d * sizeof(float));
        }
    rmsnorm(q.data(), w.q_norm.data(), q.data(), m * H, d, s.eps);
    rmsnorm(k.data(), w.k_norm.data(), k.data(), m * G, d, s.eps);
    rope_neox(q.data(), m, H, d, s.rot_dim, pos0, s.rope_theta);
    rope_neox(k.data(), m, G, d, s.rot_dim, pos0, s.rope_theta);
    cache.append(k.data(), &p.v[r0 * G * d], pos0, m);
    float* out = o + r0 * H * d;
    attention_causal(q.data(), m, H, G, d, cache.k.data(), cache.v.data(), cache.capacity, pos0,
                     1.0f / std::sqrt(static_cast<float>(d)), out);
    sigmoid_mul(out, gate.data(), m * H * d);
}

}  // namespace ember
