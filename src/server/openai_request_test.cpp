// Request parsing: accepted forms, every refusal named, wrong types, malformed bodies, and a mutation fuzz
// (any byte string gives a request or an error, never a crash).
#include <gtest/gtest.h>

#include <random>

#include "server/openai_types.h"

namespace ember::server {
namespace {

ApiError chat_error(const std::string& body) {
    ApiError e;
    auto r = parse_chat_request(body, &e);
    EXPECT_FALSE(r.is_ok()) << body;
    EXPECT_EQ(r.message(), e.message);
    return e;
}

const char* kMsg = R"("messages": [{"role": "user", "content": "hi"}])";

TEST(ParseChat, AcceptsTheCommonFields) {
    auto r = parse_chat_request(std::string("{") + kMsg + R"(, "model": "m", "max_tokens": 7, "temperature": 0.5,
        "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 3, "presence_penalty": 0.5, "frequency_penalty": -0.5,
        "repetition_penalty": 1.1, "stop": ["a", "bc"], "stream": true, "stream_options": {"include_usage": true},
        "logprobs": true, "top_logprobs": 5, "user": "u", "n": 1, "chat_template_kwargs": {"enable_thinking": false}})");
    ASSERT_TRUE(r.is_ok()) << r.message();
    const ChatRequest& c = r.value();
    EXPECT_EQ(c.gen.model, "m");
    EXPECT_EQ(*c.gen.max_tokens, 7);
    EXPECT_FLOAT_EQ(c.gen.sampling.temperature, 0.5f);
    EXPECT_FLOAT_EQ(c.gen.sampling.top_p, 0.9f);
    EXPECT_EQ(c.gen.sampling.top_k, 40);
    EXPECT_FLOAT_EQ(c.gen.sampling.min_p, 0.05f);
    EXPECT_TRUE(c.gen.seed_given);
    EXPECT_EQ(c.gen.sampling.seed, 3u);
    EXPECT_FLOAT_EQ(c.gen.sampling.repetition_penalty, 1.1f);
    EXPECT_EQ(c.gen.stop, (std::vector<std::string>{"a", "bc"}));
    EXPECT_TRUE(c.gen.stream && c.gen.include_usage);
    EXPECT_EQ(c.gen.top_logprobs, 5);
    EXPECT_EQ(c.template_kwargs["enable_thinking"], false);
    EXPECT_EQ(c.messages.dump(), R"([{"role":"user","content":"hi"}])");
}

TEST(ParseChat, Defaults) {
    auto r = parse_chat_request(std::string("{") + kMsg + "}");
    ASSERT_TRUE(r.is_ok());
    EXPECT_FALSE(r->gen.max_tokens.has_value());
    EXPECT_FLOAT_EQ(r->gen.sampling.temperature, 1.f);  // OpenAI's default
    EXPECT_EQ(r->gen.top_logprobs, -1);
    EXPECT_FALSE(r->gen.seed_given || r->gen.stream);
}

TEST(ParseChat, MaxCompletionTokensWinsAndNullIsAbsent) {
    auto r = parse_chat_request(std::string("{") + kMsg + R"(, "max_tokens": 5, "max_completion_tokens": 9,
        "temperature": null, "stop": null, "seed": null})");
    ASSERT_TRUE(r.is_ok()) << r.message();
    EXPECT_EQ(*r->gen.max_tokens, 9);
    EXPECT_FLOAT_EQ(r->gen.sampling.temperature, 1.f);
    EXPECT_FALSE(r->gen.seed_given);
}

TEST(ParseChat, MessagesAreNormalisedForTheTemplate) {
    auto r = parse_chat_request(R"({"messages": [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "1", "type": "function",
            "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
        {"role": "tool", "content": "42", "tool_call_id": "1"}]})");
    ASSERT_TRUE(r.is_ok()) << r.message();
    const auto& m = r->messages;
    EXPECT_EQ(m[0]["role"], "system");
    EXPECT_EQ(m[1]["content"], "a\nb");
    EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"]["x"], 1);
    EXPECT_EQ(m[3]["tool_call_id"], "1");
}

