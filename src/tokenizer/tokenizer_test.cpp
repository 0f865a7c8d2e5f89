// tokenizer_test.cpp: ids and decodes of the C++ tokenizer vs HF `tokenizers` goldens
// (tests/fixtures/tokenizer, made by scripts/make_tokenizer_fixtures.py) for three tokenizer.json files.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tokenizer/normalize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ember {
namespace {

const std::string kDir = std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/tokenizer/";

nlohmann::json read_json(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    EXPECT_TRUE(f.good()) << path;
    std::stringstream ss;
    ss << f.rdbuf();
    return nlohmann::json::parse(ss.str());
}

std::string show(const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s += std::to_string(id) + ",";
    return s;
}

// Decodes through a StreamDecoder one id at a time, checking that every chunk is valid UTF-8.
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
    StreamDecoder sd(tok, skip_special);
    std::string all;
    for (int32_t id : ids) {
        std::string chunk = sd.push(id);
        EXPECT_TRUE(utf8::is_valid(chunk)) << "invalid UTF-8 chunk after id " << id;
        all += chunk;
    }
    std::string tail = sd.flush();
    EXPECT_TRUE(utf8::is_valid(tail));
    return all + tail;
}

class Golden : public ::testing::TestWithParam<const char*> {
protected:
    void SetUp() override {
        auto t = Tokenizer::load(kDir + GetParam());
        ASSERT_TRUE(t.is_ok()) << t.message();
        tok_ = std::make_unique<Tokenizer>(std::move(t.value()));
        corpus_ = read_json(kDir + "corpus.json");
        want_ = read_json(kDir + GetParam() + "/expected.json");
        ASSERT_EQ(corpus_.size(), want_["cases"].size());
    }
    std::unique_ptr<Tokenizer> tok_;
    nlohmann::json corpus_, want_;
};

TEST_P(Golden, EncodeMatchesHF) {
    int equal = 0;
    for (size_t i = 0; i < corpus_.size(); ++i) {
        std::string text = corpus_[i].get<std::string>();
        auto want = want_["cases"][i]["ids"].get<std::vector<int32_t>>();
        auto got = tok_->encode(text);
        EXPECT_EQ(got, want) << "text #" << i << ": " << nlohmann::json(text).dump() << "\n got  " << show(got)
                             << "\n want " << show(want);
        equal += got == want;
    }
    std::printf("[%s] %d / %zu texts: ids identical to HF tokenizers %s\n", GetParam(), equal, corpus_.size(),
                want_["tokenizers_version"].get<std::string>().c_str());
}

TEST_P(Golden, DecodeMatchesHF) {
    const bool nfc_norm = std::string(GetParam()) == "qwen35_like";
    for (size_t i = 0; i < corpus_.size(); ++i) {
        const auto& c = want_["cases"][i];
        auto ids = c["ids"].get<std::vector<int32_t>>();
        std::string text = corpus_[i].get<std::string>();
        EXPECT_EQ(tok_->decode(ids), c["decoded"].get<std::string>()) << "text #" << i;
        EXPECT_EQ(tok_->decode(ids, true), c["decoded_skip_special"].get<std::string>()) << "text #" << i;
        if (c["roundtrip"].get<bool>()) {  // HF's decode gave the (NFC) text back; ours must too
            EXPECT_EQ(tok_->decode(ids), nfc_norm ? nfc(text) : text) << "text #" << i;
        }
        EXPECT_EQ(stream(*tok_, ids, false), c["decoded"].get<std::string>()) << "text #" << i;
        EXPECT_EQ(stream(*tok_, ids, true), c["decoded_skip_special"].get<std::string>()) << "text #" << i;
    }
}

TEST_P(Golden, DecodeRandomIdsMatchesHF) {  // byte tokens that split characters: lossy repair as in HF
    for (const auto& c : want_["random_decodes"]) {
        auto ids = c["ids"].get<std::vector<int32_t>>();
        EXPECT_EQ(tok_->decode(ids), c["decoded"].get<std::string>()) << show(ids);
        EXPECT_EQ(stream(*tok_, ids, false), c["decoded"].get<std::string>()) << show(ids);
    }
    const auto& single = want_["single_decodes"];
    ASSERT_EQ(static_cast<size_t>(tok_->vocab_size()), single.size());
    for (int32_t id = 0; id < tok_->vocab_size(); ++id)
        EXPECT_EQ(tok_->decode({id}), single[id].get<std::string>()) << "id " << id;
    EXPECT_EQ(tok_->token_bytes(-1), "");
    EXPECT_EQ(tok_->token_bytes(tok_->vocab_size()), "");
    EXPECT_EQ(tok_->decode({-5, tok_->vocab_size() + 3}), "");
}

