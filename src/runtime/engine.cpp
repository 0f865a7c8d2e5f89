// engine.cpp: ember::Engine (include/ember/engine.h) — the pool, admission of sequences into slots, cancellation
// and queries. The round itself is in engine_step.cpp, saved sequences in engine_save.cpp.
#include <algorithm>
#include <cmath>

#include "runtime/engine_impl.h"

namespace ember {

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

Expected<Engine> make_engine(const CausalLM& model, const EngineOptions& opt_in, std::shared_ptr<const void> keep_alive) {
    EngineOptions opt = opt_in;
    EMBER_REQUIRE(opt.max_sequences >= 1, "engine: max_sequences must be at least 1 (got %d)", opt.max_sequences);
    EMBER_REQUIRE(opt.prefill_chunk >= 1, "engine: prefill_chunk must be at least 1 (got %lld)",
                  (long long)opt.prefill_chunk);
    EMBER_REQUIRE(opt.prefix_cache_bytes >= 0, "engine: prefix_cache_bytes must be ≥ 0");
    auto impl = std::make_unique<Engine::Impl>(model, opt);
    impl->keep_alive = std::move(keep_alive);
    EMBER_ASSIGN(impl->batch, model.new_batch(opt.max_sequences));
    impl->slots.assign(size_t(opt.max_sequences), Engine::Impl::SLOT_FREE);
    if (opt.prefix_cache_bytes > 0) {
        impl->cache = std::make_unique<PrefixCache>(model, PrefixCacheOptions{opt.prefill_chunk, opt.prefix_cache_bytes});
        if (!impl->cache->enabled()) impl->cache.reset();  // the model cannot snapshot its state
    }
    impl->stats.prefix_cache_budget_bytes = impl->cache ? opt.prefix_cache_bytes : 0;
    return Engine(std::move(impl));
}

// ---- Impl ----

EngineSeq* Engine::Impl::find(SequenceId id) const {
    for (const auto& s : seqs)
        if (s->id == id) return s.get();
    return nullptr;
}

Expected<int32_t> Engine::Impl::take_slot() {
    auto it = std::find(slots.begin(), slots.end(), SLOT_FREE);
    EMBER_REQUIRE(it != slots.end(), "engine: no free slot (%zu sequences hold the %d slots%s)", seqs.size(),
                  opt.max_sequences, seqs.size() < slots.size() ? ", some out of use after a failed reset" : "");
    *it = SLOT_USED;
    return int32_t(it - slots.begin());
}

Status Engine::Impl::remove(size_t i) {
    const int32_t slot = seqs[i]->slot;
    seqs.erase(seqs.begin() + long(i));
    Status st = model.batch_reset(*batch, slot);
    slots[size_t(slot)] = st.is_ok() ? SLOT_FREE : SLOT_BROKEN;
    return st;
}

Status Engine::Impl::check_params(const SequenceParams& p, int64_t held) const {
    const int64_t V = model.info().vocab_size, ctx = model.info().max_context;
    for (int32_t t : p.prompt)
        EMBER_REQUIRE(t >= 0 && t < V, "token id %d of the prompt is outside the vocabulary [0, %lld)", t, (long long)V);
    EMBER_REQUIRE(ctx <= 0 || held + int64_t(p.prompt.size()) <= ctx,
                  "the prompt (%zu tokens%s) does not fit the context of %lld tokens", p.prompt.size(),
                  held ? strfmt(" after %lld held", (long long)held).c_str() : "", (long long)ctx);
    EMBER_REQUIRE(p.max_tokens >= 0, "max_tokens must be ≥ 0 (got %lld)", (long long)p.max_tokens);
    EMBER_REQUIRE(p.top_logprobs >= -1, "top_logprobs must be ≥ 0, or −1 for none (got %d)", p.top_logprobs);
    const SamplingParams& s = p.sampling;
    EMBER_REQUIRE(std::isfinite(s.temperature), "sampling: the temperature is not a number");
    EMBER_REQUIRE(s.top_k >= 0, "sampling: top_k must be ≥ 0 (got %d)", s.top_k);
    EMBER_REQUIRE(s.top_p > 0 && s.top_p <= 1, "sampling: top_p must be in (0, 1] (got %g)", double(s.top_p));
    EMBER_REQUIRE(s.min_p >= 0 && s.min_p <= 1, "sampling: min_p must be in [0, 1] (got %g)", double(s.min_p));
    EMBER_REQUIRE(s.repetition_penalty > 0 && std::isfinite(s.repetition_penalty),
                  "sampling: repetition_penalty must be > 0 (got %g)", double(s.repetition_penalty));
    EMBER_REQUIRE(std::isfinite(s.presence_penalty) && std::isfinite(s.frequency_penalty),
                  "sampling: the presence and frequency penalties must be finite");
    EMBER_REQUIRE(s.penalty_last_n >= -1, "sampling: penalty_last_n must be ≥ −1 (got %d)", s.penalty_last_n);
    return Status::ok();
}

bool Engine::Impl::device_rows(const SequenceParams& p) const {
    return model.has_batch_sampler() && p.top_logprobs < 0 && !p.logits;
}

EngineSeq::Phase Engine::Impl::start_phase(const EngineSeq& s, int64_t pos) {
    return pos > 0 && int64_t(s.tokens.size()) == pos + 1 ? EngineSeq::Phase::DECODE : EngineSeq::Phase::PREFILL;
}

EngineSeq& Engine::Impl::admit(SequenceParams p, int32_t slot, std::vector<int32_t> tokens, int64_t pos) {
    auto s = std::make_unique<EngineSeq>();
    s->id = next_id++;
    s->slot = slot;
    s->device = device_rows(p);
    s->sampler = std::make_unique<Sampler>(p.sampling);
    s->p = std::move(p);
    s->tokens = std::move(tokens);
    s->fresh = pos == 0;
    s->phase = start_phase(*s, pos);
    seqs.push_back(std::move(s));
    return *seqs.back();
}

void Engine::Impl::update_gauges() {
    int64_t kv = 0;
    for (const auto& s : seqs) kv += batch->pos[size_t(s->slot)];
    stats.live = int64_t(seqs.size());
    stats.kv_tokens = kv;
    stats.kv_bytes = kv * model.info().kv_bytes_per_token;
    stats.state_bytes = stats.live * model.info().state_bytes;
}

// ---- the API ----

Expected<SequenceId> Engine::add(SequenceParams params) {
    Impl& m = *impl_;
    EMBER_REQUIRE(!params.prompt.empty(), "the prompt has no tokens");
    EMBER_TRY(m.check_params(params, 0));
    EMBER_ASSIGN(const int32_t slot, m.take_slot());
    std::vector<int32_t> tokens = params.prompt;
    EngineSeq& s = m.admit(std::move(params), slot, std::move(tokens), 0);
    m.update_gauges();
    return s.id;
}

Status Engine::cancel(SequenceId id) {
    Impl& m = *impl_;
    for (size_t i = 0; i < m.seqs.size(); ++i)
        if (m.seqs[i]->id == id) {
            Status st = m.remove(i);
            m.update_gauges();
            return st;
        }
    return errorf("no sequence %lld in this engine (never added, or over and freed)", (long long)id);
}

Expected<SequenceInfo> Engine::info(SequenceId id) const {
    const EngineSeq* s = impl_->find(id);
    EMBER_REQUIRE(s, "no sequence %lld in this engine (never added, or over and freed)", (long long)id);
    SequenceInfo i;
    i.position = impl_->batch->pos[size_t(s->slot)];
    i.generated = s->generated;
    i.cached_tokens = s->cached_tokens;
    i.end = s->end;
    i.tokens = s->tokens;
    return i;
}

int Engine::live() const { return int(impl_->seqs.size()); }

int Engine::running() const {
    return int(std::count_if(impl_->seqs.begin(), impl_->seqs.end(),
                             [](const auto& s) { return s->phase != EngineSeq::Phase::ENDED; }));
}

int Engine::free_slots() const {
    return int(std::count(impl_->slots.begin(), impl_->slots.end(), Impl::SLOT_FREE));
}

int64_t Engine::vocab_size() const { return impl_->model.info().vocab_size; }
int64_t Engine::context() const { return impl_->model.info().max_context; }

EngineStats Engine::stats() const {
    EngineStats st = impl_->stats;
    if (impl_->cache) {
        const PrefixCacheStats c = impl_->cache->stats();
        st.prefix_cache_lookups = c.lookups;
        st.prefix_cache_hits = c.hits;
        st.prefix_cache_evicted = c.evicted;
        st.prefix_cache_restore_ns = c.restore_ns;
        st.prefix_cache_checkpoint_ns = c.offer_ns;
        st.prefix_cache_entries = c.entries;
        st.prefix_cache_bytes = c.bytes;
    }
    return st;
}

}  // namespace ember
