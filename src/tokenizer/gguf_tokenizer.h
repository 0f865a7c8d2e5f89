// The tokenizer stored in a GGUF file's metadata (tokenizer.ggml.*) and its chat template.
#pragma once
#include <string>

#include "core/status.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace ember {

// tokenizer.ggml.{model, pre, tokens, token_type, merges, bos/eos/eot/eom/padding/unknown_token_id,
// add_bos_token, add_eos_token} → Tokenizer::from_gguf_vocab. Errors name the file and the key.
Expected<Tokenizer> tokenizer_from_gguf(const GgufFile& f);
// tokenizer.chat_template, or "" when the file has none.
Expected<std::string> chat_template_from_gguf(const GgufFile& f);

}  // namespace ember
