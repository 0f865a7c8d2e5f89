// CausalLM: what every architecture provides to the runtime (state creation, a batched forward pass).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace ember {

// Per-sequence state (KV cache, recurrent state, position). Owned by a Session.
struct ModelState {
    virtual ~ModelState() = default;
    int64_t pos = 0;  // tokens already consumed
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
    int64_t kv_bytes_per_token = 0; // growing per-sequence state (attention layers, fp32 on CPU)
    std::string details;            // multi-line description of layers/heads
};

class CausalLM {
public:
    virtual ~CausalLM() = default;
    virtual const ModelInfo& info() const = 0;
    virtual std::unique_ptr<ModelState> new_state() const = 0;
    // Consumes n tokens at positions state.pos .. state.pos+n−1 and advances state.pos by n.
    // logits: [n, vocab] if all_logits, else [1, vocab] for the last token only.
    virtual Status forward(ModelState& state, const int32_t* tokens, int64_t n, float* logits,
                           bool all_logits) const = 0;
};

// Loads a model from a directory (config.json + *.safetensors) — the registry picks the architecture.
Expected<std::unique_ptr<CausalLM>> load_model(const std::string& path);
// Random weights of a real configuration ("qwen3.5-2b", ...), 4-bit affine g64, for benchmarks.
Expected<std::unique_ptr<CausalLM>> make_synthetic_model(const std::string& name, uint64_t seed = 1);

}  // namespace ember
