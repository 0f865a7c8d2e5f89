// engine_step.cpp: Engine::step — one round over the live sequences: a prefill chunk of each sequence still in its
// prompt (the last chunk selects its first token on the host), then one batched decode step of all the others
// (selection per row on the device when the model has a batch sampler and the row needs no host logits — a
// constrained row's token mask is filled while the GPU runs the forward and applied there —, else on the host
// with the row's own Sampler and constraint); prefix-cache lookups and checkpoints; the ends. When the model asks
// for mixed rounds (CausalLM::batch_mixed: off by default; the CPU decoders and CUDA with EMBER_MIXED_STEP=1), a
// round's prompt chunks and decode rows run as one call (batch_step) — on the CPU every row selecting on the host,
// on CUDA only when every decode row is a greedy device row (its argmax from the pass); the rest is the same.
//
// KV pool scheduling (a model whose slots share their KV memory: CausalLM::batch_kv_free ≥ 0). Decode rows come
// first: while the pool cannot give every decoding sequence the blocks of its next token, the sequence admitted
// last that holds blocks is preempted — its state dropped (batch_reset; its device sampling stream kept), to be
// recomputed from its tokens as a prefill, after which it decodes its pending token again. Prompt chunks then run
// in admission order while they fit beside the decode rows' blocks; the first that does not fit waits, and so do
// the ones after it (first come, first served). When nothing could run at all, the sequence admitted last that
// holds blocks (not the first waiting one) is preempted too, or, when no running sequence holds any (kept ones
// hold the pool), the first waiting sequence fails with the numbers.
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

    // KV pool scheduling (above): the blocks held back for this step's decode rows (−1: no pool to schedule),
    // whether a prompt chunk has waited this step (the ones after it wait too).
    int64_t reserve = -1;
    bool waiting = false;
    int64_t planned = 0;  // blocks of prompt chunks started and not run yet (a mixed step runs them together)
    int64_t room() const { return m.model.batch_kv_free(*m.batch) - reserve - planned; }
    int64_t longest_fit(const EngineSeq& s, int64_t end_at, int64_t blocks) const;
    void make_room();
    EngineSeq* last_holder(const EngineSeq* except) const;
    void preempt(EngineSeq& s);
    void unstick(EngineSeq& first_waiting);
    void count_prompt(const EngineSeq& s, int64_t at, int64_t n, bool cached);

    void checkpoint(EngineSeq& s);
    // A prompt chunk to run: tokens [at, at + n) of s (n = 0: none, the sequence ended); final: the prompt's last,
    // want: its logits select the first token.
    struct Chunk {
        EngineSeq* s = nullptr;
        int64_t at = 0, n = 0;
        bool final = false, want = false;
    };
    bool start_chunk(EngineSeq& s, Chunk& c);
    void finish_chunk(const Chunk& c, const Status& st, const float* logits);
    bool prefill_chunk(EngineSeq& s);
    std::vector<EngineSeq*> decode_rows(const std::vector<EngineSeq*>& in);
    void finish_rows(const std::vector<EngineSeq*>& rows, const Status& st, const int32_t* ids, const float* logits,
                     const std::vector<char>& no_token);
    void decode_step(const std::vector<EngineSeq*>& rows);
    void mixed_step(const std::vector<Chunk>& chunks, const std::vector<EngineSeq*>& rows, bool device_ids);
    void select(EngineSeq& s, const float* logits);
    void emit(EngineSeq& s, const float* logits, int32_t id);
};

// Offers the slot's state to the prefix cache (it keeps block boundaries whose chain it holds).
void Round::checkpoint(EngineSeq& s) {
    if (!m.cache) return;
    if (Status st = m.cache->offer(*m.batch, s.slot, s.tokens.data()); !st.is_ok()) end(s, SequenceEnd::FAILED, st.message());
}

