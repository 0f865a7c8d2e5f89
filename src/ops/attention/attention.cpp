// Causal GQA attention (fast CPU path): threads over (token, kv head, key block); the query heads that share a
// kv head are handled together so each K/V row is read once per group; key blocks merged like online softmax.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/attention/attention.h"

namespace ember {
namespace {

constexpr int64_t kMinKeyBlock = 256;  // split keys only into blocks at least this long

// Eight independent partial sums so the compiler can vectorize without reassociating a single chain.
inline float dot(const float* a, const float* b, int64_t d) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t c = 0;
    for (; c + 8 <= d; c += 8)
        for (int k = 0; k < 8; ++k) acc[k] += a[c + k] * b[c + k];
    float tail = 0;
    for (; c < d; ++c) tail += a[c] * b[c];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

// One query token, the `group` query heads of one kv head, keys [t0, t1) (t1 > t0).
// qg [group, d]; Kg, Vg [capacity, d] of this kv head; s scratch [group, t1 − t0];
// acc [group] rows of d at acc + r·acc_stride: Σ_t exp(s_t − m) V_t (unnormalised); m, l [group]: max, Σ exp.
void attend_block(const float* qg, int64_t group, int64_t d, const float* Kg, const float* Vg, int64_t t0,
                  int64_t t1, float scale, float* s, float* acc, int64_t acc_stride, float* m, double* l) {
    const int64_t len = t1 - t0;
    for (int64_t r = 0; r < group; ++r) m[r] = -INFINITY;
    for (int64_t t = t0; t < t1; ++t) {
        const float* k = Kg + t * d;
        for (int64_t r = 0; r < group; ++r) {
            const float v = dot(qg + r * d, k, d) * scale;
            s[r * len + (t - t0)] = v;
            m[r] = std::max(m[r], v);
        }
    }
    for (int64_t r = 0; r < group; ++r) {
        float* sr = s + r * len;
        double z = 0;
        for (int64_t j = 0; j < len; ++j) z += (sr[j] = std::exp(sr[j] - m[r]));
        l[r] = z;
        std::fill(acc + r * acc_stride, acc + r * acc_stride + d, 0.f);
    }
    for (int64_t t = t0; t < t1; ++t) {
        const float* v = Vg + t * d;
        for (int64_t r = 0; r < group; ++r) {
            const float p = s[r * len + (t - t0)];
            float* a = acc + r * acc_stride;
            for (int64_t c = 0; c < d; ++c) a[c] += p * v[c];
        }
    }
}

}  // namespace

void attention_causal(const float* q, int64_t n, int64_t n_heads, int64_t n_kv, int64_t d, const float* K,
                      const float* V, int64_t capacity, int64_t pos0, float scale, float* out) {
    EMBER_CHECK(n >= 0 && d > 0 && n_kv > 0 && n_heads % n_kv == 0, "n_heads %lld, n_kv %lld", (long long)n_heads,
                (long long)n_kv);
    EMBER_CHECK(pos0 >= 0 && pos0 + n <= capacity, "pos0 %lld + n %lld > capacity %lld", (long long)pos0,
                (long long)n, (long long)capacity);
    if (n == 0) return;
    const int64_t group = n_heads / n_kv;
    const int64_t n_ctx = pos0 + n;  // keys visible to the last token

    // Split keys into blocks only when (token, kv head) items alone cannot keep the threads busy (decode).
    const int64_t items = n * n_kv, want = 4 * int64_t(num_threads());
    int64_t n_blocks = 1;
    if (items < want) n_blocks = std::min((want + items - 1) / items, std::max<int64_t>(1, n_ctx / kMinKeyBlock));
    const int64_t block = (n_ctx + n_blocks - 1) / n_blocks;
    n_blocks = (n_ctx + block - 1) / block;

    // Partials [n, n_heads, n_blocks]: m, l and acc [.., d]. With one block, acc is `out` itself.
    const bool split = n_blocks > 1;
    std::vector<float> part_m(size_t(n * n_heads * n_blocks));
    std::vector<double> part_l(part_m.size());
    std::vector<float> part_acc(split ? part_m.size() * size_t(d) : 0);

    parallel_for(items * n_blocks, 1, [&](int64_t w0, int64_t w1) {
        std::vector<float> s(static_cast<size_t>(group * block)), m(static_cast<size_t>(group));
        std::vector<double> l(static_cast<size_t>(group));
        for (int64_t w = w0; w < w1; ++w) {
            // Tokens in zigzag order (0, n−1, 1, n−2, …): a token's cost grows with its position, and
            // parallel_for hands out contiguous ranges, so this keeps the chunks' costs equal.
            const int64_t b = w % n_blocks, g = (w / n_blocks) % n_kv, j = w / (n_blocks * n_kv);
            const int64_t i = (j % 2 == 0) ? j / 2 : n - 1 - j / 2;
            const int64_t t0 = b * block, t1 = std::min((b + 1) * block, pos0 + i + 1);  // causal
            const int64_t h0 = g * group;
            const size_t pi = size_t((i * n_heads + h0) * n_blocks + b);  // partial index of head h0
            if (t0 >= t1) {  // block entirely in this token's future
                for (int64_t r = 0; r < group; ++r) part_l[pi + r * n_blocks] = 0;
                continue;
            }
            const float* qg = q + (i * n_heads + h0) * d;
            float* acc = split ? part_acc.data() + pi * d : out + (i * n_heads + h0) * d;
            const int64_t acc_stride = split ? n_blocks * d : d;
            attend_block(qg, group, d, K + g * capacity * d, V + g * capacity * d, t0, t1, scale, s.data(), acc,
                         acc_stride, m.data(), l.data());
            for (int64_t r = 0; r < group; ++r) {
                part_m[pi + r * n_blocks] = m[r];
                part_l[pi + r * n_blocks] = l[r];
            }
        }
    });

    if (!split) {
        parallel_for(n * n_heads, 16, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) {
                const float inv = float(1.0 / part_l[size_t(r)]);
                float* o = out + r * d;
                for (int64_t c = 0; c < d; ++c) o[c] *= inv;
            }
        });
        return;
    }
    // Merge blocks: out = Σ_b e^(m_b − M) acc_b / Σ_b e^(m_b − M) l_b, M = max over non-empty blocks.
    parallel_for(n * n_heads, 1, [&](int64_t r0, int64_t r1) {
        std::vector<double> o(static_cast<size_t>(d));
        for (int64_t r = r0; r < r1; ++r) {
            const size_t base = size_t(r * n_blocks);
            float M = -INFINITY;
            for (int64_t b = 0; b < n_blocks; ++b)
                if (part_l[base + b] > 0) M = std::max(M, part_m[base + b]);
            double L = 0;
            std::fill(o.begin(), o.end(), 0.0);
            for (int64_t b = 0; b < n_blocks; ++b) {
                if (part_l[base + b] <= 0) continue;
                const double f = std::exp(double(part_m[base + b]) - double(M));
                L += f * part_l[base + b];
                const float* a = part_acc.data() + (base + b) * d;
                for (int64_t c = 0; c < d; ++c) o[c] += f * double(a[c]);
            }
            float* dst = out + r * d;
            for (int64_t c = 0; c < d; ++c) dst[c] = float(o[c] / L);
        }
    });
}

}  // namespace ember
