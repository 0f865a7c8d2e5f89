// Session: one sequence being processed by a model — its state, its tokens, prefill and decode steps,
// and the generation loop (sampling, stop tokens, streaming callback, timing).
#pragma once
#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/constraint.h"  // TokenConstraint (generate()'s structured output)
#include "models/model.h"
#include "ops/sampling/sampling.h"

namespace ember {

struct GenerateStats {
    int64_t prompt_tokens = 0, generated_tokens = 0, decode_steps = 0;  // decode_steps: forwards of 1 token
    double prefill_s = 0, decode_s = 0;
    bool stopped_by_eos = false;
    bool device_sampling = false;              // decode steps selected tokens on the device
    int64_t decode_kernels = 0;                // Σ kernels over decode steps (StepStats)
    double decode_gpu_s = 0;                   // Σ device time over decode steps (0 when unknown)
};

// One line per decode step for --trace / EMBER_TRACE=1.
struct TraceStep {
    int64_t index = 0;   // 0-based decode step
    int32_t token = 0;   // the token this step selected
    StepStats step;
    double wall_us = 0;  // host wall time of the step (launch + wait + bookkeeping)
};

class Session {
public:
    explicit Session(const CausalLM& model);
    // Acquires the state's buffers now instead of in the first step (CausalLM::reserve): benchmarks call it
    // before their timers, as llama-bench creates its context before timing.
    Status reserve() { return model_.reserve(*state_); }

    // Feeds tokens in chunks of at most `batch` (one forward per chunk). Returns last-position logits,
    // or every position's logits ([n, vocab]) when all_logits.
    Expected<std::vector<float>> prefill(const std::vector<int32_t>& tokens, bool all_logits = false,
                                         int64_t batch = 512);
    // One token through the decode path (n = 1). Returns its logits [vocab].
    Expected<std::vector<float>> decode(int32_t token);
    // One token through the decode path with the next token selected on the device (only when
    // model().has_device_sampler()): returns that token's id; no logits reach the host.
    // mask (optional): fills the selection's token mask (computed while the forward pass runs).
    Expected<int32_t> decode_sample(int32_t token, const SamplingParams& sp, const TokenMaskFn* mask = nullptr);

    // Prefill the prompt, then sample up to max_new tokens; on_token(id) is called for each new token
    // (return false to stop). Stops on any id in stop_ids.
    // constraint (optional): every selected token is allowed by its mask (on the device the mask is computed
    // while the forward pass runs).
    Expected<GenerateStats> generate(const std::vector<int32_t>& prompt, int64_t max_new, const SamplingParams& sp,
                                     const std::vector<int32_t>& stop_ids,
                                     const std::function<bool(int32_t)>& on_token,
                                     TokenConstraint* constraint = nullptr);

    // Called after every decode step of generate() (nullptr = off). EMBER_TRACE=1 installs a stderr printer.
    void set_trace(std::function<void(const TraceStep&)> f) { trace_ = std::move(f); }
    // Host sampling even when the model has a device sampler (tests compare the two paths).
    void set_host_sampling(bool on) { host_sampling_ = on; }

    // Saved sessions (runtime/session_file.h): the consumed tokens, every state tensor (only the used KV rows),
    // the token generate() selected last (not yet consumed) and the sampling RNG (host; device when the model has
    // one). load() replaces this session with the file's (a file of another model, truncated, corrupted or of
    // another version is an error and leaves the session as it was). The next generate() after load() starts with
    // the pending token followed by its prompt (which may then be empty) and continues the saved RNG streams when
    // its seed is the saved one: the restored sequence continues exactly as the uninterrupted run would.
    Status save(const std::string& path) const;
    Status load(const std::string& path);

    const CausalLM& model() const { return model_; }
    int64_t pos() const { return state_->pos; }
    const std::vector<int32_t>& tokens() const { return tokens_; }
    const std::vector<int32_t>& pending() const { return pending_; }
    void reset() {
        state_ = model_.new_state();
        tokens_.clear();
        pending_.clear();
        have_rng_ = resume_ = false;
    }

private:
    const CausalLM& model_;
    std::unique_ptr<ModelState> state_;
    std::vector<int32_t> tokens_;
    std::vector<int32_t> pending_;          // selected by generate() last, not consumed (0 or 1 token)
    bool have_rng_ = false, resume_ = false;  // host RNG state known; load() ran and generate() has not
    uint64_t rng_seed_ = 0;
    std::array<uint64_t, 4> rng_state_{};
    std::function<void(const TraceStep&)> trace_;
    bool host_sampling_ = false;
};

// Peak resident memory of this process in bytes (from /proc/self/status VmHWM).
int64_t peak_rss_bytes();

}  // namespace ember
