// tokenizer.h: byte-level BPE (tokenizer.json or GGUF "gpt2") and SentencePiece BPE (GGUF "llama") tokenizers,
// streaming detokenizer and the ChatML prompt.
// tokenizer.json: encode() reproduces HF tokenizers' encode(text, add_special_tokens=False).ids:
//   added tokens (raw text) -> normalizer (NFC) -> added tokens marked normalized -> pre_tokenizer -> BPE.
//   Verified against HF goldens in tests/fixtures/tokenizer (scripts/make_tokenizer_fixtures.py).
// GGUF (from_gguf_vocab): reproduces llama.cpp's llama_tokenize / token_to_piece (gguf_vocab.h); verified against
//   llama-cpp-python in tests/fixtures/{smollm2,gguf_tokenizer} (scripts/make_gguf_tokenizer_fixtures.py).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "ember/chat.h"  // ChatMessage (apply_chatml; the library API too)

namespace ember {

struct GgufVocab;  // tokenizer/gguf_vocab.h

class Tokenizer {
public:
    // path: a tokenizer.json file, or a directory containing tokenizer.json (+ optional tokenizer_config.json,
    // whose eos_token joins eos_ids()). Never throws; a bad file gives an error naming the problem.
    static Expected<Tokenizer> load(const std::string& path);
    // Same, from the text of a tokenizer.json and (optionally, may be empty) of a tokenizer_config.json.
    static Expected<Tokenizer> from_json(std::string_view tokenizer_json, std::string_view config_json = {});
    // From GGUF tokenizer metadata, with llama.cpp's semantics (see gguf_vocab.h). Bad metadata (unsupported
    // model or pre, duplicate tokens, token_types of the wrong length, bad ids, merges naming unknown tokens)
    // gives an error naming it.
    static Expected<Tokenizer> from_gguf_vocab(const GgufVocab& vocab);

    // Like HF tokenizers encode(text, add_special_tokens=False). Added/special token strings in the text are
    // recognised (respecting their lstrip/rstrip/single_word/normalized flags). Invalid UTF-8 in the input is
    // first replaced by U+FFFD (HF only accepts valid strings).
    std::vector<int32_t> encode(std::string_view text) const;
    // Like llama.cpp's llama_tokenize(text, add_special, parse_special): add_special adds BOS/EOS where
    // add_bos()/add_eos(); without parse_special, special tokens (tokenizer.json: added tokens marked special, as
    // HF's split_special_tokens; GGUF: control/unknown tokens) are not recognised in the text.
    // encode(text) == encode(text, false, true).
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
    // Like HF decode(ids, skip_special_tokens): concatenated token bytes, invalid UTF-8 replaced by U+FFFD.
    // Ids without a token are skipped.
    std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
    std::string token_bytes(int32_t id) const;       // raw bytes the token stands for ("" if out of range)
    int32_t token_id(std::string_view token) const;  // id of a vocab/added token string, -1 if none
    int32_t vocab_size() const;                      // max id + 1 over vocab and added tokens
    // Skipped by skip_special: an added token marked special (tokenizer.json), a control/unknown token (GGUF).
    bool is_special(int32_t id) const;
    // Ids of "<|im_end|>", "<|endoftext|>", "</s>", "<|end_of_text|>", "<|eot_id|>" that exist, plus the
    // eos_token of tokenizer_config.json if present (tokenizer.json), or the eos, eot, eom and extra_eos ids
    // (GGUF, these first).
    std::vector<int32_t> eos_ids() const;
    int32_t bos_id() const;  // -1 if none (tokenizer.json: always -1)
    bool add_bos() const;    // encode(text, add_special=true, ...) prepends bos_id()
    bool add_eos() const;    // ... and appends the eos id (GGUF tokenizer.ggml.eos_token_id)

    struct Impl;  // tokenizer_impl.h, private to src/tokenizer (the two front ends fill it)

private:
    Tokenizer() = default;
    std::shared_ptr<const Impl> impl_;  // immutable after load; copies share it
};

// Streaming detokenizer: push ids one at a time; push() returns only complete UTF-8 (never a partial
// character; bytes that can never become valid are emitted as U+FFFD). flush() returns what is left
// (an incomplete trailing sequence becomes U+FFFD). The concatenation equals Tokenizer::decode(ids).
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tok, bool skip_special = true) : tok_(tok), skip_special_(skip_special) {}
    std::string push(int32_t id);
    std::string flush();

private:
    const Tokenizer& tok_;
    bool skip_special_;
    std::string pending_;  // bytes of an incomplete UTF-8 sequence
};

// ChatML (Qwen) prompt: "<|im_start|>{role}\n{content}<|im_end|>\n" per message, then "<|im_start|>assistant\n"
// when add_generation_prompt; if enable_thinking is false, "<think>\n\n</think>\n\n" follows that.
std::string apply_chatml(const std::vector<ChatMessage>& msgs, bool add_generation_prompt, bool enable_thinking);

}  // namespace ember