TEST(ParseChat, RefusesWhatItDoesNotImplement) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"("tool_choice": "auto")", "tool_choice"},  // without tools
        {R"("n": 2)", "n"},
        {R"("logit_bias": {"5": 10})", "logit_bias"},
        {R"("best_of": 3)", "best_of"},
        {R"("functions": [])", "functions"},
        {R"("audio": {})", "audio"},
        {R"("modalities": ["text", "audio"])", "modalities"},
        {R"("reasoning_effort": "low")", "reasoning_effort"},
        {R"("store": true)", "store"},
        {R"("prediction": {})", "prediction"},
        {R"("frobnicate": 1)", "frobnicate"},
        {R"("guided_json": {})", "guided_json"},
    };
    for (const auto& [field, param] : cases) {
        ApiError e = chat_error(std::string("{") + kMsg + ", " + field + "}");
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.param, param) << field;
        EXPECT_NE(e.message.find(param), std::string::npos) << e.message;
    }
}

TEST(ParseChat, HarmlessDefaultsOfRefusedFieldsAreAccepted) {
    for (const char* f : {R"("n": 1)", R"("response_format": {"type": "text"})", R"("tools": [])", R"("logit_bias": {})",
                          R"("tool_choice": "none")", R"("store": false)", R"("modalities": ["text"])",
                          R"("metadata": {"a": "b"})", R"("parallel_tool_calls": true)"}) {
        auto r = parse_chat_request(std::string("{") + kMsg + ", " + f + "}");
        EXPECT_TRUE(r.is_ok()) << f << ": " << r.message();
    }
}

TEST(ParseChat, WrongTypesAndRangesNameTheField) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"("temperature": "hot")", "temperature"},
        {R"("temperature": 2.5)", "temperature"},
        {R"("top_p": -0.1)", "top_p"},
        {R"("max_tokens": 0)", "max_tokens"},
        {R"("max_tokens": 1.5)", "max_tokens"},
        {R"("max_tokens": true)", "max_tokens"},
        {R"("stream": "yes")", "stream"},
        {R"("stop": 5)", "stop"},
        {R"("stop": ["a", 1])", "stop"},
        {R"("top_logprobs": 3)", "top_logprobs"},
        {R"("logprobs": true, "top_logprobs": 21)", "top_logprobs"},
        {R"("seed": 1e30)", "seed"},
        {R"("model": 5)", "model"},
        {R"("stream_options": {"include_usage": true})", "stream_options"},
        {R"("chat_template_kwargs": {"messages": []})", "chat_template_kwargs"},
        {R"("chat_template_kwargs": {"enable_thinking": "no"})", "chat_template_kwargs"},
    };
    for (const auto& [field, param] : cases) {
        ApiError e = chat_error(std::string("{") + kMsg + ", " + field + "}");
        EXPECT_EQ(e.param, param) << field << " → " << e.message;
    }
}

TEST(ParseChat, BadMessages) {
    for (const char* body : {R"({})", R"({"messages": []})", R"({"messages": {}})", R"({"messages": ["hi"]})",
                             R"({"messages": [{"content": "hi"}]})", R"({"messages": [{"role": "king", "content": "x"}]})",
                             R"({"messages": [{"role": "user"}]})", R"({"messages": [{"role": "user", "content": 5}]})",
                             R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})",
                             R"({"messages": [{"role": "user", "content": "x", "extra": 1}]})"}) {
        ApiError e = chat_error(body);
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.param.rfind("messages", 0), 0u) << body << " → " << e.param;
    }
}

TEST(ParseChat, MalformedBodies) {
    for (const std::string& body : {std::string(""), std::string("{"), std::string("[1]"), std::string("null"),
                                   std::string("{\"messages\": \"\xff\xfe\"}"), std::string("{\"a\":1}{"),
                                   std::string("\"text\""), std::string(1000, '[')}) {
        ApiError e = chat_error(body);
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.code, "invalid_json") << body;
    }
}

