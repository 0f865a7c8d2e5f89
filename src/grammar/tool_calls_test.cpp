// Tool calls: parsing (whole message and streamed at every split point), tool_choice grammars, request fields.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/grammar_test_util.h"
#include "grammar/response_format.h"
#include "grammar/tool_calls.h"

namespace ember::grammar {
namespace {

using ojson = nlohmann::ordered_json;

// Streaming equals whole-message parsing for every way of cutting the text in two, and concatenated argument
// deltas equal the final arguments.
void check_streaming(const std::string& text, ToolFormat f) {
    const ParsedMessage whole = parse_tool_calls(text, f);
    for (size_t cut = 0; cut <= text.size(); ++cut) {
        ToolCallParser p(f);
        std::vector<ToolEvent> ev = p.push(text.substr(0, cut));
        for (auto& e : p.push(text.substr(cut))) ev.push_back(e);
        for (auto& e : p.finish()) ev.push_back(e);
        std::string content;
        std::map<int, std::string> args;
        std::vector<std::string> names;
        for (const auto& e : ev) {
            if (e.kind == ToolEvent::CONTENT) content += e.text;
            if (e.kind == ToolEvent::CALL_BEGIN) names.push_back(e.name);
            if (e.kind == ToolEvent::ARGUMENTS) args[e.index] += e.text;
            if (e.kind == ToolEvent::CALL_END) {
                EXPECT_EQ(args[e.index], e.text) << "cut " << cut;
            }
        }
        EXPECT_EQ(content, whole.content) << "cut " << cut;
        ASSERT_EQ(names.size(), whole.calls.size()) << "cut " << cut;
        for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(names[i], whole.calls[i]["function"]["name"]);
    }
}

TEST(ToolCalls, QwenFormat) {
    const std::string text = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2]}}\n</tool_call>\n"
                             "<tool_call>\n{\"name\": \"time\", \"arguments\": {}}\n</tool_call>";
    const ParsedMessage m = parse_tool_calls(text, ToolFormat::QWEN);
    EXPECT_EQ(m.content, "Let me check.\n\n");
    ASSERT_EQ(m.calls.size(), 2u);
    EXPECT_EQ(m.calls[0]["function"]["name"], "get_weather");
    EXPECT_EQ(ojson::parse(m.calls[0]["function"]["arguments"].get<std::string>()), ojson::parse(R"({"city":"Paris","days":[1,2]})"));
    EXPECT_EQ(m.calls[1]["function"]["arguments"], "{}");
    EXPECT_EQ(m.calls[0]["id"], "call_0");
    EXPECT_EQ(m.calls[1]["type"], "function");
    check_streaming(text, ToolFormat::QWEN);
    // Malformed: reported, and kept as content.
    const ParsedMessage bad = parse_tool_calls("<tool_call>{\"name\": 3}</tool_call>ok", ToolFormat::QWEN);
    EXPECT_TRUE(bad.calls.empty());
    EXPECT_EQ(bad.errors.size(), 1u);
    EXPECT_EQ(bad.content, "<tool_call>{\"name\": 3}</tool_call>ok");
    const ParsedMessage open = parse_tool_calls("x <tool_call>{\"name\": \"f\"", ToolFormat::QWEN);
    EXPECT_TRUE(open.calls.empty());
    EXPECT_EQ(open.errors.size(), 1u);
    check_streaming("plain text < with a tag-like <tool_ prefix", ToolFormat::QWEN);
}

TEST(ToolCalls, Llama3JsonFormat) {
    const std::string text = " {\"name\": \"search\", \"parameters\": {\"q\": \"a \\\"b\\\" }\"}}; {\"name\": \"f\", \"parameters\": {}}";
    const ParsedMessage m = parse_tool_calls(text, ToolFormat::LLAMA3);
    ASSERT_EQ(m.calls.size(), 2u);
    EXPECT_EQ(m.calls[0]["function"]["name"], "search");
    EXPECT_EQ(ojson::parse(m.calls[0]["function"]["arguments"].get<std::string>())["q"], "a \"b\" }");
    EXPECT_TRUE(m.content.empty());
    check_streaming(text, ToolFormat::LLAMA3);
    EXPECT_EQ(parse_tool_calls("Hello {not a call}", ToolFormat::LLAMA3).content, "Hello {not a call}");
    EXPECT_EQ(parse_tool_calls("<|python_tag|>{\"name\": \"f\", \"arguments\": {\"x\": 1}}", ToolFormat::LLAMA3).calls.size(), 1u);
    check_streaming("Hello {not a call}", ToolFormat::LLAMA3);
}

bool accepts(const GrammarIR& ir, const std::string& text) {
    static auto v = test::synthetic_vocab({}, "a", 0, 1);
    auto g = Grammar::create(ir, v);
    EXPECT_TRUE(g.is_ok()) << g.message();
    Matcher m(g.value());
    return m.accept_bytes(text).is_ok() && m.is_complete();
}

