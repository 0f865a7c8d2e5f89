// engine_step.cpp: Engine::step — one round over the live sequences: a prefill chunk of each sequence still in its
// prompt (the last chunk selects its first token on the host), then one batched decode step of all the others
// (selection per row on the device when the model has a batch sampler and the row needs no host logits — a
// constrained row's token mask is filled while the GPU runs the forward and applied there —, else on the host
// with the row's own Sampler and constraint); prefix-cache lookups and checkpoints; the ends.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "ops/sampling/logprobs.h"
#include "ops/sampling/token_mask.h"
#include "runtime/engine_impl.h"

namespace ember {

namespace {

using Clock = std::chrono::steady_clock;
using Phase = EngineSeq::Phase;
using Sink = std::function<void(const StepEvent&)>;

// A constraint whose mask allowed nothing: its own failure, else that the text cannot continue.
std::string no_token_message(const TokenConstraint& c) {
    std::string f = c.failure();
    return f.empty() ? "structured output: no token of the vocabulary can continue the text" : "structured output: " + f;
}

bool finite_row(const float* l, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(l[i])) return false;
    return true;
}

// The round of one step: the engine, where the events go.
struct Round {
    Engine::Impl& m;
    const Sink& sink;

    StepEvent event(const EngineSeq& s) const {
        StepEvent e;
        e.id = s.id;
        e.cached_tokens = s.cached_tokens;
        return e;
    }
    void end(EngineSeq& s, SequenceEnd how, std::string error = "") {
        s.phase = Phase::ENDED;
        s.end = how;
        StepEvent e = event(s);
        e.end = how;
        e.error = std::move(error);
        sink(e);
    }
    // One model call, counted in the stats.
    Status timed(const std::function<Status()>& f) {
        const auto t0 = Clock::now();
        Status st = f();
        m.stats.model_calls++;
        m.stats.model_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
        return st;
    }
    int64_t pos(const EngineSeq& s) const { return m.batch->pos[size_t(s.slot)]; }