TEST_P(Golden, ConcurrentEncode) {  // the BPE cache is shared between threads
    std::vector<std::thread> threads;
    std::vector<int> bad(4, 0);
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int rep = 0; rep < 3; ++rep)
                for (size_t i = 0; i < corpus_.size(); ++i)
                    bad[t] += tok_->encode(corpus_[i].get<std::string>()) !=
                              want_["cases"][i]["ids"].get<std::vector<int32_t>>();
        });
    for (auto& th : threads) th.join();
    for (int b : bad) EXPECT_EQ(b, 0);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Golden, ::testing::Values("qwen35_like", "gpt2_like", "gpt2_variant", "onig_escapes"));

TEST(Tokenizer, TokenIdsSpecialsAndEos) {
    auto q = Tokenizer::load(kDir + "qwen35_like");
    ASSERT_TRUE(q.is_ok()) << q.message();
    int32_t im_start = q->token_id("<|im_start|>"), im_end = q->token_id("<|im_end|>");
    int32_t eot = q->token_id("<|endoftext|>");
    EXPECT_GE(im_start, 0);
    EXPECT_EQ(q->token_id("no such token"), -1);
    EXPECT_GE(q->token_id("Ġthe"), 0);  // a plain vocab entry (byte-level spelling)
    EXPECT_EQ(q->token_bytes(q->token_id("Ġthe")), " the");
    EXPECT_TRUE(q->is_special(im_start));
    EXPECT_FALSE(q->is_special(q->token_id("<tool_call>")));  // added but not special
    EXPECT_FALSE(q->is_special(q->token_id("Ġthe")));
    EXPECT_EQ(q->eos_ids(), (std::vector<int32_t>{im_end, eot}));  // config eos <|im_end|> already listed
    EXPECT_EQ(q->encode("<|im_start|>"), std::vector<int32_t>{im_start});

    // A tokenizer.json path (not a directory): no tokenizer_config.json beside it.
    auto g = Tokenizer::load(kDir + "gpt2_like/tokenizer.json");
    ASSERT_TRUE(g.is_ok()) << g.message();
    EXPECT_EQ(g->eos_ids(), std::vector<int32_t>{g->token_id("<|endoftext|>")});

    // eos_token given as {"content": ...} in tokenizer_config.json.
    auto v = Tokenizer::load(kDir + "gpt2_variant");
    ASSERT_TRUE(v.is_ok()) << v.message();
    EXPECT_EQ(v->eos_ids(), (std::vector<int32_t>{v->token_id("<|endoftext|>"), v->token_id("[SEP]")}));
}

// parse_special=false is HF split_special_tokens: special added tokens are plain text, others still match.
TEST(Tokenizer, ParseSpecialOffAndAddSpecial) {
    auto q = Tokenizer::load(kDir + "qwen35_like");
    ASSERT_TRUE(q.is_ok()) << q.message();
    const std::string s = "<|im_start|>user <tool_call> x<|im_end|>";
    const int32_t im_start = q->token_id("<|im_start|>"), im_end = q->token_id("<|im_end|>");
    const int32_t tool = q->token_id("<tool_call>");
    auto on = q->encode(s, false, true), off = q->encode(s, false, false);
    EXPECT_EQ(on, q->encode(s));
    EXPECT_EQ(on.front(), im_start);
    EXPECT_EQ(on.back(), im_end);
    for (int32_t id : off) EXPECT_TRUE(id != im_start && id != im_end) << show(off);
    EXPECT_NE(std::find(off.begin(), off.end(), tool), off.end()) << show(off);  // not special: still matched
    EXPECT_EQ(q->decode(off), s);
    // tokenizer.json carries no BOS/EOS policy: add_special changes nothing.
    EXPECT_EQ(q->bos_id(), -1);
    EXPECT_FALSE(q->add_bos());
    EXPECT_FALSE(q->add_eos());
    EXPECT_EQ(q->encode(s, true, true), on);
}

TEST(Tokenizer, LongInputsRoundTrip) {  // long runs exercise the PCRE2 JIT stack and the BPE merge loop
    auto q = Tokenizer::load(kDir + "qwen35_like");
    ASSERT_TRUE(q.is_ok()) << q.message();
    for (std::string s : {std::string(100000, ' '), std::string(100000, 'a'), std::string(20000, '\n') + "x",
                          std::string(30000, '7')}) {
        auto ids = q->encode(s);
        EXPECT_FALSE(ids.empty());
        EXPECT_EQ(q->decode(ids), s);
    }
}

TEST(Tokenizer, InvalidUtf8InputIsRepaired) {
    auto q = Tokenizer::load(kDir + "qwen35_like");
    ASSERT_TRUE(q.is_ok()) << q.message();
    std::string bad = "ab\xff" "cd\xe2\x82";
    EXPECT_EQ(q->encode(bad), q->encode("ab\xEF\xBF\xBD" "cd\xEF\xBF\xBD"));
}

}  // namespace
}  // namespace ember
