// ember/engine.h: the batched engine — many sequences advanced together, one round per step().
//
// An Engine holds a pool of max_sequences slots of one model (KV cache, recurrent state and position per
// sequence). add() puts a sequence (its prompt, how to select tokens, its limits) into a free slot; each step()
// runs one round over every live sequence: a prefill chunk (prefill_chunk tokens) of each sequence still in its
// prompt — the last chunk selects the first token — then ONE batched decode step of all the others (on CUDA one
// graph launch, each row selecting its token on the device with its own parameters, seed, penalties and token mask
// — a constraint's mask is filled on the CPU while the GPU runs the step's forward —, unless it asked for logits or
// logprobs: then on the host from its logits). When the model runs prompt chunks beside decode rows in one pass
// (CUDA; the CPU decoders when EMBER_MIXED_STEP=1), a round with both is one model call, as long as every decode
// row selects greedily without penalties or constraint (CUDA) — each weight is then read once per round. A
// sequence's tokens do not depend on what else is in the batch. A sequence ends at a stop id (EOS), when its constraint is done (COMPLETE), after
// max_tokens or when the context is full (LENGTH); its slot is then free for the next add(), unless it asked to be
// kept (for save(), extend(), or reading it: then cancel() frees it).
// When the slots share a pool of KV memory (CUDA) that cannot hold every sequence at once, decoding sequences go
// first: the sequence admitted last is preempted (its state dropped, recomputed from its tokens later: the same
// tokens up to the prefill path's rounding, sampling streams continued), and a prompt chunk that does not fit
// waits for a later step.
//
// Not thread-safe: one thread drives an Engine (the server's queue, src/server/queue.h, is the thread-safe
// wrapper). Errors are Status / Expected values; nothing throws.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ember/constraint.h"
#include "ember/sampling.h"
#include "ember/status.h"

namespace ember {

class Model;  // ember/model.h

struct EngineOptions {
    int max_sequences = 4;        // slots: sequences advanced together
    int64_t prefill_chunk = 256;  // prompt tokens per sequence per step (a long prompt does not stall the others)
    // Host memory of the exact prefix cache (checkpoints every prefill_chunk tokens); 0 = off. A prompt starting
    // with a cached prefix is computed from its deepest checkpoint, with the same result as without the cache.
    int64_t prefix_cache_bytes = 0;
};

using SequenceId = int64_t;  // > 0, never reused by an engine

struct SequenceParams {
    std::vector<int32_t> prompt;   // token ids, each in [0, vocab); at least one (extend() / restore(): may be empty)
    int64_t max_tokens = 16;       // tokens to generate (0: only consume the prompt)
    SamplingParams sampling;       // temperature 0: greedy
    std::vector<int32_t> stop_ids;  // end-of-sequence ids: generation stops there (the id is not emitted)
    int top_logprobs = -1;          // ≥ 0: each token's log-probability and the top_logprobs most likely
    bool logits = false;            // each event with a token carries the logits it was selected from
    // Structured output: every token is selected under its mask; the sequence ends when it is done().
    std::shared_ptr<TokenConstraint> constraint;
    bool keep = false;  // keep the slot and state after the sequence ends (save, extend); cancel() frees it
};

struct GeneratedToken {
    int32_t id = 0;
    float logprob = 0;                           // when SequenceParams::top_logprobs ≥ 0
    std::vector<std::pair<int32_t, float>> top;  // the top_logprobs most likely (id, logprob), most likely first
};

// How a sequence ended. EOS: a stop id was selected (not emitted); COMPLETE: its constraint allows nothing more.
enum class SequenceEnd { RUNNING, EOS, COMPLETE, LENGTH, CANCELLED, FAILED };

// What one step did to one sequence: a new token, its end, or both (the end comes after the token).
struct StepEvent {
    SequenceId id = 0;
    bool has_token = false;
    GeneratedToken token;         // when has_token
    std::vector<float> logits;    // [vocab]: the logits `token` was selected from (SequenceParams::logits; with
                                  // max_tokens 0: the prompt's last position)
    SequenceEnd end = SequenceEnd::RUNNING;
    std::string error;            // FAILED: why
    int64_t cached_tokens = 0;    // prompt tokens restored from the prefix cache
};

struct SequenceInfo {
    int64_t position = 0;        // tokens consumed (its state covers them)
    int64_t generated = 0;       // tokens selected since add() / extend() / restore()
    int64_t cached_tokens = 0;   // prompt tokens restored from the prefix cache
    SequenceEnd end = SequenceEnd::RUNNING;  // ≠ RUNNING: a kept sequence that ended
    std::vector<int32_t> tokens;  // every token: consumed, then the pending one (selected, not consumed yet)
};

// Totals since the engine was made (counters) and the pool now (gauges).
struct EngineStats {
    int64_t model_calls = 0, model_ns = 0;   // prefill chunks and batched decode steps, and the time inside them
    int64_t prompt_tokens = 0;               // prompt tokens consumed (cached ones included)
    int64_t cached_prompt_tokens = 0;        // ... of them restored from the prefix cache
    int64_t generated_tokens = 0;            // tokens selected (stop ids included)
    // A pool of KV memory shared by the slots (CUDA) that cannot hold every sequence's next tokens: sequences whose
    // prompt chunk did not fit wait (waits: sequence-steps spent so), and when decoding sequences need more, the one
    // admitted last is preempted (its state dropped) and later recomputes its tokens (recomputed_tokens).
    int64_t kv_waits = 0, preemptions = 0, recomputed_tokens = 0;
    int64_t prefix_cache_lookups = 0, prefix_cache_hits = 0, prefix_cache_evicted = 0;
    int64_t prefix_cache_entries = 0, prefix_cache_bytes = 0, prefix_cache_budget_bytes = 0;  // 0: off
    int64_t prefix_cache_restore_ns = 0, prefix_cache_checkpoint_ns = 0;  // state copies in and out of the slots
    int64_t live = 0;                 // sequences holding a slot (running or kept)
    int64_t kv_tokens = 0, kv_bytes = 0, state_bytes = 0;  // what they hold
};

class Engine {
public:
    // The pool of opt.max_sequences slots of `model` (the engine keeps the model alive: Model is a shared handle).
    static Expected<Engine> create(const Model& model, const EngineOptions& opt = {});

