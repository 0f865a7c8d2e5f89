// api/model_impl.h: what is behind ember::Model (include/ember/model.h) — the loaded CausalLM, and the tokenizer
// and chat template of its files (absent for a model without a tokenizer).
#pragma once
#include <memory>
#include <string>

#include "ember/model.h"
#include "models/model.h"
#include "server/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace ember {

struct Model::Impl {
    std::string path;
    std::string device;  // "cpu" or "cuda"
    std::unique_ptr<CausalLM> lm;
    std::unique_ptr<Tokenizer> tok;             // null: the model files have none
    std::unique_ptr<server::ChatFormatter> chat;  // with tok
};

}  // namespace ember
