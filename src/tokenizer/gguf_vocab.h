// gguf_vocab.h: the tokenizer metadata of a GGUF file as plain data, independent of any GGUF reader.
// A reader fills it from the keys tokenizer.ggml.{model, pre, tokens, token_type, merges, bos_token_id,
// eos_token_id, eot_token_id, eom_token_id, padding_token_id, unknown_token_id, add_bos_token, add_eos_token};
// Tokenizer::from_gguf_vocab (tokenizer.h) builds the tokenizer from it with llama.cpp's semantics
// (llama-vocab.cpp, BPE vocabularies):
//   - tokenizer.ggml.model "gpt2" (byte-level BPE) and "llama" (SentencePiece BPE with scores and byte fallback,
//     spm.h: spaces escaped to U+2581, a space prefix on text fragments at the start or after a special token
//     when add_space_prefix, BOS added by default); other models are errors;
//   - gpt2: `pre` picks the pre-tokenizer regexes (gguf_pre.h lists the supported names; "" means "default");
//   - control (3) and unknown (2) tokens are matched in the text only when encoding with parse_special,
//     user-defined (4) tokens always, longest first (special_split.h); no Unicode normalization is applied;
//   - decoding: normal tokens are byte-level decoded (llama: U+2581 back to spaces, also in user-defined
//     tokens; no space is stripped from the first token), control/unknown/user-defined tokens stand for their own
//     text (control/unknown are skipped with skip_special), unused (5) and undefined (0) tokens for nothing,
//     byte (6) tokens "<0xHH>" for that byte.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ember {

// tokenizer.ggml.token_type values (gguf-py constants TokenType).
enum GgufTokenType : int32_t {
    GGUF_TOKEN_UNDEFINED = 0,
    GGUF_TOKEN_NORMAL = 1,
    GGUF_TOKEN_UNKNOWN = 2,
    GGUF_TOKEN_CONTROL = 3,
    GGUF_TOKEN_USER_DEFINED = 4,
    GGUF_TOKEN_UNUSED = 5,
    GGUF_TOKEN_BYTE = 6,
};

struct GgufVocab {
    std::string model;                 // tokenizer.ggml.model: "gpt2"
    std::string pre;                   // tokenizer.ggml.pre: "smollm", "llama-bpe", "qwen2", "qwen35", ...
    std::vector<std::string> tokens;   // id -> token text (byte-level spelling for normal tokens)
    std::vector<int32_t> token_types;  // GgufTokenType per token; empty = all normal
    std::vector<std::string> merges;   // "a b", rank = position (gpt2)
    std::vector<float> scores;         // tokenizer.ggml.scores (llama: merge priority); empty = all 0
    std::optional<bool> add_space_prefix;  // tokenizer.ggml.add_space_prefix (llama); unset = true
    // Absent keys are -1. bos/eos/eot/eom/unk outside [0, n_tokens) are errors; an out-of-range pad id is
    // dropped (llama.cpp warns and ignores it too).
    int32_t bos_id = -1, eos_id = -1, eot_id = -1, eom_id = -1, pad_id = -1, unk_id = -1;
    // tokenizer.ggml.add_bos_token / add_eos_token; unset = llama.cpp's default for `pre` (true for
    // llama-bpe/llama3/llama-v3 BOS, false otherwise).
    std::optional<bool> add_bos, add_eos;
    std::vector<int32_t> extra_eos;    // more end-of-generation ids (no GGUF key; e.g. from a chat template)
};

}  // namespace ember
