// Session implementation.
#include "runtime/session.h"

#include "core/env.h"
#include "ops/sampling/token_mask.h"
#include "runtime/session_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ember {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Session::Session(const CausalLM& model) : model_(model), state_(model.new_state()) {
    if (env_on("EMBER_TRACE"))
        trace_ = [](const TraceStep& t) {
            std::fprintf(stderr, "[trace] step %lld token %d: %lld kernels%s, gpu %.1f us, wall %.1f us\n",
                         (long long)t.index, t.token, (long long)t.step.kernels, t.step.graph ? " (1 graph)" : "",
                         t.step.gpu_us, t.wall_us);
        };
}

Expected<std::vector<float>> Session::prefill(const std::vector<int32_t>& tokens, bool all_logits, int64_t batch) {
    EMBER_REQUIRE(!tokens.empty(), "prefill: no tokens");
    pending_.clear();
    const int64_t V = model_.info().vocab_size, n = static_cast<int64_t>(tokens.size());
    batch = std::max<int64_t>(1, batch);
    std::vector<float> out(static_cast<size_t>((all_logits ? n : 1) * V));
    std::vector<float> chunk_logits;
    for (int64_t b = 0; b < n; b += batch) {
        int64_t m = std::min(batch, n - b);
        bool last = b + m == n;
        float* dst;
        if (all_logits) dst = &out[b * V];
        else if (last) dst = out.data();
        else { chunk_logits.resize(V); dst = chunk_logits.data(); }
        EMBER_TRY(model_.forward(*state_, &tokens[b], m, dst, all_logits));
        tokens_.insert(tokens_.end(), tokens.begin() + b, tokens.begin() + b + m);
    }
    return out;
}

Expected<std::vector<float>> Session::decode(int32_t token) {
    pending_.clear();
    std::vector<float> out(static_cast<size_t>(model_.info().vocab_size));
    EMBER_TRY(model_.forward(*state_, &token, 1, out.data(), false));
    tokens_.push_back(token);
    return out;
}

Expected<int32_t> Session::decode_sample(int32_t token, const SamplingParams& sp, const TokenMaskFn* mask) {
    pending_.clear();
    tokens_.push_back(token);
    return model_.decode_sample(*state_, token, sp, tokens_, mask);
}

