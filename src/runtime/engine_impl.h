// runtime/engine_impl.h: what is behind ember::Engine (include/ember/engine.h) — the batch pool of one CausalLM,
// its sequences and the prefix cache. engine.cpp: admission, cancellation, queries; engine_step.cpp: the round
// (prefill chunks, one batched decode step, token selection); engine_save.cpp: save / restore / extend.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ember/engine.h"
#include "models/model.h"
#include "ops/sampling/sampling.h"
#include "runtime/prefix_cache.h"

namespace ember {

// One sequence in its slot. tokens = the consumed ones [0, pos[slot]), then those still to consume: the rest of the
// prompt (PREFILL) or the pending token, selected and not consumed yet (DECODE; ENDED: 0 or 1 of it).
struct EngineSeq {
    enum class Phase { PREFILL, DECODE, ENDED };
    SequenceId id = 0;
    SequenceParams p;
    int32_t slot = -1;
    Phase phase = Phase::PREFILL;
    bool device = false;  // decode steps select on the device (batch_decode_sample), else on the host
    std::unique_ptr<Sampler> sampler;  // host selections (the first token always; every token of a host row)
    std::vector<int32_t> tokens;       // also the penalty window and the prefix cache's key
    int64_t generated = 0;             // selections since add / extend / restore (stop ids included)
    int64_t cached_tokens = 0;
    bool fresh = true;                 // nothing consumed yet: the first prefill chunk asks the prefix cache
    // Preempted (engine_step.cpp): the state was dropped; `high` tokens had been consumed. A preempted decoding
    // sequence recomputes tokens[0, size − 1) as a prefill (recompute), then decodes its pending token again.
    bool recompute = false;
    int64_t high = 0;
    SequenceEnd end = SequenceEnd::RUNNING;
    std::vector<uint32_t> mask;        // the constraint's mask row
};

struct Engine::Impl {
    Impl(const CausalLM& m, const EngineOptions& o) : model(m), opt(o) {}
    const CausalLM& model;
    std::shared_ptr<const void> keep_alive;  // owner of `model` (a Model's handle), or null: the caller owns it
    EngineOptions opt;
    std::unique_ptr<BatchState> batch;
    std::unique_ptr<PrefixCache> cache;               // null when off
    std::vector<std::unique_ptr<EngineSeq>> seqs;     // live sequences, in admission order
    enum SlotUse : char { SLOT_FREE, SLOT_USED, SLOT_BROKEN };  // BROKEN: its reset failed, never reused
    std::vector<SlotUse> slots;
    SequenceId next_id = 1;
    EngineStats stats;
    std::vector<float> logits;  // a step's host logits [rows, vocab]

    EngineSeq* find(SequenceId id) const;
    Expected<int32_t> take_slot();
    // Resets the slot of seqs[i] and removes it (a failed reset leaves the slot out of use).
    Status remove(size_t i);
    // Checks params for a sequence that will hold `held` tokens before its prompt (add: 0).
    Status check_params(const SequenceParams& p, int64_t held) const;
    // A sequence with these parameters in `slot`, consuming `tokens` from position `pos` (sampler seeded by them).
    EngineSeq& admit(SequenceParams p, int32_t slot, std::vector<int32_t> tokens, int64_t pos);
    // Whether a sequence with these parameters selects its decode tokens on the device (batch_decode_sample): the
    // model has a batch sampler and the host needs none of its logits (logprobs or logits asked for; a constraint's
    // token mask is applied on the device).
    bool device_rows(const SequenceParams& p) const;
    // Where a sequence whose state covers `pos` of its tokens starts: one pending token after a consumed prefix is
    // a decode row (as in the uninterrupted run), anything else a prefill.
    static EngineSeq::Phase start_phase(const EngineSeq& s, int64_t pos);
    void update_gauges();
};

// An engine over a model the caller owns (the server, tests with their own CausalLM); keep_alive: held until the
// engine is gone.
Expected<Engine> make_engine(const CausalLM& model, const EngineOptions& opt,
                             std::shared_ptr<const void> keep_alive = nullptr);

}  // namespace ember
