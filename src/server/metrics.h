// metrics.h: the server's counters, gauges and latency histograms, rendered as Prometheus text (exposition format
// 0.0.4) for GET /metrics. Lock-free (atomics): updated from the engine worker and the HTTP threads.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace ember::server {

class Histogram {
public:
    explicit Histogram(std::vector<double> bounds);  // upper bounds (seconds), ascending; +Inf is implicit
    void observe(double seconds);
    void render(std::string& out, const char* name, const char* help) const;

private:
    std::vector<double> bounds_;
    std::vector<std::atomic<uint64_t>> counts_;  // per bucket (not cumulative), last = +Inf
    std::atomic<uint64_t> n_{0};
    std::atomic<int64_t> sum_ns_{0};
};

enum class Endpoint : int { CHAT, COMPLETIONS, MODELS, TOKENIZE, DETOKENIZE, HEALTH, METRICS, UI, OTHER, COUNT };

struct Metrics {
    Metrics();
    void count_request(Endpoint e, int status);
    std::string prometheus() const;

    // counters
    std::array<std::array<std::atomic<uint64_t>, 3>, size_t(Endpoint::COUNT)> requests{};  // [endpoint][2xx, 4xx, 5xx]
    std::atomic<uint64_t> prompt_tokens{0}, generation_tokens{0}, rejected_full{0}, cancelled{0};
    std::atomic<uint64_t> engine_steps{0}, engine_ns{0};  // model calls of the worker and the time inside them
    std::atomic<uint64_t> prompt_tokens_cached{0};         // prompt tokens restored from the prefix cache
    std::atomic<uint64_t> kv_waits{0}, preemptions{0}, recomputed_tokens{0};  // KV pool scheduling (EngineStats)
    std::atomic<int64_t> prefix_cache_lookups{0}, prefix_cache_hits{0}, prefix_cache_evicted{0};
    std::atomic<int64_t> prefix_cache_entries{0}, prefix_cache_bytes{0}, prefix_cache_budget_bytes{0};
    // gauges (the engine worker sets them)
    std::atomic<int64_t> queue_depth{0}, active_seqs{0}, max_seqs{0}, kv_tokens{0}, kv_bytes{0}, state_bytes{0};
    // latencies
    Histogram ttft, inter_token, request_duration;
};

}  // namespace ember::server
