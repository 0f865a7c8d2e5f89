// What the tokenizer fuzz targets check on any Tokenizer that loaded: encode (all flag combinations) gives ids
// inside the vocabulary, decode gives valid UTF-8, and the streaming decoder's output equals decode()
// (tokenizer.h promises it) — for the ids of the text and for arbitrary ids (negative, out of range).
#pragma once
#include <cstring>
#include <vector>

#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ember::fuzz {

inline void check_decode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
    std::string all = tok.decode(ids, skip_special);
    if (!utf8::is_valid(all)) fail("decode() returned invalid UTF-8");
    StreamDecoder sd(tok, skip_special);
    std::string streamed;
    for (int32_t id : ids) {
        std::string piece = sd.push(id);
        if (!utf8::is_valid(piece)) fail("StreamDecoder::push returned invalid UTF-8");
        streamed += piece;
    }
    streamed += sd.flush();
    if (streamed != all) fail("StreamDecoder output differs from decode()");
}

inline std::vector<int32_t> check_encode(const Tokenizer& tok, std::string_view s, bool add_special,
                                         bool parse_special) {
    std::vector<int32_t> ids = tok.encode(s, add_special, parse_special);
    for (int32_t id : ids)
        if (id < 0 || id >= tok.vocab_size()) fail("encode() gave id " + std::to_string(id) + " outside the vocab");
    return ids;
}

// Everything above on text `s`, and `s` read as little-endian int32 ids.
inline void check_tokenizer(const Tokenizer& tok, std::string_view s) {
    for (int flags = 0; flags < 4; ++flags) {
        std::vector<int32_t> ids = check_encode(tok, s, flags & 1, flags & 2);
        check_decode(tok, ids, flags & 1);
    }
    std::vector<int32_t> raw(s.size() / 4);
    if (!raw.empty()) std::memcpy(raw.data(), s.data(), raw.size() * 4);
    check_decode(tok, raw, false);
    check_decode(tok, raw, true);
    for (int32_t id : tok.eos_ids())
        if (id < 0 || id >= tok.vocab_size()) fail("eos id " + std::to_string(id) + " outside the vocab");
    (void)tok.token_id(s);
}

// check_tokenizer on texts that reach the special-token, whitespace, Unicode, invalid-UTF-8 and SPM paths.
inline void check_tokenizer_on_samples(const Tokenizer& tok) {
    static const char* kTexts[] = {"Hello world! 123 <|im_start|>user\n", " \t\n  x  ", "é\xCC\x81 日本語 🙂 \xff\xfe",
                                   "<s>[INST] a</s><0x41><|endoftext|>", "▁▁don't   stop"};
    for (const char* t : kTexts) check_tokenizer(tok, t);
}

}  // namespace ember::fuzz
