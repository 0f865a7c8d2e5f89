// Fuzz target: arbitrary bytes and ids through fixed real tokenizers — SmolLM2-135M's GGUF vocabulary
// (byte-level BPE, llama.cpp semantics), a SentencePiece GGUF vocabulary, the Qwen3.5-style tokenizer.json
// (NFC, Qwen regex, added tokens) and a GPT-2-style one (tests/fixtures). Input: one byte choosing the tokenizer,
// then the text. Checks: tokenizer_checks.h, and for the byte-level GGUF vocabulary without special-token
// parsing, decode(encode(text)) == text for valid UTF-8 made of bytes that have a token (llama.cpp's BPE is
// lossless there; SmolLM2 has no token for 21 bytes, e.g. 0x1d, which llama.cpp drops, and so do we).
#include "fuzz_util.h"
#include "io/json_file.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/gguf_vocab_json.h"
#include "tokenizer_checks.h"

using namespace ember;

namespace {

Tokenizer must(Expected<Tokenizer> t, const char* what) {
    if (!t) fuzz::fail(std::string(what) + ": " + t.message());
    return std::move(t).value();
}

Tokenizer from_vocab_fixture(const char* rel) {
    auto j = parse_json_text(fuzz::read_source_file(rel), rel);
    if (!j) fuzz::fail(j.message());
    auto v = gguf_vocab_from_json(*j);
    if (!v) fuzz::fail(v.message());
    return must(Tokenizer::from_gguf_vocab(*v), rel);
}

Tokenizer from_json_fixture(const char* rel) {
    return must(Tokenizer::from_json(fuzz::read_source_file(rel)), rel);
}

const std::vector<Tokenizer>& tokenizers() {
    static const std::vector<Tokenizer> t = {
        from_vocab_fixture("tests/fixtures/smollm2/vocab.json"),  // index 0: the byte-level round-trip check
        from_vocab_fixture("tests/fixtures/gguf_tokenizer/spm_vocab.json"),
        from_json_fixture("tests/fixtures/tokenizer/qwen35_like/tokenizer.json"),
        from_json_fixture("tests/fixtures/tokenizer/gpt2_like/tokenizer.json"),
    };
    return t;
}

// byte → the vocabulary has a one-byte token for it (its byte-level character).
const std::vector<bool>& smollm2_bytes() {
    static const std::vector<bool> has = [] {
        std::vector<bool> h(256);
        for (int b = 0; b < 256; ++b) {
            std::string c;
            byte_level::encode(std::string(1, char(b)), c);
            h[b] = tokenizers()[0].token_id(c) >= 0;
        }
        return h;
    }();
    return has;
}

bool all_bytes_have_tokens(std::string_view s) {
    for (unsigned char c : s)
        if (!smollm2_bytes()[c]) return false;
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    (void)smollm2_bytes();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::vector<Tokenizer>& all = tokenizers();
    const size_t which = data[0] % all.size();
    std::string_view s = fuzz::text(data + 1, size - 1);
    fuzz::check_tokenizer(all[which], s);
    if (which == 0 && utf8::is_valid(s) && all_bytes_have_tokens(s)) {
        std::vector<int32_t> ids = fuzz::check_encode(all[0], s, false, false);
        if (all[0].decode(ids) != s) fuzz::fail("SmolLM2 vocabulary: decode(encode(text)) != text");
    }
    return 0;
}
