// CausalLM: what every architecture provides to the runtime (state creation, a batched forward pass).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "ops/sampling/sampling.h"

namespace ember {

// Fills a token mask (ops/sampling/token_mask.h layout) for the next selection (structured output).
using TokenMaskFn = std::function<void(uint32_t* words)>;
class GgufFile;  // io/gguf.h

// One tensor of a sequence's state (saved sessions; the layout is in models/state_io.h).
struct StateTensor {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> data;  // product(shape) fp32 values, row-major (empty in a layout from state_layout())
    int64_t numel() const {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return n;
    }
};

// Per-sequence state (KV cache, recurrent state, position). Owned by a Session.
struct ModelState {
    virtual ~ModelState() = default;
    int64_t pos = 0;  // tokens already consumed
};

// Many sequences in one pool of slots (the batched engine, CausalLM::new_batch): slot i holds one sequence's
// whole state (KV cache, recurrent state, position); a batched step advances several slots by one token each.
struct BatchState {
    virtual ~BatchState() = default;
    std::vector<int64_t> pos;  // tokens slot i has consumed (0: fresh or reset)
    int64_t slots() const { return static_cast<int64_t>(pos.size()); }
};

// A checkpoint of a slot taken by CausalLM::batch_snapshot (the prefix cache): opaque to the runtime, held where
// the model keeps it (host tensors in the generic form, device memory on CUDA).
struct SlotSnapshot {
    virtual ~SlotSnapshot() = default;
    int64_t bytes = 0;    // the memory it holds
    bool device = false;  // in device memory
};

// Facts for `ember info` and for the runtime's limits.
struct ModelInfo {
    std::string architecture;       // e.g. "qwen3_5 (Qwen3_5ForConditionalGeneration)"
    std::string source;             // path or "synthetic:NAME"
    std::string weight_format;      // "bf16", "affine 4-bit g64", ...
    int64_t vocab_size = 0, hidden_size = 0, num_layers = 0, max_context = 0;
    int64_t n_params = 0;           // language-model parameters (the embedding counted once when tied)
    int64_t weight_bytes = 0;       // bytes of weights the forward pass reads
    int64_t state_bytes = 0;        // fixed per-sequence state (recurrent layers)
    int64_t kv_bytes_per_token = 0; // growing per-sequence state (attention layers: fp32 on the CPU, bf16 by
                                    // default on CUDA)
    std::string details;            // multi-line description of layers/heads
};

// What the last forward / decode step of a state cost (for --trace and `ember bench`). CPU models leave it empty.
struct StepStats {
    int64_t kernels = 0;   // kernels the step launched (graph kernel nodes, or eager launches)
    double gpu_us = 0;     // device time between the step's first and last kernel (events), 0 if unknown
    bool graph = false;    // the step was one CUDA graph launch
};

class CausalLM {
public:
    virtual ~CausalLM() = default;
    virtual const ModelInfo& info() const = 0;
    virtual std::unique_ptr<ModelState> new_state() const = 0;
    // Acquires what the first forward on `state` would otherwise acquire on the way (the CUDA backend's device
    // buffers, stream and events), so that a timed first step measures the step; a no-op where states are ready
    // at creation. Errors as forward's (out of device memory: the numbers and what to lower).
    virtual Status reserve(ModelState& state) const { (void)state; return Status::ok(); }
    // Consumes n tokens at positions state.pos .. state.pos+n−1 and advances state.pos by n.
    // logits: [n, vocab] if all_logits, else [1, vocab] for the last token only.
    virtual Status forward(ModelState& state, const int32_t* tokens, int64_t n, float* logits,
                           bool all_logits) const = 0;

