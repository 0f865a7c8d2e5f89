// Sampling distribution reference: the header's pipeline in double with a full sort and a std::map of counts.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "ops/sampling/sampling.h"

namespace ember {

std::vector<TokenProb> sampling_distribution_ref(const float* logits, int64_t vocab,
                                                 const std::vector<int32_t>& history, const SamplingParams& p,
                                                 const uint32_t* mask) {
    std::vector<double> l(logits, logits + vocab);
    // 0. mask
    if (mask)
        for (int64_t v = 0; v < vocab; ++v)
            if (!((mask[v / 32] >> (v % 32)) & 1u)) l[size_t(v)] = -std::numeric_limits<double>::infinity();
    // 1. penalties
    const int64_t n = int64_t(history.size());
    const int64_t first = p.penalty_last_n < 0 ? 0 : std::max<int64_t>(0, n - p.penalty_last_n);
    std::map<int32_t, int> count;
    for (int64_t i = first; i < n; ++i) ++count[history[size_t(i)]];
    for (auto [t, c] : count) {
        double& x = l[size_t(t)];
        x = x > 0 ? x / p.repetition_penalty : x * p.repetition_penalty;
        x -= c * double(p.frequency_penalty) + (c > 0 ? double(p.presence_penalty) : 0.0);
    }
    // 2. greedy
    std::vector<int32_t> order(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[size_t(a)] > l[size_t(b)]; });
    if (p.temperature <= 0) return {{order[0], 1.0}};
    // 3–5. temperature, top-k, softmax
    size_t k = (p.top_k > 0 && p.top_k < vocab) ? size_t(p.top_k) : size_t(vocab);
    order.resize(k);
    std::vector<double> prob(k);
    double z = 0;
    for (size_t j = 0; j < k; ++j) z += (prob[j] = std::exp((l[size_t(order[j])] - l[size_t(order[0])]) / p.temperature));
    for (double& q : prob) q /= z;
    // 6. top-p
    size_t keep = k;
    if (p.top_p < 1) {
        double cum = 0;
        for (size_t j = 0; j < k; ++j) {
            cum += prob[j];
            if (cum >= p.top_p) {
                keep = j + 1;
                break;
            }
        }
    }
    // 7. min-p (prob is descending, so the survivors are a prefix)
    size_t keep_min_p = 0;
    while (keep_min_p < keep && prob[keep_min_p] >= double(p.min_p) * prob[0]) ++keep_min_p;
    keep = std::max<size_t>(1, keep_min_p);
    while (keep > 1 && prob[keep - 1] == 0) --keep;  // probability-0 tokens (logit −inf) are not candidates
    // 8. renormalise
    double total = 0;
    for (size_t j = 0; j < keep; ++j) total += prob[j];
    std::vector<TokenProb> out;
    for (size_t j = 0; j < keep; ++j) out.push_back({order[j], prob[j] / total});
    return out;
}

}  // namespace ember
