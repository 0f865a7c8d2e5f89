// tool_choice grammars (tool_calls.h): the call object as a JSON Schema (anyOf over the functions, name first),
// wrapped in the format's call syntax, after free text that cannot start a call.
#include <nlohmann/json.hpp>

#include "grammar/byte_dfa.h"
#include "grammar/json_schema_impl.h"
#include "grammar/tool_calls.h"
#include "grammar/utf8.h"

namespace ember::grammar {

// UTF-8 text that does not contain `tag`, as a DFA expression of g (tool_calls.h).
Expected<int> text_without(GrammarIR& g, std::string_view tag) {
    GrammarIR lex;
    EMBER_ASSIGN(ByteDfa text, dfa_from_expr(lex, lex.star(utf8_expr(lex, cp_any()))));
    const int any = lex.star(lex.bytes(ByteSet::all()));
    EMBER_ASSIGN(ByteDfa has, dfa_from_expr(lex, lex.seq({any, lex.literal(tag), any})));
    EMBER_ASSIGN(ByteDfa d, dfa_intersect(text, dfa_complement(has)));
    return dfa_expr(g, std::move(d));
}

Expected<std::optional<GrammarIR>> tool_call_grammar(const ojson& tools, const ToolChoice& choice, ToolFormat f,
                                                     bool parallel, const JsonSchemaOptions& opt) {
    if (choice.kind == ToolChoice::NONE) return std::optional<GrammarIR>();
    EMBER_REQUIRE(tools.is_array() && !tools.empty(), "tools must be a non-empty array");
    const char* args_key = f == ToolFormat::LLAMA3 ? "parameters" : "arguments";
    ojson branches = ojson::array();
    for (const auto& t : tools) {
        EMBER_REQUIRE(t.is_object() && t.value("type", "") == "function" && t.contains("function") && t["function"].is_object() &&
                          t["function"].contains("name") && t["function"]["name"].is_string(),
                      "each tool must be {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": ...}}");
        const std::string name = t["function"]["name"].get<std::string>();
        if (choice.kind == ToolChoice::NAMED && name != choice.name) continue;
        const ojson params = t["function"].contains("parameters") ? t["function"]["parameters"]
                                                                   : ojson{{"type", "object"}, {"properties", ojson::object()}};
        ojson props = ojson::object();
        props["name"] = ojson{{"const", name}};
        props[args_key] = params;
        branches.push_back(ojson{{"type", "object"}, {"properties", props}, {"required", ojson::array({"name", args_key})},
                                 {"additionalProperties", false}});
    }
    EMBER_REQUIRE(!branches.empty(), "tool_choice names function '%s', which is not among the tools", choice.name.c_str());
    const ojson call_schema = branches.size() == 1 ? branches[0] : ojson{{"anyOf", branches}};
    auto ir = json_schema_grammar_json(call_schema, opt);
    if (!ir) return ir.status().with_context("tool parameters");
    GrammarIR g = std::move(ir.value());
    const int json_call = g.ref(g.root);
    const int ws = g.star(g.bytes(ByteSet::of(' ') | ByteSet::of('\t') | ByteSet::of('\n') | ByteSet::of('\r')));
    int call, sep;
    if (f == ToolFormat::QWEN) {
        call = g.seq({g.literal("<tool_call>"), ws, json_call, ws, g.literal("</tool_call>")});
        sep = ws;
    } else {
        call = json_call;
        sep = g.seq({ws, g.byte(';'), ws});
    }
    const int calls = parallel ? g.seq({call, g.star(g.seq({sep, call}))}) : call;
    int body;
    if (f == ToolFormat::QWEN) {
        EMBER_ASSIGN(int text, text_without(g, "<tool_call>"));
        body = choice.kind == ToolChoice::AUTO ? g.seq({text, g.opt(g.seq({calls, ws}))}) : g.seq({text, calls, ws});
    } else if (choice.kind == ToolChoice::AUTO) {  // a call, or a message that does not start with '{'
        const int first = utf8_expr(g, cp_minus(cp_any(), cp_normalize({{'{', '{'}, {' ', ' '}, {'\t', '\n'}, {'\r', '\r'}})));
        body = g.alt({g.seq({ws, calls, ws}), g.seq({ws, first, g.star(utf8_expr(g, cp_any()))}), ws});
    } else {
        body = g.seq({ws, calls, ws});
    }
    const int root = g.add_rule("message");
    g.define(root, body);
    g.root = root;
    return std::optional<GrammarIR>(std::move(g));
}

}  // namespace ember::grammar
