// Helpers shared by the CLI subcommands: options, token lists, errors (model loading: api/open_model.h).
#pragma once
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "api/open_model.h"  // open_model, open_tokenizer, is_gguf_path, resolve_device
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace ember::cli {

// Prints "ember <cmd>: <msg>" to stderr and returns exit code 1.
int fail(const char* cmd, const std::string& msg);
// The sampling options of generate and chat (--temp, --top-k, --top-p, --min-p, --repeat-penalty,
// --presence-penalty, --frequency-penalty, --seed), and their help lines.
SamplingParams sampling_options(class Args& a);
extern const char* const kSamplingHelp;
// The --q8-activations option of the commands that load a model, and its help line.
LoadOptions load_options(class Args& a);
extern const char* const kQ8ActivationsHelp;
// One user message formatted with the model's chat template (server::ChatFormatter), add_generation_prompt on;
// ChatML when the model has no template. thinking=false sets enable_thinking=false (Qwen templates).
Expected<std::string> format_chat(const std::string& model_path, const Tokenizer& tok, const std::string& user,
                                  bool thinking);
// "1,2,3" → ids (error on anything else).
Expected<std::vector<int32_t>> parse_token_list(const std::string& s);
std::string human_bytes(double b);

}  // namespace ember::cli
