// Tokenizer from GGUF metadata.
#include "tokenizer/gguf_tokenizer.h"

#include "tokenizer/gguf_vocab.h"

namespace ember {

namespace {
Expected<int32_t> opt_id(const GgufFile& f, const char* key) {
    EMBER_ASSIGN(int64_t v, f.get_int_or(key, -1));
    EMBER_REQUIRE(v >= -1 && v <= INT32_MAX, "%s: %s = %lld is not a token id", f.path().c_str(), key, (long long)v);
    return static_cast<int32_t>(v);
}
}  // namespace

Expected<Tokenizer> tokenizer_from_gguf(const GgufFile& f) {
    GgufVocab v;
    EMBER_ASSIGN(v.model, f.get_string("tokenizer.ggml.model"));
    EMBER_ASSIGN(v.pre, f.get_string_or("tokenizer.ggml.pre", "default"));
    EMBER_ASSIGN(auto tokens, f.get_string_array("tokenizer.ggml.tokens"));
    v.tokens.assign(tokens.begin(), tokens.end());
    if (f.find("tokenizer.ggml.token_type")) {
        EMBER_ASSIGN(auto types, f.get_int_array("tokenizer.ggml.token_type"));
        v.token_types.reserve(types.size());
        for (int64_t t : types) {
            EMBER_REQUIRE(t >= 0 && t <= 6, "%s: tokenizer.ggml.token_type has value %lld (0..6)", f.path().c_str(),
                          (long long)t);
            v.token_types.push_back(static_cast<int32_t>(t));
        }
    }
    if (f.find("tokenizer.ggml.merges")) {
        EMBER_ASSIGN(auto merges, f.get_string_array("tokenizer.ggml.merges"));
        v.merges.assign(merges.begin(), merges.end());
    }
    if (f.find("tokenizer.ggml.scores")) { EMBER_ASSIGN(v.scores, f.get_float_array("tokenizer.ggml.scores")); }
    if (f.find("tokenizer.ggml.add_space_prefix")) {
        EMBER_ASSIGN(v.add_space_prefix, f.get_bool("tokenizer.ggml.add_space_prefix"));
    }
    EMBER_ASSIGN(v.bos_id, opt_id(f, "tokenizer.ggml.bos_token_id"));
    EMBER_ASSIGN(v.eos_id, opt_id(f, "tokenizer.ggml.eos_token_id"));
    EMBER_ASSIGN(v.eot_id, opt_id(f, "tokenizer.ggml.eot_token_id"));
    EMBER_ASSIGN(v.eom_id, opt_id(f, "tokenizer.ggml.eom_token_id"));
    EMBER_ASSIGN(v.pad_id, opt_id(f, "tokenizer.ggml.padding_token_id"));
    EMBER_ASSIGN(v.unk_id, opt_id(f, "tokenizer.ggml.unknown_token_id"));
    if (f.find("tokenizer.ggml.add_bos_token")) { EMBER_ASSIGN(v.add_bos, f.get_bool("tokenizer.ggml.add_bos_token")); }
    if (f.find("tokenizer.ggml.add_eos_token")) { EMBER_ASSIGN(v.add_eos, f.get_bool("tokenizer.ggml.add_eos_token")); }
    auto t = Tokenizer::from_gguf_vocab(v);
    if (!t) return errorf("%s: %s", f.path().c_str(), t.message().c_str());
    return t;
}

Expected<std::string> chat_template_from_gguf(const GgufFile& f) {
    return f.get_string_or("tokenizer.chat_template", "");
}

}  // namespace ember
