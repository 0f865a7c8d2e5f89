// tokenizer_errors_test.cpp: bad tokenizer files give error Statuses naming the problem; StreamDecoder
// byte-level edge cases; the ChatML prompt string.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ember {
namespace {

const std::string kQwen = std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/tokenizer/qwen35_like/tokenizer.json";

std::string read(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// Loads the qwen35_like tokenizer.json after `edit`, expecting an error that mentions `needle`.
template <class F>
void expect_error(F edit, const std::string& needle) {
    auto j = nlohmann::json::parse(read(kQwen));
    edit(j);
    auto t = Tokenizer::from_json(j.dump());
    ASSERT_FALSE(t.is_ok()) << "expected an error about " << needle;
    EXPECT_NE(t.message().find(needle), std::string::npos) << t.message();
}

TEST(TokenizerErrors, MissingFileAndDirectory) {
    auto t = Tokenizer::load("/nonexistent/dir/tokenizer.json");
    ASSERT_FALSE(t.is_ok());
    EXPECT_NE(t.message().find("/nonexistent/dir/tokenizer.json"), std::string::npos) << t.message();
    EXPECT_NE(t.message().find("cannot open"), std::string::npos) << t.message();
    auto d = Tokenizer::load(std::string(EMBER_SOURCE_DIR) + "/tests");  // a directory without tokenizer.json
    ASSERT_FALSE(d.is_ok());
    EXPECT_NE(d.message().find("tokenizer.json"), std::string::npos) << d.message();
}

TEST(TokenizerErrors, Gguf) {
    auto t = Tokenizer::load("/tmp/model.gguf");
    ASSERT_FALSE(t.is_ok());
    EXPECT_NE(t.message().find("GGUF tokenizers are not supported yet"), std::string::npos) << t.message();
}

TEST(TokenizerErrors, TruncatedAndEmptyJson) {
    std::string text = read(kQwen);
    ASSERT_GT(text.size(), 1000u);
    auto t = Tokenizer::from_json(std::string_view(text).substr(0, text.size() / 2));
    ASSERT_FALSE(t.is_ok());
    EXPECT_NE(t.message().find("JSON"), std::string::npos) << t.message();
    EXPECT_FALSE(Tokenizer::from_json("").is_ok());
    EXPECT_FALSE(Tokenizer::from_json("[1, 2]").is_ok());
    auto c = Tokenizer::from_json(text, "{\"eos_token\": ");  // broken tokenizer_config.json
    ASSERT_FALSE(c.is_ok());
    EXPECT_NE(c.message().find("tokenizer_config.json: invalid JSON"), std::string::npos) << c.message();
}

// A normalizer nested 100k levels deep would overflow the stack when from_json copies it (j.value(...)): the
// depth limit of parse_json_text refuses the text first, naming the file and the limit.
TEST(TokenizerErrors, DeeplyNestedJsonIsRefused) {
    std::string deep = std::string(100000, '[') + std::string(100000, ']');
    auto t = Tokenizer::from_json("{\"model\": {}, \"normalizer\": " + deep + "}");
    ASSERT_FALSE(t.is_ok());
    EXPECT_NE(t.message().find("tokenizer.json: JSON nested deeper than 512 levels"), std::string::npos) << t.message();
    auto c = Tokenizer::from_json(read(kQwen), deep);
    ASSERT_FALSE(c.is_ok());
    EXPECT_NE(c.message().find("tokenizer_config.json: invalid JSON (tokenizer_config.json: JSON nested deeper"),
              std::string::npos) << c.message();
}

TEST(TokenizerErrors, UnsupportedComponents) {
    using nlohmann::json;
    expect_error([](json& j) { j["model"]["type"] = "WordPiece"; }, "unsupported model type 'WordPiece'");
    expect_error([](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }, "unsupported normalizer type 'Lowercase'");
    expect_error([](json& j) { j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}}}}; },
                 "'NFKC'");
    expect_error([](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }, "unsupported pre_tokenizer type 'Whitespace'");
    expect_error([](json& j) { j["pre_tokenizer"] = nullptr; }, "pre_tokenizer");
    expect_error([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; }, "Removed");
    expect_error([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"; },
                 "regex");
    expect_error([](json& j) { j["model"]["byte_fallback"] = true; }, "byte_fallback");
    expect_error([](json& j) { j["model"].erase("merges"); }, "merges");
    expect_error([](json& j) { j["model"]["merges"][0] = {"a", "nosuchtoken"}; }, "'nosuchtoken'");
    expect_error([](json& j) { j["model"]["merges"][0] = "a b c"; }, "merge 1");
    expect_error([](json& j) { j["model"]["vocab"]["Ġthe"] = "x"; }, "vocab");
    expect_error([](json& j) { j["added_tokens"][0]["id"] = "x"; }, "added token");
    expect_error([](json& j) { j["added_tokens"][0]["id"] = 2000000000; }, "too sparse");
    expect_error([](json& j) { j.erase("model"); }, "model");
    expect_error([](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = "yes"; }, "JSON");  // type error
}

