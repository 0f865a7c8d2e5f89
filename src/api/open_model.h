// open_model.h: a model path (or a synthetic name) → a CausalLM on a device, and the tokenizer of the path — what
// the CLI commands, `ember serve` and the library's Model::load (ember/model.h) share.
#pragma once
#include <memory>
#include <string>

#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace ember {

// Loads PATH, or builds the synthetic model NAME (exactly one of them must be given), on `device`: "cpu", "cuda",
// or "auto" (cuda when this build has it and a GPU is present; cpu with load.q8_activations, which runs on the
// CPU only). context: the CUDA KV-cache capacity per sequence.
Expected<std::unique_ptr<CausalLM>> open_model(const std::string& path, const std::string& synthetic,
                                               const std::string& device = "auto", int64_t context = 4096,
                                               const LoadOptions& load = {});
// The tokenizer of a model path: tokenizer.json of a directory, or a .gguf file's metadata; nullptr when the
// model has none (a directory without tokenizer.json, or a synthetic model: path "").
Expected<std::unique_ptr<Tokenizer>> open_tokenizer(const std::string& model_path);
bool is_gguf_path(const std::string& path);
// The device "auto" resolves to.
std::string resolve_device(const std::string& device);

}  // namespace ember