    void checkpoint(EngineSeq& s);
    void prefill_chunk(EngineSeq& s);
    void decode_step(const std::vector<EngineSeq*>& rows);
    void select(EngineSeq& s, const float* logits);
    void emit(EngineSeq& s, const float* logits, int32_t id);
};

// Offers the slot's state to the prefix cache (it keeps block boundaries whose chain it holds).
void Round::checkpoint(EngineSeq& s) {
    if (!m.cache) return;
    if (Status st = m.cache->offer(*m.batch, s.slot, s.tokens.data()); !st.is_ok()) end(s, SequenceEnd::FAILED, st.message());
}

void Round::prefill_chunk(EngineSeq& s) {
    if (s.fresh && m.cache) {  // the deepest cached prefix of the prompt, then the rest chunk by chunk
        auto got = m.cache->restore(*m.batch, s.slot, s.tokens.data(), int64_t(s.tokens.size()));
        if (!got.is_ok()) return end(s, SequenceEnd::FAILED, got.message());
        s.cached_tokens = got.value();
        m.stats.prompt_tokens += got.value();
        m.stats.cached_prompt_tokens += got.value();
    }
    s.fresh = false;
    const int64_t V = m.model.info().vocab_size, at = pos(s);
    const int64_t n = std::min(m.opt.prefill_chunk, int64_t(s.tokens.size()) - at);
    const bool final = at + n == int64_t(s.tokens.size());
    m.logits.resize(size_t(V));
    const Status st = timed(
        [&] { return m.model.batch_prefill(*m.batch, s.slot, s.tokens.data() + at, n, final ? m.logits.data() : nullptr); });
    if (!st.is_ok()) return end(s, SequenceEnd::FAILED, st.message());
    m.stats.prompt_tokens += n;
    checkpoint(s);
    if (!final || s.phase == Phase::ENDED) return;
    if (!finite_row(m.logits.data(), V))
        return end(s, SequenceEnd::FAILED, "the model produced non-finite logits (broken weights?)");
    if (s.p.max_tokens == 0) {  // only the prompt: its last logits when asked, and the end
        s.phase = Phase::ENDED;
        s.end = SequenceEnd::LENGTH;
        StepEvent e = event(s);
        e.end = s.end;
        if (s.p.logits) e.logits = m.logits;
        return sink(e);
    }
    select(s, m.logits.data());
}

void Round::decode_step(const std::vector<EngineSeq*>& rows_in) {
    const ModelInfo& info = m.model.info();
    const int64_t V = info.vocab_size;
    std::vector<EngineSeq*> rows;
    for (EngineSeq* s : rows_in) {  // a full context ends that sequence (as a length limit), not the step
        if (info.max_context > 0 && pos(*s) + 1 > info.max_context) end(*s, SequenceEnd::LENGTH);
        else rows.push_back(s);
    }
    if (rows.empty()) return;
    const int64_t R = int64_t(rows.size());
    std::vector<int32_t> slots(static_cast<size_t>(R)), tokens(static_cast<size_t>(R)), ids(static_cast<size_t>(R), -1);
    bool any_host = false;
    for (int64_t r = 0; r < R; ++r) {
        slots[size_t(r)] = rows[size_t(r)]->slot;
        tokens[size_t(r)] = rows[size_t(r)]->tokens.back();  // the pending token
        any_host |= !rows[size_t(r)]->device;
    }
    if (any_host) m.logits.resize(size_t(R * V));
    Status st = Status::ok();
    // Device rows under a constraint: their masks, filled by the model while the forward runs. A mask that allows
    // nothing is marked (the sequence fails after the step) and handed over allowing everything, so that the
    // row's selection stays defined.
    std::vector<TokenMaskFn> mask_fns(static_cast<size_t>(R));
    std::vector<const TokenMaskFn*> masks(static_cast<size_t>(R), nullptr);
    std::vector<char> no_token(static_cast<size_t>(R), 0);
    bool any_mask = false;
    for (int64_t r = 0; r < R; ++r) {
        EngineSeq& s = *rows[size_t(r)];
        if (!s.device || !s.p.constraint) continue;
        char* empty = &no_token[size_t(r)];
        mask_fns[size_t(r)] = [&s, empty, V](uint32_t* w) {
            s.p.constraint->set_remaining(s.p.max_tokens - s.generated);
            s.p.constraint->fill_mask(w);
            if (token_mask_any(w, V)) return;  // (a count per row cost ~37 us at 248k: 2.3 ms a step at 64 rows)
            *empty = 1;
            std::fill(w, w + token_mask_words(V), ~0u);
        };
        masks[size_t(r)] = &mask_fns[size_t(r)];
        any_mask = true;
    }
    if (m.model.has_batch_sampler()) {  // device rows selected there (an all-greedy step is the model's fast path)
        std::vector<const SamplingParams*> params(static_cast<size_t>(R));
        std::vector<const std::vector<int32_t>*> hist(static_cast<size_t>(R));
        for (int64_t r = 0; r < R; ++r) {
            params[size_t(r)] = &rows[size_t(r)]->p.sampling;
            hist[size_t(r)] = &rows[size_t(r)]->tokens;
        }
        st = timed([&] {
            return m.model.batch_decode_sample(*m.batch, slots.data(), tokens.data(), R, params.data(), hist.data(),
                                               ids.data(), any_host ? m.logits.data() : nullptr,
                                               any_mask ? masks.data() : nullptr);
        });
    } else {  // every row is a host row
        st = timed([&] { return m.model.batch_decode(*m.batch, slots.data(), tokens.data(), R, m.logits.data()); });
    }
    if (!st.is_ok()) {
        for (EngineSeq* s : rows) end(*s, SequenceEnd::FAILED, st.message());
        return;
    }
    for (int64_t r = 0; r < R; ++r) {
        EngineSeq& s = *rows[size_t(r)];
        // A reply crossing a checkpoint boundary is kept too (the next turn of a chat starts with it).
        if (m.cache && pos(s) % m.opt.prefill_chunk == 0) checkpoint(s);
        if (s.phase == Phase::ENDED) continue;
        if (s.device) {
            if (no_token[size_t(r)]) end(s, SequenceEnd::FAILED, no_token_message(*s.p.constraint));
            else emit(s, nullptr, ids[size_t(r)]);
            continue;
        }
        const float* row = m.logits.data() + r * V;
        if (!finite_row(row, V)) {
            end(s, SequenceEnd::FAILED, "the model produced non-finite logits (broken weights?)");
            continue;
        }
        select(s, row);
    }
}

// A host selection (masked by the constraint).
void Round::select(EngineSeq& s, const float* logits) {
    const int64_t V = m.model.info().vocab_size;
    const uint32_t* mask = nullptr;
    if (TokenConstraint* c = s.p.constraint.get()) {
        s.mask.resize(size_t(token_mask_words(V)));
        c->set_remaining(s.p.max_tokens - s.generated);
        c->fill_mask(s.mask.data());
        if (!token_mask_any(s.mask.data(), V)) return end(s, SequenceEnd::FAILED, no_token_message(*c));
        mask = s.mask.data();
    }
    emit(s, logits, s.sampler->sample(logits, V, s.tokens, mask));
}

// The selected token `id` (logits: the row it came from, null on the device): the constraint, stop ids, limits.
void Round::emit(EngineSeq& s, const float* logits, int32_t id) {
    s.generated++;
    m.stats.generated_tokens++;
    if (s.p.constraint) {
        if (Status st = s.p.constraint->accept(id); !st.is_ok())
            return end(s, SequenceEnd::FAILED, "structured output: " + st.message());
    }
    s.tokens.push_back(id);  // pending: the next decode step consumes it (a kept sequence continues from it)
    const auto& stop = s.p.stop_ids;
    if (std::find(stop.begin(), stop.end(), id) != stop.end()) return end(s, SequenceEnd::EOS);
    StepEvent e = event(s);
    e.has_token = true;
    e.token.id = id;
    if (logits && s.p.top_logprobs >= 0) {
        auto lp = token_logprobs(logits, m.model.info().vocab_size, id, s.p.top_logprobs);
        e.token.logprob = lp.first;
        e.token.top = std::move(lp.second);
    }
    if (logits && s.p.logits) e.logits.assign(logits, logits + m.model.info().vocab_size);
    const bool complete = s.p.constraint && s.p.constraint->done();
    const bool last = complete || s.generated >= s.p.max_tokens;
    if (last) {
        s.phase = Phase::ENDED;
        s.end = e.end = complete ? SequenceEnd::COMPLETE : SequenceEnd::LENGTH;
    } else {
        s.phase = Phase::DECODE;
    }
    sink(e);
}

}  // namespace