TEST(ToolCalls, ToolChoiceGrammars) {
    const ojson tools = ojson::parse(R"([
      {"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}},
      {"type":"function","function":{"name":"add","parameters":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}}}])");
    auto req = tool_call_grammar(tools, {ToolChoice::REQUIRED, ""}, ToolFormat::QWEN, false);
    ASSERT_TRUE(req.is_ok()) << req.message();
    ASSERT_TRUE(req.value().has_value());
    const GrammarIR& g = *req.value();
    EXPECT_TRUE(accepts(g, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>"));
    EXPECT_TRUE(accepts(g, "<think>\nok\n</think>\n\n<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}</tool_call>"));
    EXPECT_FALSE(accepts(g, "no call at all"));
    EXPECT_FALSE(accepts(g, "<tool_call>{\"name\":\"add\",\"arguments\":{\"a\":1}}</tool_call>"));     // b required
    EXPECT_FALSE(accepts(g, "<tool_call>{\"name\":\"nope\",\"arguments\":{}}</tool_call>"));
    EXPECT_FALSE(accepts(g, "<tool_call>{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":2}}</tool_call><tool_call>{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":2}}</tool_call>"));
    auto par = tool_call_grammar(tools, {ToolChoice::REQUIRED, ""}, ToolFormat::QWEN, true);
    EXPECT_TRUE(accepts(*par.value(), "<tool_call>{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":2}}</tool_call>\n<tool_call>{\"name\":\"add\",\"arguments\":{\"a\":3,\"b\":4}}</tool_call>"));
    auto named = tool_call_grammar(tools, {ToolChoice::NAMED, "get_weather"}, ToolFormat::LLAMA3, false);
    ASSERT_TRUE(named.is_ok()) << named.message();
    EXPECT_TRUE(accepts(*named.value(), "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}"));
    EXPECT_FALSE(accepts(*named.value(), "{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}"));
    auto aut = tool_call_grammar(tools, {ToolChoice::AUTO, ""}, ToolFormat::QWEN, false);
    EXPECT_TRUE(accepts(*aut.value(), "Just text."));
    EXPECT_TRUE(accepts(*aut.value(), "Text, then <tool_call>{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":2}}</tool_call>"));
    EXPECT_FALSE(accepts(*aut.value(), "Text, then <tool_call>{\"name\":\"add\"}</tool_call>"));
    EXPECT_FALSE(tool_call_grammar(tools, {ToolChoice::NONE, ""}, ToolFormat::QWEN, false).value().has_value());
    EXPECT_FALSE(tool_call_grammar(tools, {ToolChoice::NAMED, "zzz"}, ToolFormat::QWEN, false).is_ok());
    EXPECT_EQ(parse_tool_choice("required").value().kind, ToolChoice::REQUIRED);
    EXPECT_EQ(parse_tool_choice(ojson::parse(R"({"type":"function","function":{"name":"f"}})")).value().name, "f");
    EXPECT_FALSE(parse_tool_choice("sometimes").is_ok());
    // Any other shape is an error, never an exception.
    for (const char* bad : {R"({"type":5})", R"({"type":["function"],"function":{"name":"f"}})", R"({"type":null})",
                            R"({"type":"function","function":5})", R"({"type":"function","function":{"name":5}})",
                            R"({"type":"function"})", "5", "[1]", "true", R"({})"})
        EXPECT_FALSE(parse_tool_choice(ojson::parse(bad)).is_ok()) << bad;
}

TEST(ResponseFormat, RequestFields) {
    auto obj = request_grammar(ojson::parse(R"({"response_format":{"type":"json_object"}})"));
    ASSERT_TRUE(obj.is_ok() && obj.value().has_value());
    EXPECT_TRUE(accepts(*obj.value(), "{\"a\": [1]}"));
    EXPECT_FALSE(accepts(*obj.value(), "[1]"));
    auto sch = request_grammar(ojson::parse(
        R"({"response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false}}}})"));
    ASSERT_TRUE(sch.is_ok()) << sch.message();
    EXPECT_TRUE(accepts(*sch.value(), "{\"x\": 3}"));
    EXPECT_FALSE(accepts(*sch.value(), "{\"x\": 3, \"y\": 1}"));
    auto gb = request_grammar(ojson::parse(R"({"grammar":"root ::= \"a\"+"})"));
    ASSERT_TRUE(gb.is_ok());
    EXPECT_TRUE(accepts(*gb.value(), "aaa"));
    EXPECT_FALSE(request_grammar(ojson::parse(R"({"response_format":{"type":"text"}})")).value().has_value());
    EXPECT_FALSE(request_grammar(ojson::parse(R"({"response_format":{"type":"yaml"}})")).is_ok());
    EXPECT_FALSE(request_grammar(ojson::parse(R"({"grammar":"root ::= \"a\"","json_schema":{}})")).is_ok());
    EXPECT_FALSE(request_grammar(ojson::parse(R"({"response_format":{"type":"json_schema","json_schema":{"schema":{"not":{"type":"string"}}}}})")).is_ok());
}

}  // namespace
}  // namespace ember::grammar