TEST(ParseCompletion, PromptForms) {
    auto a = parse_completion_request(R"({"prompt": "hello"})");
    ASSERT_TRUE(a.is_ok());
    EXPECT_EQ(a->prompt, "hello");
    EXPECT_EQ(*a->gen.max_tokens, 16);  // OpenAI's default for completions
    auto b = parse_completion_request(R"({"prompt": [1, 2, 3], "logprobs": 2})");
    ASSERT_TRUE(b.is_ok());
    EXPECT_TRUE(b->prompt_is_ids);
    EXPECT_EQ(b->prompt_ids, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(b->gen.top_logprobs, 2);
    auto c = parse_completion_request(R"({"prompt": ["one"]})");
    ASSERT_TRUE(c.is_ok());
    EXPECT_EQ(c->prompt, "one");
    auto d = parse_completion_request(R"({"prompt": [[4, 5]]})");
    ASSERT_TRUE(d.is_ok());
    EXPECT_EQ(d->prompt_ids, (std::vector<int32_t>{4, 5}));
    for (const char* bad : {R"({"prompt": ["a", "b"]})", R"({"prompt": [1, -2]})", R"({"prompt": [1.5]})",
                            R"({"prompt": []})", R"({"prompt": 7})", R"({})", R"({"prompt": "x", "echo": true})",
                            R"({"prompt": "x", "suffix": "y"})", R"({"prompt": "x", "best_of": 2})"}) {
        ApiError e;
        EXPECT_FALSE(parse_completion_request(bad, &e).is_ok()) << bad;
        EXPECT_EQ(e.status, 400);
        EXPECT_FALSE(e.param.empty()) << bad;
    }
}

TEST(ParseTokenize, Forms) {
    auto a = parse_tokenize_request(R"({"prompt": "hi", "add_special_tokens": false})");
    ASSERT_TRUE(a.is_ok());
    EXPECT_FALSE(a->chat || a->add_special);
    auto b = parse_tokenize_request(R"({"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": false})");
    ASSERT_TRUE(b.is_ok()) << b.message();
    EXPECT_TRUE(b->chat);
    EXPECT_FALSE(b->messages.add_generation_prompt);
    EXPECT_FALSE(parse_tokenize_request(R"({"prompt": "a", "messages": []})").is_ok());
    EXPECT_FALSE(parse_tokenize_request(R"({"prompt": "a", "x": 1})").is_ok());
    auto d = parse_detokenize_request(R"({"tokens": [1, 2]})");
    ASSERT_TRUE(d.is_ok());
    EXPECT_EQ(d->tokens.size(), 2u);
    EXPECT_FALSE(parse_detokenize_request(R"({"tokens": ["a"]})").is_ok());
}

TEST(ErrorBody, OpenAIShape) {
    ApiError e = bad_request("bad \xff thing", "temperature", "x");
    auto j = nlohmann::json::parse(error_body(e));  // invalid UTF-8 replaced, still JSON
    EXPECT_EQ(j["error"]["param"], "temperature");
    EXPECT_EQ(j["error"]["code"], "x");
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_TRUE(nlohmann::json::parse(error_body(bad_request("m")))["error"]["param"].is_null());
}

// Mutations of valid bodies (byte flips, cuts, insertions, duplications): every result is a request or an error.
TEST(ParseFuzz, MutatedBodiesNeverCrash) {
    const std::vector<std::string> seeds = {
        std::string("{") + kMsg + R"(, "max_tokens": 7, "stop": ["a"], "stream": true, "stream_options": {"include_usage": true}})",
        R"({"prompt": [1, 2, 3], "logprobs": 2, "temperature": 0})",
        R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}], "chat_template_kwargs": {"x": [1]}})",
    };
    std::mt19937 rng(12345);
    const char* alphabet = "{}[]\":,0123456789.eE-+ntrufals\\\xff\xc3\x80";
    size_t ok = 0, refused = 0;
    for (int it = 0; it < 20000; ++it) {
        std::string s = seeds[rng() % seeds.size()];
        const int edits = 1 + int(rng() % 4);
        for (int e = 0; e < edits && !s.empty(); ++e) {
            const size_t at = rng() % s.size();
            switch (rng() % 4) {
                case 0: s[at] = alphabet[rng() % std::strlen(alphabet)]; break;
                case 1: s.erase(at, 1 + rng() % 8); break;
                case 2: s.insert(at, 1, alphabet[rng() % std::strlen(alphabet)]); break;
                case 3: s.insert(at, s.substr(at, rng() % 16)); break;
            }
        }
        ApiError e1, e2;
        const bool a = parse_chat_request(s, &e1).is_ok(), b = parse_completion_request(s, &e2).is_ok();
        (a || b ? ok : refused)++;
        if (!a) {
            EXPECT_FALSE(e1.message.empty());
        }
        if (!b) {
            EXPECT_FALSE(e2.message.empty());
        }
        (void)parse_tokenize_request(s);
        (void)parse_detokenize_request(s);
    }
    EXPECT_GT(ok, 100u);
    EXPECT_GT(refused, 1000u);
}

}  // namespace
}  // namespace ember::server
