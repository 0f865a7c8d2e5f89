// engine_save.cpp: a sequence's life beyond one generation — Engine::save (the saved-session file of
// runtime/session_file.h, from the sequence's slot), Engine::restore (a new sequence from such a file) and
// Engine::extend (a kept sequence continues). All three keep the sampling streams: a continuation with the same
// seed selects what the uninterrupted sequence would have.
#include <array>

#include "runtime/engine_impl.h"
#include "runtime/session_file.h"

namespace ember {

namespace {

// A new Sampler for `p`, continuing `state` when the seed is the one it was drawn from.
std::unique_ptr<Sampler> continued_sampler(const SamplingParams& p, bool have, uint64_t seed,
                                           const std::array<uint64_t, 4>& state) {
    auto s = std::make_unique<Sampler>(p);
    if (have && seed == p.seed) s->rng().set_state(state);
    return s;
}

}  // namespace

Status Engine::save(SequenceId id, const std::string& path) const {
    const Impl& m = *impl_;
    const EngineSeq* s = m.find(id);
    EMBER_REQUIRE(s, "save: no sequence %lld in this engine (never added, or over and freed)", (long long)id);
    EMBER_REQUIRE(!s->recompute, "save: sequence %lld was preempted for KV cache memory and is being recomputed (save "
                                 "it once it decodes again)", (long long)id);
    EMBER_REQUIRE(s->phase != EngineSeq::Phase::PREFILL,
                  "save: sequence %lld is still consuming its prompt (save it once it has selected a token)",
                  (long long)id);
    const int64_t pos = m.batch->pos[size_t(s->slot)];
    SessionFile f;
    EMBER_ASSIGN(f.tensors, m.model.batch_export_slot(*m.batch, s->slot, 0));
    f.pos = pos;
    f.tokens.assign(s->tokens.begin(), s->tokens.begin() + pos);
    f.pending.assign(s->tokens.begin() + pos, s->tokens.end());
    f.host_rng = true;
    f.host_seed = s->sampler->params().seed;
    f.host_state = s->sampler->rng().state();
    f.device_rng = m.model.batch_slot_rng(*m.batch, s->slot, &f.device_seed, &f.device_counter);
    return write_session_file(path, m.model, f).with_context("save");
}

Expected<SequenceId> Engine::restore(const std::string& path, SequenceParams params) {
    Impl& m = *impl_;
    EMBER_ASSIGN(SessionFile f, read_session_file(path, m.model));
    EMBER_REQUIRE(!f.pending.empty() || !params.prompt.empty(),
                  "restore: %s has no pending token; give a prompt to continue it", path.c_str());
    EMBER_TRY(m.check_params(params, f.pos + int64_t(f.pending.size())));
    EMBER_ASSIGN(const int32_t slot, m.take_slot());
    Status st = m.model.batch_import_slot(*m.batch, slot, f.pos, f.tensors);
    if (st.is_ok() && f.device_rng) st = m.model.batch_set_slot_rng(*m.batch, slot, f.device_seed, f.device_counter);
    if (!st.is_ok()) {
        const Status reset = m.model.batch_reset(*m.batch, slot);
        m.slots[size_t(slot)] = reset.is_ok() ? Impl::SLOT_FREE : Impl::SLOT_BROKEN;
        return st.with_context("restore");
    }
    std::vector<int32_t> tokens = std::move(f.tokens);
    tokens.insert(tokens.end(), f.pending.begin(), f.pending.end());
    tokens.insert(tokens.end(), params.prompt.begin(), params.prompt.end());
    EngineSeq& s = m.admit(std::move(params), slot, std::move(tokens), f.pos);
    s.sampler = continued_sampler(s.p.sampling, f.host_rng, f.host_seed, f.host_state);
    m.update_gauges();
    return s.id;
}

Status Engine::extend(SequenceId id, SequenceParams params) {
    Impl& m = *impl_;
    EngineSeq* s = m.find(id);
    EMBER_REQUIRE(s, "extend: no sequence %lld in this engine (never added, or over and freed)", (long long)id);
    EMBER_REQUIRE(s->phase == EngineSeq::Phase::ENDED, "extend: sequence %lld has not ended", (long long)id);
    EMBER_REQUIRE(int64_t(s->tokens.size()) > m.batch->pos[size_t(s->slot)] || !params.prompt.empty(),
                  "extend: sequence %lld has no pending token; give a prompt", (long long)id);
    EMBER_TRY(m.check_params(params, int64_t(s->tokens.size())));
    s->sampler = continued_sampler(params.sampling, true, s->sampler->params().seed, s->sampler->rng().state());
    s->tokens.insert(s->tokens.end(), params.prompt.begin(), params.prompt.end());
    s->device = m.device_rows(params);
    s->p = std::move(params);
    s->generated = 0;
    s->end = SequenceEnd::RUNNING;
    s->phase = Impl::start_phase(*s, m.batch->pos[size_t(s->slot)]);
    return Status::ok();
}

}  // namespace ember