    // Optional device-side decode: consume `token` (at state.pos) and select the next token on the device, so
    // only its id crosses to the host (one host wait per token). `history` = every token of the sequence so far,
    // ending with `token` (the penalty window). Same pipeline and semantics as Sampler (ops/sampling/sampling.h);
    // the random stream differs from the CPU Sampler's. Models without it return false from
    // has_device_sampler() and the runtime samples forward()'s logits on the host.
    // mask (optional): fills the token mask of the token being selected (ops/sampling/token_mask.h layout,
    // ceil(vocab / 32) words); a device model calls it while the GPU runs the forward pass, so the mask
    // computation overlaps it, and applies the mask before the selection.
    virtual bool has_device_sampler() const { return false; }
    virtual Expected<int32_t> decode_sample(ModelState& state, int32_t token, const SamplingParams& sp,
                                            const std::vector<int32_t>& history,
                                            const TokenMaskFn* mask = nullptr) const {
        return errorf("decode_sample: this model has no device sampler");
    }
    virtual StepStats last_step_stats(const ModelState& state) const { return {}; }

    // ---- batched engine (models/batch.cpp: the generic form, one forward() per row; CUDA: one graph per step) ----
    // A pool of max_seqs sequence slots (device memory is taken when the first slot is used).
    virtual Expected<std::unique_ptr<BatchState>> new_batch(int64_t max_seqs) const;
    // Slot `slot` consumes n tokens at positions pos[slot] .. pos[slot]+n−1 (a prompt, chunked as needed);
    // logits (when not null): [vocab] of the last token.
    virtual Status batch_prefill(BatchState& b, int64_t slot, const int32_t* tokens, int64_t n, float* logits) const;
    // One step of `rows` sequences: row r < rows feeds tokens[r] to slot slots[r] (distinct slots) and
    // returns that row's next-token logits in logits[r·vocab ..] (logits: [rows, vocab]). A row's result does
    // not depend on the other rows (up to the order of fp32 sums where the row count changes the kernels).
    virtual Status batch_decode(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                                float* logits) const;
    // A mixed step (prompt chunks beside decode rows): sequence i < seqs feeds lens[i] ≥ 1 tokens to slot slots[i]
    // (distinct slots) at positions pos[slot] .. pos[slot] + lens[i] − 1; `tokens` holds them sequence after
    // sequence (Σ lens ids). logits (when not null): [seqs, vocab], row i = the logits after sequence i's last
    // token; with `want` ([seqs]) only the rows i with want[i] ≠ 0 are written (the others are left as they are,
    // and on CUDA do not cross to the host). ids (optional, [seqs]): each sequence's argmax (CUDA: on the device),
    // so a step's greedy decode rows select without their logits crossing. A sequence's result does not
    // depend on the others (as batch_decode's rows). Generic form: the one-token sequences through one
    // batch_decode, each other one through batch_prefill; the CPU decoder (models/decoder.cpp) and CUDA
    // (backend/cuda/cuda_mixed.cpp) run every row through one forward pass, each weight read once for all of them.
    // The arguments are checked before anything runs (batch_check_mixed); after a model error the slots' states
    // are undefined (reset them).
    virtual Status batch_step(BatchState& b, const int32_t* slots, const int64_t* lens, const int32_t* tokens,
                              int64_t seqs, float* logits, int32_t* ids = nullptr,
                              const uint8_t* want = nullptr) const;
    // Whether the engine runs a round's prompt chunks and decode rows as one batch_step call (false: the generic
    // form gains nothing over separate calls; the one-pass models answer their switch, off by default — not
    // measured faster yet). A model with a batch sampler gets mixed rounds only when every decode row selects
    // greedily without penalties or constraint (batch_step's ids equal batch_decode_sample's then).
    virtual bool batch_mixed() const { return false; }
    // The switch the one-pass models' batch_mixed() answers (EMBER_MIXED_STEP=1 at construction, or this).
    void set_mixed_steps(bool on) { mixed_steps_ = on; }
    // The same step with greedy selection: ids[r] = argmax of row r's logits (CUDA: on the device, one graph
    // launch and one host wait per step; only the ids cross).
    virtual Status batch_decode_greedy(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                                       int32_t* ids) const;
    // Per-row token selection on the device (has_batch_sampler()): every row samples with its own parameters,
    // seed and penalties, through the pipeline of decode_sample (ops/sampling/sampling_cuda.h). A slot's random
    // stream starts from its row's params->seed on its first sampled step after batch_reset (or when that seed
    // changes) and continues across steps, so a sequence's draws do not depend on the other rows of a step.
    // history: the sequence's tokens so far, ending with the row's token (the penalty window).
    // ids[r]: row r's selected token; logits (optional, [rows, vocab]): every row's logits before penalties
    // (for rows the caller samples on the host: logprobs), nullptr = none cross to the host.
    // masks (optional; structured output): masks[r], when not null, fills row r's token mask (token_mask.h
    // layout); a device model calls it while the GPU runs the forward pass and applies the mask on the device
    // before the row's penalties and selection (rows without one are left as they are).
    virtual bool has_batch_sampler() const { return false; }
    virtual Status batch_decode_sample(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                                       const SamplingParams* const* params,
                                       const std::vector<int32_t>* const* history, int32_t* ids,
                                       float* logits = nullptr, const TokenMaskFn* const* masks = nullptr) const {
        return errorf("batch: this model has no device sampler (use batch_decode and sample on the host)");
    }
    // Frees a slot for a new sequence: its state is cleared and pos[slot] = 0.
    virtual Status batch_reset(BatchState& b, int64_t slot) const;
    // KV memory the slots share (CUDA: a pool of pages, cuda_batch.h), for the engine's scheduling: the blocks free
    // now (−1: every slot owns memory for its whole context, nothing to schedule) and the blocks `slot` must take
    // to hold `len` tokens. A call that needs more blocks than are free fails ("the KV cache pool is full") and
    // changes nothing; batch_reset gives a slot's blocks back.
    virtual int64_t batch_kv_free(BatchState& b) const { return -1; }
    virtual int64_t batch_kv_need(const BatchState& b, int64_t slot, int64_t len) const { return 0; }
    // Snapshots of a slot (the prefix cache, runtime/prefix_cache.h), in the tensors of state_layout():
    // export: the slot's state at pos[slot], its KV tensors holding only rows [from, pos[slot]) ([n_kv, pos − from,
    // d]), the recurrent tensors whole; import: replaces the slot's state with tensors of state_layout(pos) and
    // sets pos[slot] = pos; its sampling state restarts as after batch_reset. A model with an empty
    // state_layout() cannot snapshot (an error).
    virtual Expected<std::vector<StateTensor>> batch_export_slot(BatchState& b, int64_t slot, int64_t from) const;
    virtual Status batch_import_slot(BatchState& b, int64_t slot, int64_t pos,
                                     const std::vector<StateTensor>& tensors) const;
    // The same from a chain of snapshots of `block` rows each (models/state_io.h check_state_links: link c's KV
    // tensors hold rows [c·block, (c+1)·block), the last link's recurrent tensors are the state's): the slot gets
    // the state at links.size() · block. Generic form: gathered, then batch_import_slot; CUDA: each link's rows
    // are copied straight into the slot's caches.
    virtual Status batch_import_slot_links(BatchState& b, int64_t slot, int64_t block,
                                           const std::vector<const std::vector<StateTensor>*>& links) const;
    // Checkpoints for the prefix cache, kept where the model keeps its state: snapshot = the slot's state at
    // pos[slot] with only KV rows [from, pos[slot]) (as batch_export_slot); restore = the state a chain of snapshots
    // of `block` rows each makes (as batch_import_slot_links), which must all come from this model's
    // batch_snapshot. Generic form: host tensors through those two; CUDA: copies within device memory (host
    // tensors when device memory runs out).
    virtual Expected<std::unique_ptr<SlotSnapshot>> batch_snapshot(BatchState& b, int64_t slot, int64_t from) const;
    virtual Status batch_restore_links(BatchState& b, int64_t slot, int64_t block,
                                       const std::vector<const SlotSnapshot*>& links) const;
    // A slot's random stream of batch_decode_sample (saved sequences of the engine, runtime/engine_save.cpp): the
    // seed it started from and its counter now; false: none (no batch sampler, or not started since the slot's
    // reset or import). set: the slot's next sampled step with this seed continues that stream.
    virtual bool batch_slot_rng(BatchState& b, int64_t slot, uint64_t* seed, uint64_t* counter) const { return false; }
    virtual Status batch_set_slot_rng(BatchState& b, int64_t slot, uint64_t seed, uint64_t counter) const {
        return Status::ok();
    }
    // What the last batched step cost (CUDA: kernels of its graph, GPU µs); the generic form leaves it empty.
    virtual StepStats last_batch_stats(const BatchState& b) const { return {}; }
    // Diagnostic (`ember bench --batch --profile`): a table of where one greedy step of these rows spends its
    // GPU time; the step's effects on the pool are as if it ran (callers discard the pool). CUDA only.
    virtual Expected<std::string> batch_profile(BatchState& b, const int32_t* slots, const int32_t* tokens,
                                                int64_t rows) const {
        return errorf("batch profile: only the CUDA models have one");
    }

