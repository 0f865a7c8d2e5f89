// Vocabularies for the matcher (token_index.h) from ember's tokenizers and from tiktoken BPE rank files.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "grammar/token_index.h"

namespace ember {
class Tokenizer;
}

namespace ember::grammar {

// Every id of the model's vocabulary (n_vocab ≥ the tokenizer's; padding ids have no bytes); special tokens
// get no bytes (never allowed); EOS = tok.eos_ids().
std::shared_ptr<const TokenIndex> token_index_from_tokenizer(const Tokenizer& tok, int64_t n_vocab);

// A tiktoken file ("<base64 bytes> <rank>" per line; rank = id), padded to n_vocab ids; eos as given.
Expected<std::shared_ptr<const TokenIndex>> token_index_from_tiktoken(const std::string& path, int64_t n_vocab,
                                                                      std::vector<int32_t> eos);

}  // namespace ember::grammar
