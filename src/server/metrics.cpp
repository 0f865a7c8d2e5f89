// metrics.cpp: Prometheus text rendering of the server metrics.
#include "server/metrics.h"

#include "core/status.h"

namespace ember::server {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}

void Histogram::observe(double s) {
    size_t b = 0;
    while (b < bounds_.size() && s > bounds_[b]) ++b;
    counts_[b].fetch_add(1, std::memory_order_relaxed);
    n_.fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(static_cast<int64_t>(s * 1e9), std::memory_order_relaxed);
}

void Histogram::render(std::string& out, const char* name, const char* help) const {
    out += strfmt("# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (size_t b = 0; b < counts_.size(); ++b) {
        cum += counts_[b].load(std::memory_order_relaxed);
        if (b < bounds_.size()) out += strfmt("%s_bucket{le=\"%g\"} %llu\n", name, bounds_[b], (unsigned long long)cum);
        else out += strfmt("%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
    }
    out += strfmt("%s_sum %.9f\n%s_count %llu\n", name, sum_ns_.load() * 1e-9, name, (unsigned long long)cum);
}

namespace {
const char* const kEndpointNames[] = {"chat_completions", "completions", "models", "tokenize", "detokenize",
                                      "health", "metrics", "ui", "other"};
const char* const kClassNames[] = {"2xx", "4xx", "5xx"};

void counter(std::string& out, const char* name, const char* help, uint64_t v) {
    out += strfmt("# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, (unsigned long long)v);
}
void gauge(std::string& out, const char* name, const char* help, int64_t v) {
    out += strfmt("# HELP %s %s\n# TYPE %s gauge\n%s %lld\n", name, help, name, name, (long long)v);
}
}  // namespace

Metrics::Metrics()
    : ttft({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      inter_token({0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1}),
      request_duration({0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120}) {}

void Metrics::count_request(Endpoint e, int status) {
    const int c = status >= 500 ? 2 : status >= 400 ? 1 : 0;
    requests[size_t(e)][size_t(c)].fetch_add(1, std::memory_order_relaxed);
}

std::string Metrics::prometheus() const {
    std::string out;
    out += "# HELP ember_requests_total HTTP requests answered, by endpoint and status class\n"
           "# TYPE ember_requests_total counter\n";
    for (size_t e = 0; e < size_t(Endpoint::COUNT); ++e)
        for (size_t c = 0; c < 3; ++c)
            out += strfmt("ember_requests_total{endpoint=\"%s\",status=\"%s\"} %llu\n", kEndpointNames[e], kClassNames[c],
                          (unsigned long long)requests[e][c].load());
    counter(out, "ember_prompt_tokens_total", "prompt tokens (prefilled, or restored from the prefix cache)",
            prompt_tokens.load());
    counter(out, "ember_prompt_tokens_cached_total", "prompt tokens restored from the prefix cache instead of computed",
            prompt_tokens_cached.load());
    counter(out, "ember_prefix_cache_lookups_total", "prompts looked up in the prefix cache", prefix_cache_lookups.load());
    counter(out, "ember_prefix_cache_hits_total", "prompts that started from a prefix-cache checkpoint",
            prefix_cache_hits.load());
    counter(out, "ember_prefix_cache_evictions_total", "prefix-cache checkpoints dropped for room",
            prefix_cache_evicted.load());
    counter(out, "ember_generation_tokens_total", "tokens generated", generation_tokens.load());
    counter(out, "ember_kv_waits_total", "prompt chunks that waited a step for KV cache memory", kv_waits.load());
    counter(out, "ember_preemptions_total", "sequences whose state was dropped for KV cache memory (recomputed later)",
            preemptions.load());
    counter(out, "ember_recomputed_tokens_total", "tokens prefilled again after a preemption", recomputed_tokens.load());
    counter(out, "ember_requests_rejected_queue_full_total", "requests refused with 503 (queue full)",
            rejected_full.load());
    counter(out, "ember_requests_cancelled_total", "generations cancelled (client gone, shutdown)", cancelled.load());
    counter(out, "ember_engine_steps_total", "model calls (prefill chunks and decode steps) of the engine worker",
            engine_steps.load());
    out += strfmt("# HELP ember_engine_seconds_total time the engine worker spent inside model calls\n"
                  "# TYPE ember_engine_seconds_total counter\nember_engine_seconds_total %.9f\n", engine_ns.load() * 1e-9);
    gauge(out, "ember_queue_depth", "requests waiting for a sequence slot", queue_depth.load());
    gauge(out, "ember_active_sequences", "sequence slots in use", active_seqs.load());
    gauge(out, "ember_max_sequences", "sequence slots (--max-seqs)", max_seqs.load());
    gauge(out, "ember_kv_tokens", "tokens held in the active sequences' KV caches", kv_tokens.load());
    gauge(out, "ember_kv_bytes", "bytes of KV cache the active sequences use (model's per-token size)", kv_bytes.load());
    gauge(out, "ember_state_bytes", "bytes of fixed per-sequence state (recurrent layers) in use", state_bytes.load());
    gauge(out, "ember_prefix_cache_entries", "prefix-cache checkpoints held", prefix_cache_entries.load());
    gauge(out, "ember_prefix_cache_bytes", "host bytes the prefix-cache checkpoints hold", prefix_cache_bytes.load());
    gauge(out, "ember_prefix_cache_budget_bytes", "the prefix cache's memory budget (0: off)",
          prefix_cache_budget_bytes.load());
    ttft.render(out, "ember_time_to_first_token_seconds", "time from submission (queue wait included) to the first generated token");
    inter_token.render(out, "ember_inter_token_seconds", "time between consecutive generated tokens of a sequence");
    request_duration.render(out, "ember_request_duration_seconds", "time from submission to the last generated token");
    return out;
}

}  // namespace ember::server