Expected<GenerateStats> Session::generate(const std::vector<int32_t>& prompt, int64_t max_new,
                                          const SamplingParams& sp, const std::vector<int32_t>& stop_ids,
                                          const std::function<bool(int32_t)>& on_token, TokenConstraint* constraint) {
    GenerateStats st;
    // After load(): the pending token goes first, and the saved RNG streams continue (same seed only).
    const bool resumed = resume_;
    resume_ = false;
    std::vector<int32_t> input = prompt;
    if (resumed) input.insert(input.begin(), pending_.begin(), pending_.end());
    EMBER_REQUIRE(!input.empty(), resumed ? "generate: the restored session has no pending token; give a prompt"
                                          : "generate: empty prompt");
    st.prompt_tokens = static_cast<int64_t>(input.size());
    Sampler sampler(sp);
    if (resumed && have_rng_ && rng_seed_ == sp.seed) sampler.rng().set_state(rng_state_);
    const int64_t V = model_.info().vocab_size;
    const bool device = model_.has_device_sampler() && !host_sampling_;
    st.device_sampling = device;
    std::vector<uint32_t> mask;
    const uint32_t* m = nullptr;
    if (constraint) mask.resize(size_t(token_mask_words(V))), m = mask.data();
    std::vector<float> logits;
    int32_t id = 0;
    // A host selection from `logits` (NaN is bad weights or input: the sampler treats it as a bug); `left`
    // selections remain, this one included.
    auto host_select = [&](int64_t left, const char* verb) -> Expected<int32_t> {
        for (int64_t j = 0; j < V; ++j)
            EMBER_REQUIRE(!std::isnan(logits[j]), "the model produced NaN logits at position %lld (broken weights?)",
                          (long long)pos());
        if (constraint) {
            constraint->set_remaining(left);
            constraint->fill_mask(mask.data());
            const std::string failure = constraint->failure();
            EMBER_REQUIRE(failure.empty(), "structured output: %s", failure.c_str());
            EMBER_REQUIRE(token_mask_count(m, V) > 0, "structured output: no token of the vocabulary can %s the text",
                          verb);
        }
        return sampler.sample(logits.data(), V, tokens_, m);
    };
    auto t0 = std::chrono::steady_clock::now();
    if (device && resumed && prompt.empty() && !constraint) {
        // The uninterrupted run selected the token after the pending one on the device: so does this one.
        pending_.clear();
        tokens_.push_back(input[0]);
        EMBER_ASSIGN(id, model_.decode_sample(*state_, input[0], sp, tokens_));
        st.prefill_s = seconds_since(t0);
    } else {
        EMBER_ASSIGN(logits, prefill(input));
        st.prefill_s = seconds_since(t0);
        // The first token comes from the prefill's logits (host); then each decode step selects the next one.
        EMBER_ASSIGN(id, host_select(max_new, "start"));
    }
    auto t1 = std::chrono::steady_clock::now();
    int64_t remaining = max_new;  // selections left, the one being made included
    const TokenMaskFn mask_fn = [&](uint32_t* w) {
        constraint->set_remaining(remaining);
        constraint->fill_mask(w);
    };
    for (int64_t i = 0; i < max_new; ++i) {
        remaining = max_new - i - 1;
        st.generated_tokens++;
        if (constraint) EMBER_TRY(constraint->accept(id));
        bool stop = std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end();
        if (stop) { st.stopped_by_eos = true; break; }
        if (on_token && !on_token(id)) break;
        if (i + 1 == max_new || (constraint && constraint->done())) break;
        auto ts = std::chrono::steady_clock::now();
        int32_t next;
        if (device) {
            tokens_.push_back(id);
            EMBER_ASSIGN(next, model_.decode_sample(*state_, id, sp, tokens_, constraint ? &mask_fn : nullptr));
        } else {
            EMBER_ASSIGN(logits, decode(id));
            EMBER_ASSIGN(next, host_select(remaining, "continue"));
        }
        st.decode_steps++;
        StepStats ss = model_.last_step_stats(*state_);
        st.decode_kernels += ss.kernels;
        st.decode_gpu_s += ss.gpu_us * 1e-6;
        if (trace_) trace_({st.decode_steps - 1, next, ss, seconds_since(ts) * 1e6});
        id = next;
    }
    st.decode_s = seconds_since(t1);
    // The last selected token was not consumed: a saved session keeps it for the next generate() after load().
    pending_.assign(max_new > 0 ? 1 : 0, id);
    have_rng_ = true, rng_seed_ = sp.seed, rng_state_ = sampler.rng().state();
    return st;
}

Status Session::save(const std::string& path) const {
    SessionFile f;
    EMBER_ASSIGN(f.tensors, model_.export_state(*state_));
    EMBER_REQUIRE(static_cast<int64_t>(tokens_.size()) == pos(), "save: %zu tokens recorded at position %lld",
                  tokens_.size(), (long long)pos());
    f.pos = pos();
    f.tokens = tokens_;
    f.pending = pending_;
    f.host_rng = have_rng_, f.host_seed = rng_seed_, f.host_state = rng_state_;
    f.device_rng = model_.device_rng(*state_, &f.device_seed, &f.device_counter);
    return write_session_file(path, model_, f);
}

Status Session::load(const std::string& path) {
    EMBER_ASSIGN(SessionFile f, read_session_file(path, model_));
    std::unique_ptr<ModelState> st = model_.new_state();
    EMBER_TRY(model_.import_state(*st, f.pos, f.tensors));
    if (f.device_rng) EMBER_TRY(model_.set_device_rng(*st, f.device_seed, f.device_counter));
    state_ = std::move(st);
    tokens_ = std::move(f.tokens);
    pending_ = std::move(f.pending);
    have_rng_ = f.host_rng, rng_seed_ = f.host_seed, rng_state_ = f.host_state;
    resume_ = true;
    return Status::ok();
}

int64_t peak_rss_bytes() {
    FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    int64_t kb = 0;
    while (std::fgets(line, sizeof line, f))
        if (!std::strncmp(line, "VmHWM:", 6)) { kb = std::atoll(line + 6); break; }
    std::fclose(f);
    return kb * 1024;
}

}  // namespace ember