    // A new sequence in a free slot. Errors: no free slot, no prompt, a token outside the vocabulary, a prompt
    // longer than the context, bad limits or sampling parameters.
    Expected<SequenceId> add(SequenceParams params);
    // One round over every live sequence (see above). on_event is called for each sequence that got a token or
    // ended, as soon as it did (it must not call this engine); ended sequences that are not kept give their slot
    // back at the end of the step.
    void step(const std::function<void(const StepEvent&)>& on_event);
    std::vector<StepEvent> step();  // the same, collecting the events
    // Stops the sequence (running or kept) and frees its slot now.
    Status cancel(SequenceId id);
    // A kept sequence that has ended continues: params.prompt is appended after its pending token (the token it
    // selected last), then it generates as add() would (params replace the old ones; the same seed continues the
    // sampling streams).
    Status extend(SequenceId id, SequenceParams params);
    // Saves a sequence (running between steps with its prompt consumed, or kept) to a file: its tokens, state
    // (KV rows, recurrent state) and sampling streams (the ember generate --save-session format).
    Status save(SequenceId id, const std::string& path) const;
    // A new sequence from a saved file, continuing it: params.prompt is appended after the saved pending token;
    // with the same seed it continues exactly as the saved sequence would have. Errors: a file of another model,
    // truncated or corrupted, nothing to consume (no pending token and no prompt), no free slot.
    Expected<SequenceId> restore(const std::string& path, SequenceParams params);

    Expected<SequenceInfo> info(SequenceId id) const;
    int live() const;        // sequences holding a slot
    int running() const;     // ... that have not ended (step() advances them)
    int free_slots() const;  // add() / restore() succeed while > 0
    int64_t vocab_size() const;
    int64_t context() const;  // tokens a sequence can hold
    EngineStats stats() const;

    struct Impl;  // src/runtime/engine_impl.h
    explicit Engine(std::unique_ptr<Impl> impl);
    Engine(Engine&&) noexcept;
    Engine& operator=(Engine&&) noexcept;
    ~Engine();

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace ember
