// Structured output and tool calling in the server's request layer: the request readers (shapes, refusals), the
// tool-call format of the real chat templates (tests/fixtures/templates), and the tool-call deltas of a streamed
// reply reassembling to the whole message's calls whatever the pieces.
#include <gtest/gtest.h>

#include <fstream>

#include "server/structured.h"
#include "server/tool_stream.h"

namespace ember::server {
namespace {

constexpr const char* kMsg = R"("messages": [{"role": "user", "content": "hi"}])";

Expected<ChatRequest> chat(const std::string& fields, ApiError* e = nullptr) {
    return parse_chat_request(std::string("{") + kMsg + ", " + fields + "}", e);
}

TEST(StructuredRequest, ResponseFormatsAndGrammarsAreKeptAsGiven) {
    auto r = chat(R"("response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": true,
                     "schema": {"type": "object"}}})");
    ASSERT_TRUE(r.is_ok()) << r.message();
    EXPECT_EQ(r->gen.structured["response_format"]["json_schema"]["schema"]["type"], "object");
    r = chat(R"("response_format": {"type": "text"})");
    ASSERT_TRUE(r.is_ok());
    EXPECT_TRUE(r->gen.structured.empty());
    r = chat(R"("grammar": "root ::= \"a\"")");
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r->gen.structured["grammar"], "root ::= \"a\"");
    auto c = parse_completion_request(R"({"prompt": "x", "json_schema": {"type": "integer"}})");
    ASSERT_TRUE(c.is_ok()) << c.message();
    EXPECT_EQ(c->gen.structured["json_schema"]["type"], "integer");
}

TEST(StructuredRequest, MalformedShapesNameTheField) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {R"("response_format": {"type": "yaml"})", "response_format"},
        {R"("response_format": {"type": "json_object", "schema": {}})", "response_format"},
        {R"("response_format": {"type": "json_schema", "json_schema": {"name": "x"}})", "response_format"},
        {R"("response_format": {"type": "json_schema", "json_schema": {"name": "bad name", "schema": {}}})", "response_format"},
        {R"("response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": 5}})", "response_format"},
        {R"("response_format": {"type": "json_object"}, "grammar": "root ::= \"a\"")", "response_format"},
        {R"("grammar": 5)", "grammar"},
        {R"("json_schema": "s")", "json_schema"},
        {R"("ignore_eos": true, "grammar": "root ::= \"a\"")", "ignore_eos"},
        {R"("tools": 5)", "tools"},
        {R"("tools": [{"type": "retrieval"}])", "tools"},
        {R"("tools": [{"type": "function", "function": {"name": "a b"}}])", "tools"},
        {R"("tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])", "tools"},
        {R"("tools": [{"type": "function", "function": {"name": "f", "parameters": []}}])", "tools"},
        {R"("tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "always")", "tool_choice"},
        {R"("tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}})", "tool_choice"},
        {R"("tool_choice": "required")", "tool_choice"},
        {R"("tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": 5})", "tool_choice"},
        {R"("tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": 5}})", "tool_choice"},
        {R"("tools": [{"type": "function", "function": {"name": "f"}}], "response_format": {"type": "json_object"})", "response_format"},
    };
    for (const auto& [fields, param] : cases) {
        ApiError e;
        EXPECT_FALSE(chat(fields, &e).is_ok()) << fields;
        EXPECT_EQ(e.status, 400) << fields;
        EXPECT_EQ(e.param, param) << fields << ": " << e.message;
    }
}

TEST(StructuredRequest, ToolsAndChoices) {
    auto r = chat(R"("tools": [{"type": "function", "function": {"name": "f", "description": "d",
                     "parameters": {"type": "object"}, "strict": true}}], "tool_choice": {"type": "function",
                     "function": {"name": "f"}}, "parallel_tool_calls": false)");
    ASSERT_TRUE(r.is_ok()) << r.message();
    EXPECT_EQ(r->tools[0]["function"]["parameters"]["type"], "object");
    EXPECT_EQ(r->tool_choice.kind, grammar::ToolChoice::NAMED);
    EXPECT_FALSE(r->parallel_tool_calls);
    r = chat(R"("tools": [{"type": "function", "function": {"name": "f"}}])");
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r->tool_choice.kind, grammar::ToolChoice::AUTO);
    r = chat(R"("tools": [], "tool_choice": "none")");  // harmless defaults
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r->tool_choice.kind, grammar::ToolChoice::NONE);
}

std::string template_source(const std::string& name) {
    std::ifstream f(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/templates/real_" + name + ".json");
    return ojson::parse(f)["template"].get<std::string>();
}

TEST(StructuredRequest, ToolFormatOfRealTemplates) {
    const std::vector<std::pair<const char*, ToolSyntax>> cases = {
        {"qwen2.5-instruct", ToolSyntax::QWEN_JSON},     {"qwen3", ToolSyntax::QWEN_JSON},
        {"hermes-3-llama-3.1", ToolSyntax::QWEN_JSON},   {"qwq", ToolSyntax::QWEN_JSON},
        {"llama-3.1-instruct", ToolSyntax::LLAMA3_JSON}, {"llama-3.2-instruct", ToolSyntax::LLAMA3_JSON},
        {"qwen3.5", ToolSyntax::QWEN_XML},               {"qwen3-coder", ToolSyntax::QWEN_XML},
    };
    for (const auto& [n, want] : cases) {
        auto f = template_tool_format(template_source(n));
        ASSERT_TRUE(f.is_ok()) << n << ": " << f.message();
        EXPECT_EQ(f.value(), want) << n;
    }
    auto f = template_tool_format(template_source("smollm2-135m-instruct"));
    ASSERT_FALSE(f.is_ok());
    EXPECT_NE(f.message().find("no tool support"), std::string::npos);
    EXPECT_FALSE(template_tool_format(template_source("gemma-2")).is_ok());
    EXPECT_FALSE(template_tool_format("").is_ok());
}

const ojson kTools = ojson::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "zip": {"type": "string"}, "n": {"type": "integer"},
    "tags": {"type": "array"}}}}}, {"type": "function", "function": {"name": "g"}}])");