// Id of the single-byte token for byte b (a byte-level vocab always has all 256).
int32_t byte_id(const Tokenizer& t, unsigned char b) {
    for (int32_t id = 0; id < t.vocab_size(); ++id)
        if (t.token_bytes(id) == std::string(1, static_cast<char>(b))) return id;
    return -1;
}

TEST(StreamDecoder, HoldsPartialCharactersAndRepairsInvalidBytes) {
    auto t = Tokenizer::load(kQwen);
    ASSERT_TRUE(t.is_ok()) << t.message();
    StreamDecoder sd(*t);
    // U+1F600 = F0 9F 98 80, pushed byte by byte.
    EXPECT_EQ(sd.push(byte_id(*t, 0xF0)), "");
    EXPECT_EQ(sd.push(byte_id(*t, 0x9F)), "");
    EXPECT_EQ(sd.push(byte_id(*t, 0x98)), "");
    EXPECT_EQ(sd.push(byte_id(*t, 0x80)), "\xF0\x9F\x98\x80");
    EXPECT_EQ(sd.push(byte_id(*t, 0x80)), "\xEF\xBF\xBD");          // a stray continuation byte: U+FFFD now
    EXPECT_EQ(sd.push(byte_id(*t, 0xE2)), "");
    EXPECT_EQ(sd.push(byte_id(*t, 'A')), "\xEF\xBF\xBD" "A");       // E2 then 'A': E2 can never complete
    EXPECT_EQ(sd.push(t->token_id("<|im_end|>")), "");             // special: skipped by default
    EXPECT_EQ(sd.push(byte_id(*t, 0xE4)), "");
    EXPECT_EQ(sd.flush(), "\xEF\xBF\xBD");                         // truncated tail
    EXPECT_EQ(sd.flush(), "");
    StreamDecoder keep(*t, /*skip_special=*/false);
    EXPECT_EQ(keep.push(t->token_id("<|im_end|>")), "<|im_end|>");
}

TEST(Utf8, LossyFollowsMaximalSubparts) {
    EXPECT_EQ(utf8::lossy("a\xF0\x90" "b"), "a\xEF\xBF\xBD" "b");             // one U+FFFD for F0 90
    EXPECT_EQ(utf8::lossy("\xE0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");            // E0 80 is two subparts
    EXPECT_EQ(utf8::lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
    EXPECT_EQ(utf8::lossy("\xC3\xA9\xE2\x82\xAC"), "\xC3\xA9\xE2\x82\xAC");     // valid stays
    EXPECT_FALSE(utf8::is_valid("\xC0\xAF"));
}

TEST(ChatML, Prompt) {
    std::vector<ChatMessage> msgs{{"system", "You are helpful."}, {"user", "Hi"}};
    EXPECT_EQ(apply_chatml(msgs, true, false),
              "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
              "<|im_start|>assistant\n<think>\n\n</think>\n\n");
    EXPECT_EQ(apply_chatml(msgs, true, true),
              "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
              "<|im_start|>assistant\n");
    EXPECT_EQ(apply_chatml({{"user", "x"}}, false, false), "<|im_start|>user\nx<|im_end|>\n");
    // The same prompt is in the golden corpus, so its ids are checked against HF there.
}

}  // namespace
}  // namespace ember
