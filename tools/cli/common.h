// Helpers shared by the CLI subcommands: model loading (path or --synthetic), token lists, errors.
#pragma once
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace ember::cli {

// Prints "ember <cmd>: <msg>" to stderr and returns exit code 1.
int fail(const char* cmd, const std::string& msg);
// Loads -m PATH, or builds --synthetic NAME (exactly one of them must be given), on `device`:
// "cpu", "cuda", or "auto" (cuda when this build has it and a GPU is present; cpu with load.q8_activations,
// which runs on the CPU only).
Expected<std::unique_ptr<CausalLM>> open_model(const std::string& path, const std::string& synthetic,
                                               const std::string& device = "auto", int64_t context = 4096,
                                               const LoadOptions& load = {});
// The sampling options of generate and chat (--temp, --top-k, --top-p, --min-p, --repeat-penalty,
// --presence-penalty, --frequency-penalty, --seed), and their help lines.
SamplingParams sampling_options(class Args& a);
extern const char* const kSamplingHelp;
// The --q8-activations option of the commands that load a model, and its help line.
LoadOptions load_options(class Args& a);
extern const char* const kQ8ActivationsHelp;
// The tokenizer of a model path: tokenizer.json of a directory, or a .gguf file's metadata; nullptr when the
// model has none (a directory without tokenizer.json, or a synthetic model: path "").
Expected<std::unique_ptr<Tokenizer>> open_tokenizer(const std::string& model_path);
bool is_gguf_path(const std::string& path);
// One user message formatted with the model's chat template (server::ChatFormatter), add_generation_prompt on;
// ChatML when the model has no template. thinking=false sets enable_thinking=false (Qwen templates).
Expected<std::string> format_chat(const std::string& model_path, const Tokenizer& tok, const std::string& user,
                                  bool thinking);
// The device "auto" resolves to.
std::string resolve_device(const std::string& device);
// "1,2,3" → ids (error on anything else).
Expected<std::vector<int32_t>> parse_token_list(const std::string& s);
std::string human_bytes(double b);

}  // namespace ember::cli