// The reply through a ToolStream in pieces of `step` bytes: content, and per call (name, arguments) from the deltas.
struct Streamed {
    std::string content;
    std::vector<std::pair<std::string, std::string>> calls;
    std::vector<ojson> whole;  // ToolStream::calls()
};
Streamed stream(ToolSyntax f, const std::string& text, size_t step) {
    ToolStream ts(f, kTools, "call_");
    Streamed out;
    for (size_t i = 0;; i += step) {
        ReplyDelta d;
        d.content = i < text.size() ? text.substr(i, step) : "";
        const bool last = i + step >= text.size();
        if (last) ts.finish(d);
        else ts.push(d);
        out.content += d.content;
        for (const auto& c : d.tool_calls) {
            const size_t k = c["index"].get<size_t>();
            if (c.contains("id")) {
                EXPECT_EQ(k, out.calls.size());
                EXPECT_EQ(c["type"], "function");
                out.calls.push_back({c["function"]["name"].get<std::string>(), ""});
            }
            EXPECT_LT(k, out.calls.size());
            if (k < out.calls.size()) out.calls[k].second += c["function"]["arguments"].get<std::string>();
        }
        if (last) break;
    }
    out.whole = ts.calls();
    return out;
}

// Split at every piece size, the deltas reassemble to the calls of the whole reply (and, for the JSON forms, to
// those of grammar::parse_tool_calls).
TEST(ToolStream, DeltasReassembleToTheWholeCalls) {
    const std::vector<std::pair<ToolSyntax, std::string>> replies = {
        {ToolSyntax::QWEN_JSON, "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, {\"b\": \"}\"}]}}\n"
                                "</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>"},
        {ToolSyntax::LLAMA3_JSON, "{\"name\": \"f\", \"parameters\": {\"x\": \"a;b\"}}; {\"name\": \"g\", \"parameters\": {}}"},
        {ToolSyntax::QWEN_XML, "Let me look.\n\n<tool_call>\n<function=f>\n<parameter=city>\nNew\n<b>York</b>\n"
                               "</parameter>\n<parameter=zip>\n01234\n</parameter>\n<parameter=n>\n42\n</parameter>\n"
                               "<parameter=tags>\n[\"a\", 1]\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n"
                               "<function=g>\n</function>\n</tool_call>"},
    };
    for (const auto& [fmt, text] : replies) {
        const Streamed whole = stream(fmt, text, text.size());
        ASSERT_EQ(whole.calls.size(), 2u) << text;
        ASSERT_EQ(whole.whole.size(), 2u);
        for (size_t k = 0; k < 2; ++k) {
            EXPECT_EQ(whole.whole[k]["function"]["name"], whole.calls[k].first);
            EXPECT_EQ(whole.whole[k]["function"]["arguments"], whole.calls[k].second);
            EXPECT_TRUE(ojson::parse(whole.calls[k].second, nullptr, false).is_object()) << whole.calls[k].second;
        }
        if (fmt != ToolSyntax::QWEN_XML) {
            const auto ref = grammar::parse_tool_calls(
                text, fmt == ToolSyntax::QWEN_JSON ? grammar::ToolFormat::QWEN : grammar::ToolFormat::LLAMA3);
            ASSERT_EQ(ref.calls.size(), 2u);
            for (size_t k = 0; k < 2; ++k) EXPECT_EQ(ref.calls[k]["function"]["arguments"], whole.calls[k].second);
            EXPECT_EQ(ref.content, whole.content);
        } else {  // strings stay raw text ("01234", a multi-line city), other types are JSON
            EXPECT_EQ(ojson::parse(whole.calls[0].second),
                      ojson::parse(R"({"city": "New\n<b>York</b>", "zip": "01234", "n": 42, "tags": ["a", 1]})"));
            EXPECT_EQ(whole.calls[1].second, "{}");
            EXPECT_EQ(whole.content, "Let me look.\n\n\n");  // the text between the calls included
        }
        for (size_t step : {size_t(1), size_t(2), size_t(5), size_t(13)}) {
            const Streamed s = stream(fmt, text, step);
            EXPECT_EQ(s.calls, whole.calls) << step;
            EXPECT_EQ(s.content, whole.content) << step;
        }
    }
}

TEST(ToolStream, MalformedCallsBecomeContent) {
    for (const std::string& text : {std::string("<tool_call>\n<function=f>\n<parameter=n>\n1\n</parameter>\n</tool_call>"),
                                    std::string("a <tool_call>\n<function=f>\n")}) {
        const Streamed s = stream(ToolSyntax::QWEN_XML, text, 3);
        EXPECT_TRUE(s.whole.empty()) << text;
        EXPECT_NE(s.content.find("<function=f>"), std::string::npos) << s.content;
    }
}

}  // namespace
}  // namespace ember::server
