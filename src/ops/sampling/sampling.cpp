// Token sampling (fast CPU path): penalties on a copy, O(V) selection, sort only the surviving candidates.
#include "ops/sampling/sampling.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "ops/sampling/token_mask.h"

namespace ember {

namespace {
uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

bool penalties_active(const SamplingParams& p) {
    return p.penalty_last_n != 0 &&
           (p.repetition_penalty != 1.f || p.presence_penalty != 0.f || p.frequency_penalty != 0.f);
}
}  // namespace

void Rng::seed_with(uint64_t seed) {
    for (auto& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

int32_t argmax(const float* x, int64_t n) {
    EMBER_CHECK(n > 0, "argmax of an empty array");
    int64_t best = 0;
    while (best < n - 1 && std::isnan(x[best])) ++best;
    for (int64_t i = best + 1; i < n; ++i)
        if (x[i] > x[best]) best = i;  // strict: ties keep the lower index; NaN never compares greater
    return static_cast<int32_t>(best);
}

void apply_penalties(float* logits, int64_t vocab, const std::vector<int32_t>& history, const SamplingParams& p,
                     std::vector<int32_t>& counts) {
    if (!penalties_active(p) || history.empty()) return;
    const size_t n = history.size();
    const size_t first = (p.penalty_last_n < 0 || size_t(p.penalty_last_n) >= n) ? 0 : n - size_t(p.penalty_last_n);
    if (counts.size() != size_t(vocab)) counts.assign(size_t(vocab), 0);
    std::vector<int32_t> distinct;  // distinct ids of the window, in first-seen order
    for (size_t i = first; i < n; ++i) {
        const int32_t t = history[i];
        EMBER_CHECK(t >= 0 && t < vocab, "history token %d outside vocab %lld", t, (long long)vocab);
        if (counts[size_t(t)]++ == 0) distinct.push_back(t);
    }
    for (int32_t t : distinct) {
        float& l = logits[t];
        const int32_t c = counts[size_t(t)];
        l = l > 0.f ? l / p.repetition_penalty : l * p.repetition_penalty;
        l -= float(c) * p.frequency_penalty + p.presence_penalty;
        counts[size_t(t)] = 0;
    }
}

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}

void Sampler::reset(uint64_t seed) {
    p_.seed = seed;
    rng_.seed_with(seed);
}

int32_t Sampler::prepare(const float* logits, int64_t vocab, const std::vector<int32_t>& history, const uint32_t* mask) {
    EMBER_CHECK(vocab > 0 && vocab <= INT32_MAX, "vocab %lld", (long long)vocab);
    const float* L = logits;
    const bool pen = penalties_active(p_) && !history.empty();
    if (pen || mask) {
        logits_.assign(logits, logits + vocab);
        if (mask) {
            EMBER_CHECK(token_mask_count(mask, vocab) > 0, "token mask allows no token");
            apply_token_mask(logits_.data(), 1, vocab, vocab, mask, token_mask_words(vocab));
        }
        if (pen) apply_penalties(logits_.data(), vocab, history, p_, counts_);
        L = logits_.data();
    }
    // argmax (ties → lowest id) and a NaN check in one pass: NaN logits are a model bug, and they would break
    // the strict weak order the selection and sorts below rely on.
    int64_t top = 0;
    if (mask)
        while (!token_allowed(mask, top)) ++top;  // ties (all −inf but allowed ones) → the lowest allowed id
    bool nan = false;
    for (int64_t i = 0; i < vocab; ++i) {
        nan |= std::isnan(L[i]);
        if (L[i] > L[top]) top = i;
    }
    EMBER_CHECK(!nan, "NaN in logits");
    if (p_.temperature <= 0.f) return int32_t(top);
    const float M = L[top], T = p_.temperature;
    EMBER_CHECK(std::isfinite(M), "largest logit is not finite");
    // Total order used everywhere: larger logit first, then lower id.
    auto before = [L](const Cand& a, const Cand& b) { return L[a.id] > L[b.id] || (L[a.id] == L[b.id] && a.id < b.id); };
    const bool top_p_on = p_.top_p < 1.f;
    const float min_p = std::min(std::max(p_.min_p, 0.f), 1.f);  // w(max) = 1 ≥ min_p: the max always survives

    // Top-k set, unsorted, with w = exp((l − M) / T) ∈ (0, 1] and Z = Σ w over it (stage 5's normaliser).
    // min-p survivors are those with w ≥ min_p since p / p_max = w; top-p only needs the prefix of the order.
    const int64_t k = (p_.top_k > 0 && p_.top_k < vocab) ? p_.top_k : vocab;
    double Z = 0;
    cand_.clear();
    if (k < vocab) {
        if (k <= 256) {  // one pass with a heap of the k best; front = worst kept (ids ascend, so ties lose)
            for (int32_t i = 0; i < int32_t(k); ++i) cand_.push_back({i, 0.f});
            std::make_heap(cand_.begin(), cand_.end(), before);
            for (int64_t i = k; i < vocab; ++i) {
                if (!(L[i] > L[cand_.front().id])) continue;
                std::pop_heap(cand_.begin(), cand_.end(), before);
                cand_.back() = {int32_t(i), 0.f};
                std::push_heap(cand_.begin(), cand_.end(), before);
            }
        } else {  // O(V) selection
            cand_.resize(size_t(vocab));
            for (int64_t i = 0; i < vocab; ++i) cand_[size_t(i)] = {int32_t(i), 0.f};
            std::nth_element(cand_.begin(), cand_.begin() + (k - 1), cand_.end(), before);
            cand_.resize(size_t(k));
        }
        for (Cand& c : cand_) Z += (c.w = std::exp((L[c.id] - M) / T));
        cand_.erase(std::remove_if(cand_.begin(), cand_.end(),
                                   [min_p](const Cand& c) { return !(c.w > 0.f && c.w >= min_p); }),
                    cand_.end());
    } else if (!top_p_on && min_p > 0.f) {  // Z is not needed: skip exp for tokens clearly below the min-p cut
        const float x_cut = std::log(min_p) - 1e-3f;
        for (int64_t i = 0; i < vocab; ++i) {
            const float x = (L[i] - M) / T;
            if (x < x_cut) continue;
            const float w = std::exp(x);
            if (w >= min_p) cand_.push_back({int32_t(i), w});
        }
    } else {
        for (int64_t i = 0; i < vocab; ++i) {
            const float w = std::exp((L[i] - M) / T);
            Z += w;
            if (w > 0.f && w >= min_p) cand_.push_back({int32_t(i), w});
        }
    }
    if (top_p_on) {
        top_p_filter(L, M, T, double(p_.top_p) * Z);
    } else if (k < vocab) {
        std::sort(cand_.begin(), cand_.end(), before);  // canonical order (nth_element's is library-specific)
    }

    total_ = 0;
    for (const Cand& c : cand_) total_ += c.w;
    return -1;
}

const std::vector<TokenProb>& Sampler::distribution(const float* logits, int64_t vocab,
                                                    const std::vector<int32_t>& history, const uint32_t* mask) {
    dist_.clear();
    const int32_t greedy = prepare(logits, vocab, history, mask);
    if (greedy >= 0) {
        dist_.push_back({greedy, 1.0});
        return dist_;
    }
    dist_.reserve(cand_.size());
    for (const Cand& c : cand_) dist_.push_back({c.id, double(c.w) / total_});
    return dist_;
}

// Keeps the smallest prefix of the order whose Σ w ≥ target (at least one token). Candidates are bucketed by
// their scaled logit x = (l − M) / T ≤ 0; bins are monotone in the logit, so each bin is a contiguous slice of
// the order. Whole bins are kept while the running mass stays below target and only the bin that crosses it is
// sorted. Kept tokens stay in a deterministic order: id order for whole bins, then the sorted crossing bin.
void Sampler::top_p_filter(const float* L, float M, float T, double target) {
    auto before = [L](const Cand& a, const Cand& b) { return L[a.id] > L[b.id] || (L[a.id] == L[b.id] && a.id < b.id); };
    auto keep_prefix = [&](size_t first, double need) {
        double cum = 0;
        for (size_t j = first; j < cand_.size(); ++j) {
            cum += cand_[j].w;
            if (cum >= need) {
                cand_.resize(j + 1);
                return;
            }
        }  // rounding left the sum short: keep everything
    };
    if (cand_.size() <= 1024) {
        std::sort(cand_.begin(), cand_.end(), before);
        keep_prefix(0, target);
        return;
    }
    constexpr int kBins = 4096;
    constexpr float kPerUnit = kBins / 40.f;  // x < −40 (w < 4e-18) all land in the last bin
    bins_.resize(cand_.size());
    std::vector<double> mass(kBins, 0.0);
    for (size_t j = 0; j < cand_.size(); ++j) {
        const float x = -(L[cand_[j].id] - M) / T * kPerUnit;
        bins_[j] = uint16_t(x >= float(kBins - 1) ? kBins - 1 : int(x));
        mass[bins_[j]] += cand_[j].w;
    }
    double below = 0;  // mass of the bins before the crossing one
    int cross = -1;
    for (int b = 0; b < kBins && cross < 0; ++b) {
        if (below + mass[size_t(b)] >= target) cross = b;
        else below += mass[size_t(b)];
    }
    if (cross < 0) return;  // rounding: the whole candidate set is the nucleus
    std::vector<Cand> edge;
    size_t n = 0;
    for (size_t j = 0; j < cand_.size(); ++j) {
        if (bins_[j] < cross) cand_[n++] = cand_[j];
        else if (bins_[j] == cross) edge.push_back(cand_[j]);
    }
    std::sort(edge.begin(), edge.end(), before);
    cand_.resize(n);
    cand_.insert(cand_.end(), edge.begin(), edge.end());
    keep_prefix(n, target - below);
}

int32_t Sampler::sample(const float* logits, int64_t vocab, const std::vector<int32_t>& history, const uint32_t* mask) {
    const int32_t greedy = prepare(logits, vocab, history, mask);
    if (greedy >= 0) return greedy;  // greedy uses no randomness
    // Exactly one draw per non-greedy call, so the RNG stream advances by step whatever survives the filters.
    const double target = rng_.uniform() * total_;
    double cum = 0;
    for (const Cand& c : cand_) {
        cum += c.w;
        if (target < cum) return c.id;
    }
    return cand_.back().id;  // target beyond the rounded total
}

}  // namespace ember
