// structured_request.cpp: response_format / grammar / tools request fields (structured_request.h). Field shapes
// follow the OpenAI API reference (chat/completions: response_format, tools, tool_choice) and llama-server's
// `grammar` / `json_schema` extensions.
#include "server/structured_request.h"

#include <cctype>

namespace ember::server {

namespace {
constexpr size_t kMaxGrammarBytes = 256 << 10, kMaxTools = 128, kMaxToolName = 64, kMaxDescription = 16 << 10;

// OpenAI function names: a-z, A-Z, 0-9, underscores and dashes, at most 64.
bool valid_function_name(const std::string& s) {
    if (s.empty() || s.size() > kMaxToolName) return false;
    for (char c : s)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
    return true;
}

// A JSON Schema value: an object or a boolean.
bool read_schema(Fields& f, const char* key, bool required, ojson& out) {
    const ojson* v = f.get(key);
    if (!v) return required ? f.fail(strfmt("'%s' is required", f.name(key).c_str()), key) : true;
    if (!v->is_object() && !v->is_boolean())
        return f.fail(strfmt("'%s' must be a JSON Schema (an object or a boolean), not %s", f.name(key).c_str(),
                             json_type_name(*v)), key);
    out = *v;
    return true;
}

bool read_response_format(Fields& f, ojson& out) {
    const ojson* v = f.get("response_format");
    if (!v) return true;
    if (!v->is_object()) return f.fail("'response_format' must be an object", "response_format");
    Fields rf(*v, "response_format.");
    std::string type;
    if (!rf.string("type", 64, type)) return f.fail(rf.error().message, "response_format");
    if (type.empty()) return f.fail("'response_format.type' is required", "response_format");
    if (type == "text" || type == "json_object") {
        if (!rf.no_unknown("field")) return f.fail(rf.error().message, "response_format");
        if (type == "json_object") out["response_format"] = ojson{{"type", "json_object"}};
        return true;
    }
    if (type != "json_schema")
        return f.fail(strfmt("'response_format.type' must be text, json_object or json_schema (got '%s')", type.c_str()),
                      "response_format", "unsupported_parameter");
    const ojson* js = rf.get("json_schema");
    if (!js || !js->is_object()) return f.fail("'response_format.json_schema' must be an object", "response_format");
    if (!rf.no_unknown("field")) return f.fail(rf.error().message, "response_format");
    Fields jf(*js, "response_format.json_schema.");
    std::string name, description;
    bool strict = false;
    ojson schema;
    if (!jf.string("name", kMaxToolName, name) || !jf.string("description", kMaxDescription, description) ||
        !jf.boolean("strict", strict) || !read_schema(jf, "schema", true, schema) || !jf.no_unknown("field"))
        return f.fail(jf.error().message, "response_format");
    if (name.empty() || !valid_function_name(name))
        return f.fail("'response_format.json_schema.name' must be 1-64 letters, digits, '_' or '-'", "response_format");
    // The schema is enforced whether or not strict is set: a schema we cannot enforce exactly is refused.
    out["response_format"] = ojson{{"type", "json_schema"}, {"json_schema", {{"name", name}, {"schema", schema}}}};
    return true;
}
}  // namespace

bool read_structured(Fields& f, GenerationOptions& g) {
    ojson out = ojson::object();
    if (!read_response_format(f, out)) return false;
    std::string gbnf;
    if (!f.string("grammar", kMaxGrammarBytes, gbnf)) return false;
    if (f.get("grammar")) out["grammar"] = gbnf;
    ojson schema;
    if (!read_schema(f, "json_schema", false, schema)) return false;
    if (!schema.is_null()) out["json_schema"] = schema;
    if (out.size() > 1)
        return f.fail("give at most one of response_format (json_object / json_schema), grammar and json_schema",
                      "response_format");
    g.structured = std::move(out);
    return true;
}

bool read_tools(Fields& f, ChatRequest& r) {
    if (!f.boolean("parallel_tool_calls", r.parallel_tool_calls)) return false;
    const ojson* tools = f.get("tools");
    const ojson* choice = f.get("tool_choice");
    if (tools) {
        if (!tools->is_array()) return f.fail(strfmt("'tools' must be an array, not %s", json_type_name(*tools)), "tools");
        if (tools->size() > kMaxTools) return f.fail(strfmt("'tools' has more than %zu entries", kMaxTools), "tools");
        ojson clean = ojson::array();
        for (size_t i = 0; i < tools->size(); ++i) {
            const ojson& t = (*tools)[i];
            const std::string where = strfmt("tools[%zu]", i);
            if (!t.is_object()) return f.fail(strfmt("'%s' must be an object", where.c_str()), "tools");
            Fields tf(t, where + ".");
            std::string type;
            if (!tf.string("type", 64, type)) return f.fail(tf.error().message, "tools");
            if (type != "function")
                return f.fail(strfmt("'%s.type' must be 'function' (got '%s')", where.c_str(), type.c_str()), "tools",
                              "unsupported_parameter");
            const ojson* fn = tf.get("function");
            if (!fn || !fn->is_object()) return f.fail(strfmt("'%s.function' must be an object", where.c_str()), "tools");
            if (!tf.no_unknown("field")) return f.fail(tf.error().message, "tools");
            Fields ff(*fn, where + ".function.");
            std::string name, description;
            bool strict = false;
            ojson params;
            if (!ff.string("name", kMaxToolName, name) || !ff.string("description", kMaxDescription, description) ||
                !ff.boolean("strict", strict) || !read_schema(ff, "parameters", false, params) || !ff.no_unknown("field"))
                return f.fail(ff.error().message, "tools");
            if (!valid_function_name(name))
                return f.fail(strfmt("'%s.function.name' must be 1-64 letters, digits, '_' or '-'", where.c_str()), "tools");
            for (const auto& prev : clean)
                if (prev["function"]["name"] == name)
                    return f.fail(strfmt("two tools are named '%s'", name.c_str()), "tools");
            ojson c = {{"type", "function"}, {"function", {{"name", name}}}};
            if (!description.empty()) c["function"]["description"] = description;
            if (!params.is_null()) c["function"]["parameters"] = params;
            clean.push_back(std::move(c));
        }
        if (!clean.empty()) r.tools = std::move(clean);
    }
    if (choice) {
        auto c = grammar::parse_tool_choice(*choice);
        if (!c) return f.fail(c.message(), "tool_choice");
        r.tool_choice = c.value();
    }
    if (r.tools.is_null()) {
        if (choice && r.tool_choice.kind != grammar::ToolChoice::NONE)
            return f.fail("'tool_choice' needs 'tools'", "tool_choice");
        r.tool_choice.kind = grammar::ToolChoice::NONE;
        return true;
    }
    if (r.tool_choice.kind == grammar::ToolChoice::NAMED) {
        bool found = false;
        for (const auto& t : r.tools) found |= t["function"]["name"] == r.tool_choice.name;
        if (!found)
            return f.fail(strfmt("'tool_choice' names '%s', which is not among the tools", r.tool_choice.name.c_str()),
                          "tool_choice");
    }
    return true;
}

}  // namespace ember::server
