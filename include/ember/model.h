// ember/model.h: a model loaded for the library API — the weights on a device, and the tokenizer and chat template
// the model files define. A Model is a shared handle (copies share one loaded model); engines keep it alive.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/chat.h"
#include "ember/status.h"

namespace ember {

struct ModelOptions {
    std::string device = "auto";  // "auto" (cuda when this build has it and a GPU is present), "cpu", "cuda"
    int64_t context = 4096;        // CUDA: KV-cache capacity per sequence, in tokens (the CPU holds the model's own)
    int threads = 0;               // CPU threads for the whole process (0: the default, EMBER_THREADS or all cores)
    bool q8_activations = false;   // GGUF on the CPU: llama.cpp's 8-bit activation rounding (its numerics)
    bool bf16_prefill = false;     // CUDA: one bf16 product in the prefill GEMMs (faster, approximate)
    std::string kv_cache_dtype = "auto";  // "auto" (bf16 on CUDA, f32 on the CPU), "f32", "bf16" (CUDA only)
};

class Model {
public:
    // A .gguf file or a model directory (config.json + *.safetensors, tokenizer.json when it has one).
    static Expected<Model> load(const std::string& path, const ModelOptions& opt = {});

    std::string architecture() const;
    std::string device() const;  // "cpu" or "cuda"
    int64_t vocab_size() const;
    int64_t context() const;     // tokens a sequence can hold

    bool has_tokenizer() const;  // the text functions below need one (else they return an error)
    // Prompt text → ids as `ember generate -p` makes them: special-token strings recognised, BOS added when the
    // model asks for it unless the text already starts with it.
    Expected<std::vector<int32_t>> encode(const std::string& text) const;
    Expected<std::string> decode(const std::vector<int32_t>& ids) const;
    std::vector<int32_t> eos_ids() const;  // the stop ids of a reply (empty without a tokenizer)
    // The conversation rendered with the model's chat template (ChatML when it has none), as transformers'
    // apply_chat_template does; thinking = false sets enable_thinking = false (Qwen templates).
    Expected<std::string> chat_prompt(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true,
                                      bool thinking = true) const;

    struct Impl;  // src/api/model_impl.h
    explicit Model(std::shared_ptr<const Impl> impl);
    const std::shared_ptr<const Impl>& impl() const { return impl_; }

private:
    std::shared_ptr<const Impl> impl_;
};

}  // namespace ember