// Tokens [at, at + n) consumed by a prefill (cached: restored from the prefix cache): prompt tokens, or recomputed
// ones below what the sequence had consumed before it was preempted.
void Round::count_prompt(const EngineSeq& s, int64_t at, int64_t n, bool cached) {
    const int64_t again = std::clamp<int64_t>(s.high - at, 0, n);
    m.stats.recomputed_tokens += again;
    m.stats.prompt_tokens += n - again;
    if (cached) m.stats.cached_prompt_tokens += n - again;
}

// The longest length in [pos, end_at] that `s` can hold taking at most `blocks` more KV blocks.
int64_t Round::longest_fit(const EngineSeq& s, int64_t end_at, int64_t blocks) const {
    int64_t lo = pos(s), hi = end_at;
    while (lo < hi) {
        const int64_t mid = hi - (hi - lo) / 2;
        if (m.model.batch_kv_need(*m.batch, s.slot, mid) <= blocks) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// Holds back the blocks of every decode row's next token, preempting the sequences admitted last until they fit.
void Round::make_room() {
    int64_t free = m.model.batch_kv_free(*m.batch);
    if (free < 0) return;  // every slot owns its whole context
    for (;;) {
        int64_t need = 0;
        for (const auto& s : m.seqs)
            if (s->phase == Phase::DECODE) need += m.model.batch_kv_need(*m.batch, s->slot, pos(*s) + 1);
        if (need <= free) {
            reserve = need;
            return;
        }
        EngineSeq* victim = last_holder(nullptr);  // (never null: a decoding sequence holds its blocks)
        if (!victim) return;
        preempt(*victim);
        free = m.model.batch_kv_free(*m.batch);
    }
}

// The running sequence admitted last that holds KV blocks (state at pos > 0), other than `except`; null if none.
EngineSeq* Round::last_holder(const EngineSeq* except) const {
    for (auto it = m.seqs.rbegin(); it != m.seqs.rend(); ++it)
        if (it->get() != except && (*it)->phase != Phase::ENDED && pos(**it) > 0) return it->get();
    return nullptr;
}

// Drops the sequence's state; it is recomputed from its tokens (prefill_chunk) when its blocks fit again.
void Round::preempt(EngineSeq& s) {
    uint64_t seed = 0, counter = 0;
    const bool rng = m.model.batch_slot_rng(*m.batch, s.slot, &seed, &counter);
    s.high = std::max(s.high, pos(s));
    if (Status st = m.model.batch_reset(*m.batch, s.slot); !st.is_ok()) return end(s, SequenceEnd::FAILED, st.message());
    if (rng) {
        if (Status st = m.model.batch_set_slot_rng(*m.batch, s.slot, seed, counter); !st.is_ok())
            return end(s, SequenceEnd::FAILED, st.message());
    }
    s.recompute = s.recompute || s.phase == Phase::DECODE;
    s.phase = Phase::PREFILL;
    s.fresh = true;
    m.stats.preemptions++;
}

// Nothing ran this step and `first` waits for blocks: the sequence admitted last that holds blocks gives them up,
// or, when only kept (ended) sequences and `first` itself hold the pool, `first` cannot run and fails.
void Round::unstick(EngineSeq& first) {
    if (EngineSeq* v = last_holder(&first)) return preempt(*v);
    const int64_t at = pos(first), n = std::min(m.opt.prefill_chunk, int64_t(first.tokens.size()) - at);
    end(first, SequenceEnd::FAILED,
        strfmt("the KV cache pool is full: a prompt chunk at %lld tokens needs %lld more blocks, %lld are free and "
               "the rest are held by sequences kept after their end (cancel them, or lower --max-seqs or --ctx-size)",
               (long long)(at + n), (long long)m.model.batch_kv_need(*m.batch, first.slot, at + n),
               (long long)m.model.batch_kv_free(*m.batch)));
}

// Starts the next prompt chunk of `s` (or of its recompute after a preemption): the prefix cache on its first,
// the KV blocks it needs counted as planned; false: it waits for KV blocks (nothing done).
bool Round::start_chunk(EngineSeq& s, Chunk& c) {
    c = Chunk{&s};
    const bool sched = reserve >= 0;
    if (sched && waiting) {
        m.stats.kv_waits++;
        return false;
    }
    const int64_t end_at = int64_t(s.tokens.size()) - (s.recompute ? 1 : 0);
    if (s.fresh && m.cache) {  // the deepest cached prefix of the prompt (that fits), then the rest chunk by chunk
        const int64_t n = sched ? std::min(end_at, longest_fit(s, end_at, room()) + 1) : end_at;
        auto got = m.cache->restore(*m.batch, s.slot, s.tokens.data(), n);
        if (!got.is_ok()) {
            end(s, SequenceEnd::FAILED, got.message());
            return true;
        }
        if (s.high == 0) s.cached_tokens = got.value();
        count_prompt(s, 0, got.value(), true);
    }
    s.fresh = false;
    const int64_t at = pos(s);
    const int64_t n = std::min(m.opt.prefill_chunk, end_at - at);
    if (sched) {
        const int64_t need = m.model.batch_kv_need(*m.batch, s.slot, at + n);
        if (need > room()) {
            waiting = true;
            m.stats.kv_waits++;
            return false;
        }
        planned += need;
    }
    c.at = at;
    c.n = n;
    c.final = at + n == end_at;
    c.want = c.final && !s.recompute;
    return true;
}

// What follows a chunk's model call (st: its status; logits: its last row's, when asked for): the counts, the
// checkpoint, and after the prompt's last chunk the first token.
void Round::finish_chunk(const Chunk& c, const Status& st, const float* logits) {
    EngineSeq& s = *c.s;
    const int64_t V = m.model.info().vocab_size;
    if (!st.is_ok()) return end(s, SequenceEnd::FAILED, st.message());
    count_prompt(s, c.at, c.n, false);
    checkpoint(s);
    if (!c.final || s.phase == Phase::ENDED) return;
    if (s.recompute) {  // back where it was preempted: the pending token is the next decode row
        s.recompute = false;
        s.phase = Phase::DECODE;
        return;
    }
    if (!finite_row(logits, V)) return end(s, SequenceEnd::FAILED, "the model produced non-finite logits (broken weights?)");
    if (s.p.max_tokens == 0) {  // only the prompt: its last logits when asked, and the end
        s.phase = Phase::ENDED;
        s.end = SequenceEnd::LENGTH;
        StepEvent e = event(s);
        e.end = s.end;
        if (s.p.logits) e.logits.assign(logits, logits + V);
        sink(e);
        return;
    }
    select(s, logits);
}

// One prompt chunk of `s` in a call of its own; false: it waits for KV blocks (nothing done).
bool Round::prefill_chunk(EngineSeq& s) {
    Chunk c;
    if (!start_chunk(s, c)) return false;
    if (c.n == 0) return true;
    m.logits.resize(size_t(m.model.info().vocab_size));
    const Status st = timed([&] {
        return m.model.batch_prefill(*m.batch, s.slot, s.tokens.data() + c.at, c.n, c.want ? m.logits.data() : nullptr);
    });
    planned = 0;  // its blocks are taken now (or, after an error, were not)
    finish_chunk(c, st, m.logits.data());
    return true;
}

// The decode rows that run: a full context ends that sequence (as a length limit), not the step.
std::vector<EngineSeq*> Round::decode_rows(const std::vector<EngineSeq*>& in) {
    const int64_t ctx = m.model.info().max_context;
    std::vector<EngineSeq*> rows;
    for (EngineSeq* s : in) {
        if (ctx > 0 && pos(*s) + 1 > ctx) end(*s, SequenceEnd::LENGTH);
        else rows.push_back(s);
    }
    return rows;
}

void Round::decode_step(const std::vector<EngineSeq*>& rows_in) {
    const int64_t V = m.model.info().vocab_size;
    const std::vector<EngineSeq*> rows = decode_rows(rows_in);
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
    finish_rows(rows, st, ids.data(), m.logits.data(), no_token);
}

// After a decode step (st: its status; ids: the device rows' selections; logits: [rows, vocab] of the host rows;
// no_token[r]: row r's constraint allowed nothing, empty: none): checkpoints, then each row's token.
void Round::finish_rows(const std::vector<EngineSeq*>& rows, const Status& st, const int32_t* ids,
                        const float* logits, const std::vector<char>& no_token) {
    const int64_t V = m.model.info().vocab_size, R = int64_t(rows.size());
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
            if (!no_token.empty() && no_token[size_t(r)]) end(s, SequenceEnd::FAILED, no_token_message(*s.p.constraint));
            else emit(s, nullptr, ids[size_t(r)]);
            continue;
        }
        const float* row = logits + r * V;
        if (!finite_row(row, V)) {
            end(s, SequenceEnd::FAILED, "the model produced non-finite logits (broken weights?)");
            continue;
        }
        select(s, row);
    }
}

