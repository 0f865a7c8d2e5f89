// gguf_pre.h: pre-tokenizer presets for GGUF byte-level BPE vocabularies, by tokenizer.ggml.pre name.
// Each preset is the list of regexes llama.cpp applies in turn (llama-vocab.cpp llm_tokenizer_bpe; each regex
// splits every piece the previous one produced, keeping matches and the text between them), followed by the
// byte-level mapping, plus the per-name flags llama.cpp sets (ignore_merges, add_bos default).
// The regex strings are data taken from llama.cpp; gpt-2's "\s+(?!\S)" gets the trailing "|\s+" that
// llama.cpp's hand-written GPT-2 matcher implies.
#pragma once
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/pretokenize.h"

namespace ember {

struct GgufPrePreset {
    std::vector<std::string> regexes;
    bool ignore_merges = false;  // a pre-token that is itself in the vocab is emitted as one token
    bool add_bos = false;        // default for tokenizer.ggml.add_bos_token when the key is absent
};

// The preset for `pre`; "" is "default" (as in llama.cpp). Unknown names give an error listing the supported ones.
Expected<GgufPrePreset> gguf_pre_preset(const std::string& pre);
// Comma-separated supported names.
std::string gguf_pre_names();
// The PreTokenizer of a preset: Split(regex, Isolated) for each regex, then ByteLevel without regex.
Expected<PreTokenizer> gguf_pre_tokenizer(const GgufPrePreset& preset);

}  // namespace ember
