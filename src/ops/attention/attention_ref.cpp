// Causal GQA attention reference: plain loops, fp64 scores, softmax and accumulation.
#include <cmath>
#include <vector>

#include "core/check.h"
#include "ops/attention/attention.h"

namespace ember {

void attention_causal_ref(const float* q, int64_t n, int64_t n_heads, int64_t n_kv, int64_t d, const float* K,
                          const float* V, int64_t capacity, int64_t pos0, float scale, float* out) {
    EMBER_CHECK(n_kv > 0 && n_heads % n_kv == 0 && pos0 >= 0 && pos0 + n <= capacity, "bad attention shape");
    const int64_t group = n_heads / n_kv;
    std::vector<double> s, acc(static_cast<size_t>(d));
    for (int64_t i = 0; i < n; ++i) {
        const int64_t n_keys = pos0 + i + 1;
        s.assign(size_t(n_keys), 0.0);
        for (int64_t h = 0; h < n_heads; ++h) {
            const int64_t g = h / group;
            const float* qi = q + (i * n_heads + h) * d;
            double m = -INFINITY;
            for (int64_t t = 0; t < n_keys; ++t) {
                const float* k = K + (g * capacity + t) * d;
                double dot = 0;
                for (int64_t c = 0; c < d; ++c) dot += double(qi[c]) * double(k[c]);
                s[t] = dot * double(scale);
                m = std::max(m, s[t]);
            }
            double z = 0;
            for (int64_t t = 0; t < n_keys; ++t) z += (s[t] = std::exp(s[t] - m));
            for (auto& a : acc) a = 0;
            for (int64_t t = 0; t < n_keys; ++t) {
                const float* v = V + (g * capacity + t) * d;
                for (int64_t c = 0; c < d; ++c) acc[c] += s[t] * double(v[c]);
            }
            float* o = out + (i * n_heads + h) * d;
            for (int64_t c = 0; c < d; ++c) o[c] = float(acc[c] / z);
        }
    }
}

}  // namespace ember