// Prompt chunks and decode rows in one model call (CausalLM::batch_mixed). device_ids: the decode rows are
// greedy device rows (no penalties, no constraint) and take the model's argmax; else every row selects on the host.
// The chunks' logits cross to the host only for the prompts' last chunks.
void Round::mixed_step(const std::vector<Chunk>& chunks, const std::vector<EngineSeq*>& rows_in, bool device_ids) {
    const std::vector<EngineSeq*> rows = decode_rows(rows_in);
    const int64_t V = m.model.info().vocab_size, C = int64_t(chunks.size()), S = C + int64_t(rows.size());
    if (S == 0) return;
    std::vector<int32_t> slots, tokens, ids(size_t(S), -1);
    std::vector<int64_t> lens;
    std::vector<uint8_t> want;
    for (const Chunk& c : chunks) {
        slots.push_back(c.s->slot);
        lens.push_back(c.n);
        want.push_back(c.want ? 1 : 0);
        tokens.insert(tokens.end(), c.s->tokens.begin() + c.at, c.s->tokens.begin() + c.at + c.n);
    }
    for (EngineSeq* s : rows) {
        slots.push_back(s->slot);
        lens.push_back(1);
        want.push_back(device_ids ? 0 : 1);
        tokens.push_back(s->tokens.back());  // the pending token
    }
    m.logits.resize(size_t(S * V));
    const Status st = timed([&] {
        return m.model.batch_step(*m.batch, slots.data(), lens.data(), tokens.data(), S, m.logits.data(),
                                  device_ids ? ids.data() : nullptr, want.data());
    });
    planned = 0;
    for (int64_t i = 0; i < C; ++i) finish_chunk(chunks[size_t(i)], st, m.logits.data() + i * V);
    finish_rows(rows, st, ids.data() + C, m.logits.data() + C * V, {});
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
    round.make_room();
    // Mixed: the prompt chunks and the decode rows in one call (a model that runs them as one pass: the CPU
    // decoders, rows selected on the host; CUDA when every decode row is a greedy device row without penalties or
    // constraint, which takes the device argmax of the mixed pass); else each chunk in a call of its own, then the
    // decode rows.
    const bool sampler = m.model.has_batch_sampler();
    bool mixed = m.model.batch_mixed();
    for (const auto& s : m.seqs)
        if (sampler && s->phase == Phase::DECODE)
            mixed = mixed && s->device && sampling_is_greedy(s->p.sampling) &&
                    !sampling_has_penalties(s->p.sampling) && !s->p.constraint;
    std::vector<EngineSeq*> decoding;
    std::vector<Round::Chunk> chunks;
    EngineSeq* first_waiting = nullptr;
    bool ran = false;
    for (auto& s : m.seqs) {
        if (s->phase == Phase::PREFILL) {
            Round::Chunk c;
            const bool went = mixed ? round.start_chunk(*s, c) : round.prefill_chunk(*s);
            if (mixed && went && c.n > 0) chunks.push_back(c);
            ran = ran || went;
            if (!went && !first_waiting) first_waiting = s.get();
        } else if (s->phase == Phase::DECODE) {
            decoding.push_back(s.get());
        }
    }
    if (!chunks.empty()) round.mixed_step(chunks, decoding, sampler);  // (only a mixed round has them)
    else if (!decoding.empty()) round.decode_step(decoding);
    if (decoding.empty() && first_waiting && !ran) round.unstick(*first_waiting);
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
