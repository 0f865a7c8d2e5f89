// logprobs.cpp: log-softmax of one logit row and its top entries.
#include "ops/sampling/logprobs.h"

#include <algorithm>
#include <cmath>

namespace ember {

std::pair<float, std::vector<std::pair<int32_t, float>>> token_logprobs(const float* logits, int64_t vocab, int32_t id,
                                                                        int top) {
    double m = -INFINITY;
    for (int64_t v = 0; v < vocab; ++v) m = std::max(m, double(logits[v]));
    double z = 0;
    for (int64_t v = 0; v < vocab; ++v) z += std::exp(double(logits[v]) - m);
    const double lse = m + std::log(z);
    std::vector<std::pair<int32_t, float>> best;
    const int64_t k = std::min<int64_t>(std::max(top, 0), vocab);
    if (k > 0) {
        // The k best in one pass: a heap of size k whose front is its worst entry (ordered by "better").
        auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
        std::vector<int32_t> heap;
        heap.reserve(size_t(k));
        for (int32_t v = 0; v < vocab; ++v) {
            if (int64_t(heap.size()) < k) {
                heap.push_back(v);
                std::push_heap(heap.begin(), heap.end(), better);
            } else if (better(v, heap.front())) {
                std::pop_heap(heap.begin(), heap.end(), better);
                heap.back() = v;
                std::push_heap(heap.begin(), heap.end(), better);
            }
        }
        std::sort(heap.begin(), heap.end(), better);
        for (int32_t v : heap) best.emplace_back(v, float(double(logits[v]) - lse));
    }
    return {float(double(logits[id]) - lse), best};
}

}  // namespace ember