    // ---- saved sessions (runtime/session_file.h; tensor layout: models/state_io.h) ----
    // The state tensors of a sequence at position pos (names and shapes, no data); empty: cannot save sessions.
    virtual std::vector<StateTensor> state_layout(int64_t pos) const;
    // Cheap identity of the weights (types, shapes, a few bytes of each tensor): a file from another model is refused.
    virtual uint64_t weights_fingerprint() const { return 0; }
    // The state's tensors in state_layout(state.pos) order, with their data.
    virtual Expected<std::vector<StateTensor>> export_state(const ModelState& state) const;
    // Replaces the state with tensors of state_layout(pos) (names and shapes already checked) and sets pos.
    virtual Status import_state(ModelState& state, int64_t pos, const std::vector<StateTensor>& tensors) const;
    // The device sampler's random stream (seed it started from, counter now); false: none or not started.
    virtual bool device_rng(const ModelState& state, uint64_t* seed, uint64_t* counter) const { return false; }
    virtual Status set_device_rng(ModelState& state, uint64_t seed, uint64_t counter) const { return Status::ok(); }

protected:
    bool mixed_steps_ = env_is("EMBER_MIXED_STEP", "1");  // see set_mixed_steps
};

// The checks every batched step runs (models/batch.cpp): 1 ≤ rows ≤ slots, each row's slot in range and named
// once, token ids in [0, vocab), room for one more token in each slot's context.
Status batch_check_step(const BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                        int64_t vocab, int64_t context);
// The checks of a mixed step (batch_step): 1 ≤ seqs ≤ slots, each slot in range and named once, 1 ≤ lens[i],
// room for lens[i] more tokens in the slot's context, token ids in [0, vocab).
Status batch_check_mixed(const BatchState& b, const int32_t* slots, const int64_t* lens, const int32_t* tokens,
                         int64_t seqs, int64_t vocab, int64_t context);

// The state of a slot of the generic batched form (models/batch.cpp: one ModelState of the model's own per slot,
// created on first use); an error for another model's pool or a slot outside it.
Expected<ModelState*> generic_batch_state(const CausalLM& m, BatchState& b, int64_t slot);

// How a model file is turned into a model.
struct LoadOptions {
    // GGUF block-quantized weights: round activations to 8 bits per block before each product, as llama.cpp's
    // CPU backend does (quant/ggml_act.h), to reproduce its numerics. CPU only; an error for other formats.
    bool q8_activations = false;
    // Products of the prefill GEMMs on CUDA (ops/linear/linear_gemm_q.h): "fp32" (default: x as hi + lo bf16,
    // fp32-faithful) or "bf16" (one bf16 product: faster, approximate; CUDA only).
    std::string prefill_precision = "fp32";
    // Element type of the attention KV cache: "auto" (bf16 on CUDA, fp32 on the CPU), "f32" or "bf16" (CUDA only:
    // half the memory; the CPU cache is fp32).
    std::string kv_cache_dtype = "auto";
};

// Loads a model from a directory (config.json + *.safetensors) or a .gguf file — the registry picks the
// architecture.
Expected<std::unique_ptr<CausalLM>> load_model(const std::string& path, const LoadOptions& opt = {});
// The GGUF half of load_model, from a file already opened (GgufFile::open or GgufFile::from_bytes).
Expected<std::unique_ptr<CausalLM>> load_gguf_model(std::shared_ptr<const GgufFile> f, const LoadOptions& opt = {});
// Random weights of a real configuration ("qwen3.5-2b", ...), 4-bit affine g64, for benchmarks.
Expected<std::unique_ptr<CausalLM>> make_synthetic_model(const std::string& name, uint64_t seed = 1);

}  // namespace ember
