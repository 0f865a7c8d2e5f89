// gguf_vocab_test.cpp: Tokenizer::from_gguf_vocab on a small synthetic vocabulary with hand-derived expected ids
// (llama.cpp semantics: control vs user-defined tokens, longest-first partition, decode of each token type,
// BOS/EOS, eos_ids) and the errors bad metadata gives.
#include <gtest/gtest.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/gguf_pre.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace ember {
namespace {

using Ids = std::vector<int32_t>;

// ids 0..255: the byte-level spelling of byte id; then merges h+e, l+l, he+ll; then one token of each type.
enum : int32_t { kHe = 256, kLl, kHell, kCtl, kUd, kPad, kByteA, kUnk, kAb, kBcd, kBc, kNewTok, kEot, kN };

GgufVocab small_vocab() {
    GgufVocab v;
    v.model = "gpt2";
    v.pre = "gpt-2";
    for (int b = 0; b < 256; ++b) {
        std::string t;
        byte_level::encode(std::string(1, static_cast<char>(b)), t);
        v.tokens.push_back(t);
    }
    v.token_types.assign(256, GGUF_TOKEN_NORMAL);
    auto add = [&v](const char* text, int32_t type) {
        v.tokens.push_back(text);
        v.token_types.push_back(type);
    };
    add("he", GGUF_TOKEN_NORMAL);
    add("ll", GGUF_TOKEN_NORMAL);
    add("hell", GGUF_TOKEN_NORMAL);
    add("<|ctl|>", GGUF_TOKEN_CONTROL);
    add("<ud>", GGUF_TOKEN_USER_DEFINED);
    add("[PAD261]", GGUF_TOKEN_UNUSED);
    add("<0x41>", GGUF_TOKEN_BYTE);
    add("<unk>", GGUF_TOKEN_UNKNOWN);
    add("ab", GGUF_TOKEN_USER_DEFINED);
    add("bcd", GGUF_TOKEN_USER_DEFINED);
    add("bc", GGUF_TOKEN_USER_DEFINED);
    add("new token", GGUF_TOKEN_USER_DEFINED);
    add("<|eot|>", GGUF_TOKEN_CONTROL);
    v.merges = {"h e", "l l", "he ll"};
    v.bos_id = kCtl;
    v.eos_id = kEot;
    return v;
}

Tokenizer make(const GgufVocab& v) {
    auto t = Tokenizer::from_gguf_vocab(v);
    EXPECT_TRUE(t.is_ok()) << t.message();
    return std::move(t.value());
}

TEST(GgufVocab, MergesAndByteLevel) {
    Tokenizer t = make(small_vocab());
    EXPECT_EQ(t.vocab_size(), kN);
    EXPECT_EQ(t.encode("hello"), (Ids{kHell, 'o'}));
    EXPECT_EQ(t.encode("he ll"), (Ids{kHe, ' ', kLl}));  // pre-tokens "he" and " ll"; no merge "Ġ l"
    EXPECT_EQ(t.encode(""), Ids{});
    EXPECT_EQ(t.decode(t.encode("héllo wörld\n\t")), "héllo wörld\n\t");
}

TEST(GgufVocab, ControlTokensOnlyWithParseSpecial) {
    Tokenizer t = make(small_vocab());
    const std::string s = "hello<|ctl|> <ud>x";
    EXPECT_EQ(t.encode(s, false, true), (Ids{kHell, 'o', kCtl, ' ', kUd, 'x'}));
    EXPECT_EQ(t.encode(s), t.encode(s, false, true));
    // Without parse_special the control token is plain text (GPT-2 regex: "<|" "ctl" "|>" " "), while the
    // user-defined <ud> is still matched.
    EXPECT_EQ(t.encode(s, false, false), (Ids{kHell, 'o', '<', '|', 'c', 't', 'l', '|', '>', ' ', kUd, 'x'}));
    EXPECT_EQ(t.encode("<unk>", false, true), Ids{kUnk});  // unknown-type tokens behave like control ones
    EXPECT_EQ(t.encode("<unk>", false, false), (Ids{'<', 'u', 'n', 'k', '>'}));
    EXPECT_EQ(t.encode("a new token!"), (Ids{'a', ' ', kNewTok, '!'}));  // user-defined with a space
}

TEST(GgufVocab, LongestTokenFirstPartition) {
    Tokenizer t = make(small_vocab());
    // llama.cpp splits at the longest token first: "bcd" wins over the earlier "ab" (HF would take "ab").
    EXPECT_EQ(t.encode("abcd"), (Ids{'a', kBcd}));
    // Equal lengths: the lower id first ("ab" before "bc").
    EXPECT_EQ(t.encode("abc"), (Ids{kAb, 'c'}));
    EXPECT_EQ(t.encode("bcab"), (Ids{kBc, kAb}));
    EXPECT_EQ(t.encode("<ud><ud>"), (Ids{kUd, kUd}));
}

TEST(GgufVocab, DecodeByTokenType) {
    Tokenizer t = make(small_vocab());
    EXPECT_EQ(t.decode({kCtl, kUd, kPad, kByteA, kUnk, kNewTok}), "<|ctl|><ud>A<unk>new token");
    EXPECT_EQ(t.decode({kCtl, kUd, kPad, kByteA, kUnk, kNewTok}, /*skip_special=*/true), "<ud>Anew token");
    EXPECT_TRUE(t.is_special(kCtl));
    EXPECT_TRUE(t.is_special(kUnk));
    EXPECT_FALSE(t.is_special(kUd));
    EXPECT_FALSE(t.is_special(kHell));
    EXPECT_EQ(t.token_bytes(' '), " ");
    EXPECT_EQ(t.token_id("hell"), kHell);
    EXPECT_EQ(t.token_id("<|ctl|>"), kCtl);
    EXPECT_EQ(t.token_id("Ġ"), ' ');
    EXPECT_EQ(t.token_id("nope"), -1);
    // Byte tokens split a character: the stream decoder holds the bytes back until the character is complete.
    StreamDecoder sd(t, true);
    EXPECT_EQ(sd.push(0xC3), "");
    EXPECT_EQ(sd.push(kCtl), "");  // skipped
    EXPECT_EQ(sd.push(0xA9), "é");
    EXPECT_EQ(sd.push(0xE2), "");
    EXPECT_EQ(sd.flush(), "\xEF\xBF\xBD");
}

TEST(GgufVocab, BosEosAndEosIds) {
    GgufVocab v = small_vocab();
    Tokenizer plain = make(v);
    EXPECT_EQ(plain.bos_id(), kCtl);
    EXPECT_FALSE(plain.add_bos());  // gpt-2 default
    EXPECT_EQ(plain.encode("hello", true, true), (Ids{kHell, 'o'}));
    EXPECT_EQ(plain.eos_ids(), Ids{kEot});

    v.add_bos = true;
    v.add_eos = true;
    v.eot_id = kUnk;
    v.extra_eos = {kUd, kEot};
    v.tokens[kNewTok] = "<|endoftext|>";  // joins eos_ids by name
    Tokenizer t = make(v);
    EXPECT_EQ(t.encode("hello", true, true), (Ids{kCtl, kHell, 'o', kEot}));
    EXPECT_EQ(t.encode("hello", false, true), (Ids{kHell, 'o'}));
    EXPECT_EQ(t.eos_ids(), (Ids{kEot, kUnk, kUd, kNewTok}));

    // llama-bpe adds BOS unless the file says otherwise (llama.cpp's per-pre default).
    GgufVocab l = small_vocab();
    l.pre = "llama-bpe";
    EXPECT_TRUE(make(l).add_bos());
    l.add_bos = false;
    EXPECT_FALSE(make(l).add_bos());
}

TEST(GgufVocab, IgnoreMergesForLlama3) {
    GgufVocab v = small_vocab();
    v.tokens.push_back("hello");  // in the vocab but not reachable by merges
    v.token_types.push_back(GGUF_TOKEN_NORMAL);
    EXPECT_EQ(make(v).encode("hello"), (Ids{kHell, 'o'}));
    v.pre = "llama-bpe";  // ignore_merges: a whole pre-token found in the vocab is one token
    EXPECT_EQ(make(v).encode("hello"), Ids{kN});
}

TEST(GgufVocab, EveryPresetCompiles) {
    std::string names = gguf_pre_names();
    ASSERT_NE(names.find("qwen35"), std::string::npos);
    size_t start = 0;
    int n = 0;
    while (start < names.size()) {
        size_t end = names.find(", ", start);
        std::string name = names.substr(start, end == std::string::npos ? std::string::npos : end - start);
        GgufVocab v = small_vocab();
        v.pre = name;
        Tokenizer t = make(v);
        EXPECT_EQ(t.decode(t.encode("Hello, world! 12345  \n x")), "Hello, world! 12345  \n x") << name;
        ++n;
        start = end == std::string::npos ? names.size() : end + 2;
    }
    EXPECT_GE(n, 8);
    GgufVocab v = small_vocab();
    v.pre = "";  // llama.cpp: a missing pre is "default"
    EXPECT_TRUE(Tokenizer::from_gguf_vocab(v).is_ok());
}

// Applies `edit` to the small vocabulary and expects an error mentioning every needle.
template <class F>
void expect_error(F edit, std::initializer_list<const char*> needles) {
    GgufVocab v = small_vocab();
    edit(v);
    auto t = Tokenizer::from_gguf_vocab(v);
    ASSERT_FALSE(t.is_ok()) << "expected an error about " << *needles.begin();
    for (const char* n : needles) EXPECT_NE(t.message().find(n), std::string::npos) << t.message();
}

TEST(GgufVocab, Errors) {
    expect_error([](GgufVocab& v) { v.model = "bert"; }, {"'bert' is not supported", "gpt2", "SentencePiece"});
    expect_error([](GgufVocab& v) { v.model = "llama", v.scores.assign(3, 0.f); },
                 {"tokenizer.ggml.scores has 3 entries for 269 tokens"});
    expect_error([](GgufVocab& v) { v.model = "llama", v.unk_id = 999; }, {"unknown_token_id 999 is out of range"});
    expect_error([](GgufVocab& v) { v.pre = "chatglm-bpe"; },
                 {"unsupported tokenizer.ggml.pre 'chatglm-bpe'", "smollm", "qwen35", "llama-bpe"});
    expect_error([](GgufVocab& v) { v.tokens.clear(), v.token_types.clear(); }, {"tokens is empty"});
    expect_error([](GgufVocab& v) { v.token_types.pop_back(); }, {"token_type has 268 entries for 269 tokens"});
    expect_error([](GgufVocab& v) { v.token_types[kUd] = 7; }, {"bad token type 7", "<ud>"});
    expect_error([](GgufVocab& v) { v.token_types[kUd] = -1; }, {"bad token type -1"});
    expect_error([](GgufVocab& v) { v.tokens[kUd] = "hell"; }, {"duplicate token", "'hell'", "258", "260"});
    expect_error([](GgufVocab& v) { v.tokens[kByteA] = "<0xZ1>"; }, {"not of the form <0xHH>"});
    expect_error([](GgufVocab& v) { v.merges.push_back("x yz"); }, {"merges", "'yz' is not in the vocab"});
    expect_error([](GgufVocab& v) { v.merges.push_back("hell o"); }, {"merged token 'hello' is not in the vocab"});
    expect_error([](GgufVocab& v) { v.merges.push_back("hello"); }, {"merge 3 is not of the form"});
    expect_error([](GgufVocab& v) { v.bos_id = kN; }, {"bos_token_id 269 is out of range"});
    expect_error([](GgufVocab& v) { v.eos_id = -2; }, {"eos_token_id -2 is out of range"});
    expect_error([](GgufVocab& v) { v.eot_id = 100000; }, {"eot_token_id"});
    expect_error([](GgufVocab& v) { v.eom_id = kN; }, {"eom_token_id"});
    expect_error([](GgufVocab& v) { v.unk_id = kN; }, {"unknown_token_id"});
    expect_error([](GgufVocab& v) { v.extra_eos = {kN}; }, {"extra eos id 269"});
    expect_error([](GgufVocab& v) { v.add_bos = true, v.bos_id = -1; }, {"add_bos_token is true"});
    expect_error([](GgufVocab& v) { v.add_eos = true, v.eos_id = -1; }, {"add_eos_token is true"});

    GgufVocab v = small_vocab();
    v.pad_id = kN + 5;  // ignored, as llama.cpp does
    EXPECT_TRUE(Tokenizer::from_gguf_vocab(v).is_ok());
    v.tokens[kPad] = "";  // llama.cpp renames it [EMPTY_261]
    v.token_types.clear();  // all normal
    auto t = Tokenizer::from_gguf_vocab(v);
    ASSERT_TRUE(t.is_ok()) << t.message();
    EXPECT_EQ(t->token_id("[EMPTY_261]"), kPad);
    EXPECT_FALSE(t->is_special(kCtl));
}

}  // namespace
}  // namespace ember
