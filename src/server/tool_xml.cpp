// tool_xml.cpp: the Qwen3-Coder / Qwen3.5 XML tool-call form (tool_xml.h). The format is the one the Qwen3.5 chat
// template writes (tests/fixtures/templates/real_qwen3.5.json); the value rule (raw string or JSON) mirrors its
// `args_value | tojson if mapping or non-string sequence else args_value | string`.
#include "server/tool_xml.h"

#include "grammar/json_schema.h"

namespace ember::server {

namespace {
constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>", kFunction = "<function=",
                           kFunctionEnd = "</function>", kParam = "<parameter=", kParamEnd = "</parameter>";

size_t partial_suffix(std::string_view s, std::string_view tag) {
    for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
        if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
    return 0;
}

const ojson* parameters_of(const ojson& tools, const std::string& name) {
    if (!tools.is_array()) return nullptr;
    for (const auto& t : tools)
        if (t.is_object() && t.contains("function") && t["function"].value("name", "") == name)
            return t["function"].contains("parameters") ? &t["function"]["parameters"] : nullptr;
    return nullptr;
}

// A parameter written as raw text: its schema's type is "string" (alone, or with null).
bool is_string_schema(const ojson& s) {
    if (!s.is_object() || !s.contains("type")) return false;
    const ojson& t = s["type"];
    if (t.is_string()) return t == "string";
    if (!t.is_array()) return false;
    bool str = false;
    for (const auto& x : t) {
        if (x == "string") str = true;
        else if (x != "null") return false;
    }
    return str;
}

// The value text of a parameter → JSON: raw for string parameters, else JSON when it parses (else the text).
ojson convert_value(const ojson* params, const std::string& key, const std::string& text) {
    const ojson* schema = params && params->is_object() && params->contains("properties") &&
                                  (*params)["properties"].is_object() && (*params)["properties"].contains(key)
                              ? &(*params)["properties"][key]
                              : nullptr;
    if (schema && is_string_schema(*schema)) return text;
    ojson v = ojson::parse(text, nullptr, false);
    return v.is_discarded() ? ojson(text) : v;
}
}  // namespace

XmlToolParser::XmlToolParser(const ojson& tools, std::string id_prefix) : tools_(tools), id_prefix_(std::move(id_prefix)) {}

std::vector<grammar::ToolEvent> XmlToolParser::push(std::string_view text) {
    buf_ += text;
    std::vector<grammar::ToolEvent> out;
    scan(out, false);
    return out;
}

std::vector<grammar::ToolEvent> XmlToolParser::finish() {
    std::vector<grammar::ToolEvent> out;
    scan(out, true);
    if (in_call_) {
        out.push_back({grammar::ToolEvent::ERROR, n_calls_, "", "", "unterminated tool call"});
        out.push_back({grammar::ToolEvent::CONTENT, 0, "", "", std::string(kOpen) + call_ + buf_});
        in_call_ = false;
        buf_.clear();
    }
    return out;
}

void XmlToolParser::scan(std::vector<grammar::ToolEvent>& out, bool at_end) {
    using grammar::ToolEvent;
    while (!buf_.empty()) {
        const std::string_view tag = in_call_ ? kClose : kOpen;
        const size_t p = buf_.find(tag);
        if (p == std::string::npos) {
            const size_t keep = at_end ? 0 : partial_suffix(buf_, tag);
            const std::string head = buf_.substr(0, buf_.size() - keep);
            buf_.erase(0, buf_.size() - keep);
            if (in_call_) {
                call_ += head;
                stream_call(out);
            } else if (!head.empty()) {
                out.push_back({ToolEvent::CONTENT, 0, "", "", head});
            }
            return;
        }
        if (!in_call_) {
            if (p > 0) out.push_back({ToolEvent::CONTENT, 0, "", "", buf_.substr(0, p)});
            buf_.erase(0, p + tag.size());
            in_call_ = true;
            call_.clear();
            name_.clear();
            args_.clear();
            parsed_ = 0;
            n_params_ = 0;
            continue;
        }
        call_ += buf_.substr(0, p);
        buf_.erase(0, p + tag.size());
        stream_call(out);
        end_call(out);
        in_call_ = false;
    }
}

void XmlToolParser::stream_call(std::vector<grammar::ToolEvent>& out) {
    using grammar::ToolEvent;
    if (name_.empty()) {
        const size_t f = call_.find(kFunction);
        const size_t e = f == std::string::npos ? f : call_.find('>', f);
        if (e == std::string::npos) return;
        std::string name = call_.substr(f + kFunction.size(), e - f - kFunction.size());
        if (name.empty() || name.find_first_of("<\n") != std::string::npos) return;  // malformed: end_call says so
        name_ = std::move(name);
        parsed_ = e + 1;
        out.push_back({ToolEvent::CALL_BEGIN, n_calls_, id_prefix_ + std::to_string(n_calls_), name_, ""});
    }
    const ojson* params = parameters_of(tools_, name_);
    for (;;) {
        const size_t p = call_.find(kParam, parsed_);
        const size_t k = p == std::string::npos ? p : call_.find('>', p);
        const size_t e = k == std::string::npos ? k : call_.find(kParamEnd, k);
        if (e == std::string::npos) return;
        const std::string key = call_.substr(p + kParam.size(), k - p - kParam.size());
        std::string value = call_.substr(k + 1, e - k - 1);
        if (!value.empty() && value.front() == '\n') value.erase(0, 1);
        if (!value.empty() && value.back() == '\n') value.pop_back();
        const std::string piece = (n_params_++ ? ", " : "{") + ojson(key).dump() + ": " +
                                  dump_json(convert_value(params, key, value));
        args_ += piece;
        out.push_back({ToolEvent::ARGUMENTS, n_calls_, "", "", piece});
        parsed_ = e + kParamEnd.size();
    }
}

void XmlToolParser::end_call(std::vector<grammar::ToolEvent>& out) {
    using grammar::ToolEvent;
    if (name_.empty() || call_.find(kFunctionEnd, parsed_) == std::string::npos) {
        out.push_back({ToolEvent::ERROR, n_calls_, "", "", "malformed tool call: " + call_.substr(0, 200)});
        out.push_back({ToolEvent::CONTENT, 0, "", "", std::string(kOpen) + call_ + std::string(kClose)});
        return;
    }
    const std::string piece = n_params_ ? "}" : "{}";
    args_ += piece;
    out.push_back({ToolEvent::ARGUMENTS, n_calls_, "", "", piece});
    out.push_back({ToolEvent::CALL_END, n_calls_, id_prefix_ + std::to_string(n_calls_), name_, args_});
    ++n_calls_;
}

namespace {
// Copies src's rules and expressions into dst; returns an expression of dst that matches src's root. Expressions
// only refer to earlier ones (the builders append), so one pass in id order remaps them all.
int import_ir(grammar::GrammarIR& dst, const grammar::GrammarIR& src, const std::string& prefix) {
    using grammar::Op;
    std::vector<int> rule(size_t(src.n_rules())), expr(size_t(src.n_nodes()));
    for (int r = 0; r < src.n_rules(); ++r) rule[size_t(r)] = dst.add_rule(prefix + src.rule(r).name, src.rule(r).inline_ok);
    for (int e = 0; e < src.n_nodes(); ++e) {
        const grammar::Node& n = src.node(e);
        std::vector<int> kids;
        for (int k : n.kids) kids.push_back(expr[size_t(k)]);
        int x;
        switch (n.op) {
            case Op::EMPTY: x = dst.empty(); break;
            case Op::NOTHING: x = dst.nothing(); break;
            case Op::BYTES: x = dst.bytes(n.bytes); break;
            case Op::SEQ: x = dst.seq(kids); break;
            case Op::ALT: x = dst.alt(kids); break;
            case Op::REPEAT: x = dst.repeat(kids[0], n.min, n.max); break;
            case Op::REF: x = dst.ref(rule[size_t(n.rule)]); break;
            case Op::GRAPH: {
                grammar::Graph g = src.graph_of(e);
                for (auto& ed : g.edges)
                    if (ed.expr >= 0) ed.expr = expr[size_t(ed.expr)];
                x = dst.graph(std::move(g));
                break;
            }
            case Op::DFA: x = dst.dfa(src.dfa_of(e)); break;
            default: x = dst.nothing();
        }
        expr[size_t(e)] = x;
    }
    for (int r = 0; r < src.n_rules(); ++r)
        if (src.rule(r).body >= 0) dst.define(rule[size_t(r)], expr[size_t(src.rule(r).body)]);
    return dst.ref(rule[size_t(src.root)]);
}

// The VALUE of one parameter.
Expected<int> value_expr(grammar::GrammarIR& g, const ojson& schema, const std::string& key, int& n_imports) {
    if (is_string_schema(schema)) {
        for (const char* k : {"minLength", "maxLength", "pattern", "format", "not", "anyOf", "oneOf", "allOf"})
            EMBER_REQUIRE(!schema.contains(k), "string parameter '%s' uses '%s', which the XML tool-call form "
                          "(raw text values) cannot enforce", key.c_str(), k);
        if (schema.contains("enum") || schema.contains("const")) {
            const ojson vals = schema.contains("const") ? ojson::array({schema["const"]}) : schema["enum"];
            EMBER_REQUIRE(vals.is_array() && !vals.empty(), "parameter '%s': enum must be a non-empty array", key.c_str());
            std::vector<int> alts;
            for (const auto& v : vals) {
                EMBER_REQUIRE(v.is_string(), "string parameter '%s' has a non-string enum value", key.c_str());
                alts.push_back(g.literal(v.get<std::string>()));
            }
            return g.alt(std::move(alts));
        }
        return grammar::text_without(g, std::string(kParamEnd));  // the parser ends the value at the first one
    }
    auto ir = grammar::json_schema_grammar_json(schema);
    if (!ir) return ir.status().with_context(strfmt("parameter '%s'", key.c_str()));
    return import_ir(g, ir.value(), strfmt("p%d_", n_imports++));
}
}  // namespace

Expected<std::optional<grammar::GrammarIR>> xml_tool_call_grammar(const ojson& tools, const grammar::ToolChoice& choice,
                                                                  bool parallel) {
    using grammar::ToolChoice;
    if (choice.kind == ToolChoice::NONE) return std::optional<grammar::GrammarIR>();
    EMBER_REQUIRE(tools.is_array() && !tools.empty(), "tools must be a non-empty array");
    grammar::GrammarIR g;
    std::vector<int> branches;
    int n_imports = 0;
    for (const auto& t : tools) {
        const std::string name = t["function"]["name"].get<std::string>();
        if (choice.kind == ToolChoice::NAMED && name != choice.name) continue;
        const ojson params = t["function"].value("parameters", ojson::object());
        EMBER_REQUIRE(params.is_object() && (!params.contains("type") || params["type"] == "object"),
                      "tool '%s': parameters must be an object schema for the XML tool-call form", name.c_str());
        for (const char* k : {"patternProperties", "anyOf", "oneOf", "allOf", "$ref", "not", "minProperties",
                              "maxProperties", "propertyNames"})
            EMBER_REQUIRE(!params.contains(k), "tool '%s': '%s' in parameters is not supported in the XML tool-call form",
                          name.c_str(), k);
        const ojson props = params.value("properties", ojson::object());
        const ojson req = params.value("required", ojson::array());
        EMBER_REQUIRE(props.is_object() && req.is_array(), "tool '%s': bad properties / required", name.c_str());
        for (const auto& r : req)
            EMBER_REQUIRE(r.is_string() && props.contains(r.get<std::string>()),
                          "tool '%s': required parameter %s has no schema in properties", name.c_str(), r.dump().c_str());
        std::vector<int> parts = {g.literal("<tool_call>\n<function=" + name + ">\n")};
        for (auto it = props.begin(); it != props.end(); ++it) {
            EMBER_REQUIRE(!it.key().empty() && it.key().find_first_of("<>\n") == std::string::npos,
                          "tool '%s': parameter name %s cannot be written in the XML tool-call form", name.c_str(),
                          ojson(it.key()).dump().c_str());
            EMBER_ASSIGN(int v, value_expr(g, it.value(), it.key(), n_imports));
            const int p = g.seq({g.literal("<parameter=" + it.key() + ">\n"), v, g.literal("\n</parameter>\n")});
            bool required = false;
            for (const auto& r : req) required |= r == it.key();
            parts.push_back(required ? p : g.opt(p));
        }
        parts.push_back(g.literal("</function>\n</tool_call>"));
        branches.push_back(g.seq(std::move(parts)));
    }
    EMBER_REQUIRE(!branches.empty(), "tool_choice names function '%s', which is not among the tools", choice.name.c_str());
    const int call = g.alt(std::move(branches));
    const int ws = g.star(g.bytes(grammar::ByteSet::of(' ') | grammar::ByteSet::of('\n')));
    const int calls = parallel ? g.seq({call, g.star(g.seq({ws, call}))}) : call;
    EMBER_ASSIGN(int text, grammar::text_without(g, "<tool_call>"));
    const int body = choice.kind == ToolChoice::AUTO ? g.seq({text, g.opt(g.seq({calls, ws}))}) : g.seq({text, calls, ws});
    const int root = g.add_rule("message");
    g.define(root, body);
    g.root = root;
    return std::optional<grammar::GrammarIR>(std::move(g));
}

}  // namespace ember::server
