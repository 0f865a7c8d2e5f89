// Request fields → grammar (response_format.h).
#include "grammar/response_format.h"

#include <nlohmann/json.hpp>

#include "grammar/gbnf.h"

namespace ember::grammar {

Expected<std::optional<GrammarIR>> request_grammar(const nlohmann::ordered_json& req, const JsonSchemaOptions& opt) {
    using R = std::optional<GrammarIR>;
    EMBER_REQUIRE(req.is_object(), "request must be a JSON object");
    int given = 0;
    R out;
    if (req.contains("response_format") && !req["response_format"].is_null()) {
        const auto& rf = req["response_format"];
        EMBER_REQUIRE(rf.is_object() && rf.contains("type") && rf["type"].is_string(), "response_format must have a type");
        const std::string type = rf["type"].get<std::string>();
        if (type == "json_object") {
            out = json_value_grammar(true, opt);
            ++given;
        } else if (type == "json_schema") {
            EMBER_REQUIRE(rf.contains("json_schema") && rf["json_schema"].is_object() && rf["json_schema"].contains("schema"),
                          "response_format json_schema needs json_schema.schema");
            const auto& js = rf["json_schema"];
            if (js.contains("strict")) EMBER_REQUIRE(js["strict"].is_boolean(), "json_schema.strict must be a boolean");
            auto g = json_schema_grammar_json(js["schema"], opt);
            if (!g) return g.status().with_context("response_format");
            out = std::move(g.value());
            ++given;
        } else if (type != "text") {
            return errorf("response_format type '%s' is not supported (text, json_object, json_schema)", type.c_str());
        }
    }
    if (req.contains("grammar") && !req["grammar"].is_null()) {
        EMBER_REQUIRE(req["grammar"].is_string(), "grammar must be a GBNF string");
        auto g = parse_gbnf(req["grammar"].get<std::string>());
        if (!g) return g.status().with_context("grammar");
        out = std::move(g.value());
        ++given;
    }
    if (req.contains("json_schema") && !req["json_schema"].is_null()) {
        auto g = json_schema_grammar_json(req["json_schema"], opt);
        if (!g) return g.status().with_context("json_schema");
        out = std::move(g.value());
        ++given;
    }
    EMBER_REQUIRE(given <= 1, "give at most one of response_format, grammar, json_schema");
    return out;
}

}  // namespace ember::grammar