void Engine::step(const Sink& on_event) {
    Impl& m = *impl_;
    const Sink ignore = [](const StepEvent&) {};
    Round round{m, on_event ? on_event : ignore};
    std::vector<EngineSeq*> decoding;
    for (auto& s : m.seqs) {
        if (s->phase == Phase::PREFILL) round.prefill_chunk(*s);
        else if (s->phase == Phase::DECODE) decoding.push_back(s.get());
    }
    if (!decoding.empty()) round.decode_step(decoding);
    // Ended sequences give their slot back, unless kept (a failed one never is: its state may be partial).
    for (size_t i = 0; i < m.seqs.size();) {
        EngineSeq& s = *m.seqs[i];
        if (s.phase != Phase::ENDED || (s.p.keep && s.end != SequenceEnd::FAILED)) {
            ++i;
            continue;
        }
        StepEvent e = round.event(s);
        if (Status st = m.remove(i); !st.is_ok()) {  // the slot is not reused then
            e.end = SequenceEnd::FAILED;
            e.error = st.message();
            round.sink(e);
        }
    }
    m.update_gauges();
}

std::vector<StepEvent> Engine::step() {
    std::vector<StepEvent> out;
    step([&](const StepEvent& e) { out.push_back(e); });
    return out;
}

}  // namespace ember
