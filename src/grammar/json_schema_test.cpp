// JSON Schema → grammar: instances accepted / rejected per keyword, numeric ranges against arithmetic, refused
// keywords, and masks against the Earley brute force on schema grammars.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "grammar/grammar_test_util.h"
#include "grammar/json_schema.h"

namespace ember::grammar {
namespace {

std::shared_ptr<const TokenIndex> bytes_vocab() {
    static auto v = test::synthetic_vocab({}, "a", 0, 1);
    return v;
}

std::shared_ptr<Grammar> schema(const std::string& s, JsonSchemaOptions opt = {}) {
    auto ir = json_schema_grammar(s, opt);
    EXPECT_TRUE(ir.is_ok()) << s << ": " << ir.message();
    if (!ir) return nullptr;
    auto g = Grammar::create(ir.value(), bytes_vocab());
    EXPECT_TRUE(g.is_ok()) << g.message();
    return g.is_ok() ? g.value() : nullptr;
}

bool accepts(const std::shared_ptr<Grammar>& g, const std::string& text) {
    Matcher m(g);
    return m.accept_bytes(text).is_ok() && m.is_complete();
}

struct Case {
    const char* schema;
    std::vector<const char*> yes, no;
};

TEST(JsonSchema, KeywordsAcceptAndReject) {
    const Case cases[] = {
        {R"({"type":"integer"})", {"0", "-12", "123456789012345678901234"}, {"01", "1.5", "\"1\"", "-", "1e3"}},
        {R"({"type":"number"})", {"0", "-1.25", "3e-7", "1E+10", "12.0"}, {".5", "1.", "--1", "0x1"}},
        {R"({"type":["string","null"]})", {"null", "\"a\"", "\"\\u00e9\\n\""}, {"1", "nul", "\"\x01\""}},
        {R"({"type":"string","nullable":true})", {"null", "\"\""}, {"true"}},
        {R"({"enum":["a",1,null,{"x":[1,2]}]})", {"\"a\"", "1", "1.0", "null", "{\"x\": [1, 2]}", "{\"x\":[1,2]}"}, {"\"b\"", "2", "{\"x\":[2,1]}"}},
        {R"({"const":"x\"y"})", {"\"x\\\"y\""}, {"\"xy\""}},
        {R"({"type":"string","minLength":2,"maxLength":3})", {"\"ab\"", "\"abc\"", "\"é日\"", "\"\\n\\t\""}, {"\"a\"", "\"abcd\""}},
        {R"({"type":"string","pattern":"^[a-z]+\\d$"})", {"\"ab1\"", "\"z9\""}, {"\"1\"", "\"ab\"", "\"Ab1\""}},
        {R"({"type":"string","pattern":"b+"})", {"\"abbbc\"", "\"b\""}, {"\"ac\""}},  // unanchored: search
        {R"({"type":"string","format":"date"})", {"\"2024-02-29\"", "\"2000-02-29\"", "\"0001-12-31\""},
         {"\"2024-13-01\"", "\"24-01-01\"", "\"2023-02-29\"", "\"1900-02-29\"", "\"2024-04-31\"", "\"0000-01-01\""}},
        {R"({"type":"string","format":"uuid"})", {"\"123e4567-e89b-12d3-a456-426614174000\""}, {"\"123e4567\""}},
        {R"({"type":"string","format":"ipv4"})", {"\"192.168.0.255\""}, {"\"256.1.1.1\"", "\"1.2.3\""}},
        {R"({"type":"string","format":"date-time"})", {"\"2020-01-01T10:20:30Z\"", "\"2020-01-01T10:20:30.5+01:00\""},
         {"\"2020-01-01\"", "\"2020-01-01 10:20:30Z\"", "\"2020-01-01T10:20:60Z\""}},
        {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["b"],"additionalProperties":false})",
         {"{\"b\":\"x\"}", "{\"a\": 1, \"b\": \"x\"}", "{ \"a\" : 1 ,\n \"b\" : \"\" }"},
         {"{}", "{\"a\":1}", "{\"b\":\"x\",\"c\":1}", "{\"b\":1}", "{\"b\":\"x\",\"b\":\"y\"}"}},
        {R"({"type":"object","properties":{"a":{"type":"integer"}}})",  // additional properties: any value
         {"{}", "{\"a\":1,\"zz\":[true,{}]}", "{\"q\":null}"}, {"{\"a\":\"x\"}", "{\"a\":1,\"a\":2}"}},
        {R"({"type":"object","patternProperties":{"^x-":{"type":"integer"}},"additionalProperties":{"type":"string"}})",
         {"{\"x-a\":1,\"b\":\"s\"}", "{}"}, {"{\"x-a\":\"s\"}", "{\"b\":1}"}},
        {R"({"type":"object","propertyNames":{"pattern":"^[a-c]+$"}})", {"{\"ab\":1}"}, {"{\"ad\":1}"}},
        {R"({"type":"object","minProperties":1,"maxProperties":2})", {"{\"a\":1}", "{\"a\":1,\"b\":2}"}, {"{}", "{\"a\":1,\"b\":2,\"c\":3}"}},
        {R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})", {"[1]", "[1, 2, 3]"}, {"[]", "[1,2,3,4]", "[\"a\"]"}},
        {R"({"type":"array","prefixItems":[{"type":"string"},{"type":"boolean"}],"items":false})", {"[\"a\",true]", "[\"a\"]", "[]"}, {"[\"a\",true,1]", "[true]"}},
        {R"({"type":"array","items":[{"type":"integer"}],"additionalItems":{"type":"string"}})", {"[1,\"a\",\"b\"]"}, {"[1,2]"}},
        {R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})", {"1", "\"a\""}, {"\"ab\"", "true"}},
        {R"({"oneOf":[{"type":"integer"},{"type":"boolean"}]})", {"1", "false"}, {"\"a\""}},
        {R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"a":{"minimum":5}}}]})",
         {"{\"a\":5}", "{\"a\":9,\"b\":1}"}, {"{\"a\":4}", "{}"}},
        {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/node"}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/node"})",
         {"{\"v\":1}", "{\"v\":1,\"next\":{\"v\":2,\"next\":{\"v\":3}}}"}, {"{\"v\":1,\"next\":{}}"}},
        {R"({"type":"object","required":["k"],"additionalProperties":false})", {}, {"{}", "{\"k\":1}"}},
        // dependencies (list form): a needs b, c needs a; the needed key may come before or after
        {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},"dependencies":{"a":["b"],"c":["a"]}})",
         {"{}", "{\"b\":1}", "{\"a\":1,\"b\":2}", "{\"a\":1,\"b\":2,\"c\":3}", "{\"b\":2,\"x\":0}"},
         {"{\"a\":1}", "{\"b\":1,\"c\":3}", "{\"a\":1,\"c\":3}", "{\"c\":3}"}},
        {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"dependentRequired":{"b":["a"]},"additionalProperties":false})",
         {"{\"a\":1,\"b\":2}", "{\"a\":1}", "{}"}, {"{\"b\":2}"}},
        // a trigger and a needed key that are not in properties get slots of their own (additional schema)
        {R"({"type":"object","properties":{"a":{"type":"integer"}},"dependencies":{"z":["y"]},"additionalProperties":{"type":"boolean"}})",
         {"{\"a\":1,\"z\":true,\"y\":false}", "{\"q\":true}", "{\"y\":true}"}, {"{\"z\":true}", "{\"z\":1,\"y\":true}"}},
        // at most 2 listed keys: in any order (additional keys after them), never twice
        {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]})",
         {"{\"b\":\"x\",\"a\":1}", "{\"a\":1,\"b\":\"x\"}", "{\"a\":1,\"z\":0}", "{\"b\":\"x\",\"a\":1,\"z\":[]}"},
         {"{\"b\":\"x\"}", "{\"a\":1,\"a\":2}", "{\"b\":\"x\",\"a\":1,\"b\":\"y\"}", "{\"b\":1,\"a\":1}"}},
        {R"({"type":"object","properties":{"a":{},"b":{}},"dependencies":{"b":["a"]},"additionalProperties":false})",
         {"{\"b\":1,\"a\":2}", "{\"a\":1}", "{}"}, {"{\"b\":1}", "{\"b\":1,\"c\":2}"}},
        {R"({"type":"object","properties":{"a":{},"b":{},"c":{}},"additionalProperties":false})", {"{\"a\":1,\"c\":2}"},
         {"{\"a\":1,\"a\":1}", "{\"d\":1}"}},
        // not of a schema that accepts everything (a forbidden property), not false (no constraint)
        {R"({"type":"object","properties":{"a":{"not":{}},"b":{"not":false}}})", {"{}", "{\"b\":[1]}", "{\"c\":1}"},
         {"{\"a\":1}", "{\"a\":null}"}},
        {R"({"not":{"description":"anything"}})", {}, {"1"}},
        // schema dependencies: objects without the key, or with it and the schema
        {R"({"type":"object","properties":{"a":{"type":"integer"},"t":{"type":"string"}},"dependencies":{"a":{"properties":{"t":{"enum":["x"]}}}}})",
         {"{\"t\":\"y\"}", "{\"a\":1,\"t\":\"x\"}", "{\"a\":1}", "{}"}, {"{\"a\":1,\"t\":\"y\"}", "{\"a\":\"s\"}"}},
        {R"({"dependentSchemas":{"a":{"required":["b"]}}})", {"{\"a\":1,\"b\":2}", "{\"b\":2}", "{}", "\"s\"", "3"},
         {"{\"a\":1}", "{\"a\":1,\"c\":2}"}},
        // oneOf of required lists: exactly one list complete (objects only)
        {R"({"type":"object","properties":{"a":{},"b":{},"c":{}},"oneOf":[{"required":["a","b"]},{"required":["c"]}]})",
         {"{\"a\":1,\"b\":2}", "{\"c\":3}", "{\"a\":1,\"c\":3}", "{\"b\":[],\"c\":3,\"z\":0}"},
         {"{}", "{\"a\":1}", "{\"a\":1,\"b\":2,\"c\":3}", "\"x\""}},
        {R"({"oneOf":[{"required":["a"],"description":"d"},{"required":["b"]}]})", {"{\"a\":1}", "{\"b\":1,\"x\":2}"},
         {"{\"a\":1,\"b\":2}", "{}", "\"s\"", "5"}},
        {R"({"allOf":[{"dependencies":{"a":["b"]}},{"dependencies":{"a":["c"]}}],"properties":{"a":{},"b":{},"c":{}}})",
         {"{\"a\":1,\"b\":2,\"c\":3}", "{\"b\":2}"}, {"{\"a\":1,\"b\":2}", "{\"a\":1,\"c\":3}"}},
        {R"(true)", {"[]", "{\"a\":[1,{\"b\":null}]}", "\"x\"", "-0.5e3"}, {"[", "{\"a\"}"}},
    };
    for (const Case& c : cases) {
        auto ir = json_schema_grammar(c.schema);
        ASSERT_TRUE(ir.is_ok()) << c.schema << ": " << ir.message();
        auto g = Grammar::create(ir.value(), bytes_vocab());
        if (c.yes.empty()) {  // an unsatisfiable schema: refused at compile time
            EXPECT_FALSE(g.is_ok()) << c.schema;
            continue;
        }
        ASSERT_TRUE(g.is_ok()) << c.schema << ": " << g.message();
        for (const char* s : c.yes) EXPECT_TRUE(accepts(g.value(), s)) << c.schema << " on " << s;
        for (const char* s : c.no) EXPECT_FALSE(accepts(g.value(), s)) << c.schema << " on " << s;
    }
}

TEST(JsonSchema, RefusedKeywordsNameThemselves) {
    const std::pair<const char*, const char*> cases[] = {
        {R"({"not":{"type":"string"}})", "'not'"},
        {R"({"if":{"type":"string"},"then":{"minLength":1}})", "'if'"},
        {R"({"type":"array","uniqueItems":true})", "'uniqueItems'"},
        {R"({"type":"array","contains":{"type":"integer"}})", "'contains'"},
        {R"({"dependencies":{"a":{"not":{"type":"string"}}}})", "'not'"},
        {R"({"$ref":"http://example.com/s.json"})", "only references within the document"},
        {R"({"$ref":"#/definitions/missing"})", "does not resolve"},
        {R"({"type":"string","format":"color"})", "'color'"},
        {R"({"type":"string","pattern":"(?=a)b"})", "lookahead"},
        {R"({"oneOf":[{"type":"integer"},{"minimum":3}]})", "may overlap"},
        {R"({"type":"number","multipleOf":0.123456789})", "multipleOf"},
    };
    for (auto& [s, want] : cases) {
        auto ir = json_schema_grammar(s);
        ASSERT_FALSE(ir.is_ok()) << s;
        EXPECT_NE(ir.message().find(want), std::string::npos) << s << " → " << ir.message();
    }
    EXPECT_FALSE(json_schema_grammar("{not json").is_ok());
    EXPECT_TRUE(json_schema_grammar(R"({"type":"array","uniqueItems":true,"maxItems":1})").is_ok());
    JsonSchemaOptions lenient;
    lenient.oneof_as_anyof = true;
    EXPECT_TRUE(json_schema_grammar(R"({"oneOf":[{"type":"integer"},{"minimum":3}]})", lenient).is_ok());
}

// Numeric bounds and multipleOf against arithmetic on a grid of values, in several spellings.
TEST(JsonSchema, NumberRangesMatchArithmetic) {
    struct Range {
        const char* schema;
        double lo, hi;
        bool lo_x, hi_x, integer;
        double mult;
    };
    const Range ranges[] = {
        {R"({"type":"integer","minimum":-15,"maximum":105})", -15, 105, false, false, true, 0},
        {R"({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10})", 0, 10, true, true, true, 0},
        {R"({"type":"number","minimum":0.5,"maximum":7.25})", 0.5, 7.25, false, false, false, 0},
        {R"({"type":"number","minimum":-2.5,"exclusiveMaximum":-0.75})", -2.5, -0.75, false, true, false, 0},
        {R"({"type":"number","minimum":-1,"maximum":1,"exclusiveMinimum":true})", -1, 1, true, false, false, 0},
        {R"({"type":"number","exclusiveMinimum":0})", 0, INFINITY, true, false, false, 0},
        {R"({"type":"integer","multipleOf":7,"minimum":-30,"maximum":60})", -30, 60, false, false, true, 7},
        {R"({"type":"number","multipleOf":0.25,"maximum":3})", -INFINITY, 3, false, false, false, 0.25},
    };
    for (const Range& r : ranges) {
        auto g = schema(r.schema);
        ASSERT_TRUE(g) << r.schema;
        for (int k = -160; k <= 480; ++k) {
            const double x = k / 4.0;  // quarter steps: exact in binary and in decimal
            bool want = (r.lo_x ? x > r.lo : x >= r.lo) && (r.hi_x ? x < r.hi : x <= r.hi);
            if (r.mult > 0) want = want && std::fmod(std::abs(x), r.mult) == 0;
            std::vector<std::string> spellings;
            if (x == std::floor(x)) {
                spellings.push_back(std::to_string(int64_t(x)));
                if (!r.integer) spellings.push_back(std::to_string(int64_t(x)) + ".0");
            } else if (!r.integer) {
                char b[32];
                std::snprintf(b, sizeof b, "%.2f", x);
                spellings.push_back(b);
                std::string t = b;
                while (t.back() == '0') t.pop_back();
                spellings.push_back(t);
            }
            for (const std::string& s : spellings) EXPECT_EQ(accepts(g, s), want) << r.schema << " on " << s;
        }
    }
}

TEST(JsonSchema, MasksAgainstBruteForce) {
    auto v = test::synthetic_vocab({"{\"", "\":", "\": ", "\"}", "\", \"", "true", "null", "12", "-3", ".5", "é", "\xc3", "\xa9",
                                    "\"a", "b\"", "\\n", "\\u00", "[1", "],", "{}", " \"n", "ame\""},
                                   "{}[]\":, 0123456789.-eabnmxyz\\", 250, 9);
    const char* schemas[] = {
        R"({"type":"object","properties":{"name":{"type":"string","maxLength":4},"n":{"type":"integer","minimum":-5,"maximum":30},"t":{"type":"boolean"}},"required":["name"]})",
        R"({"type":"array","items":{"anyOf":[{"type":"string","pattern":"^[ab]+$"},{"type":"number","multipleOf":0.5}]},"maxItems":4})",
        R"({"type":"object","patternProperties":{"^x":{"type":"null"}},"additionalProperties":{"type":"array","items":{"type":"integer"}}})",
        // additional keys must differ from the listed names: chains of key-prefix states for the plain-token slice
        R"({"type":"object","properties":{"ab":{"type":"integer"},"abba":{"type":"null"},"ba":{"type":"string","maxLength":3}}})",
        R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"null"},"n":{"type":"boolean"}},"dependencies":{"n":["a"],"a":["b"]}})",
        R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"null"}},"oneOf":[{"required":["a"]},{"required":["b"]}]})",
        R"({"type":"object","properties":{"a":{"type":"integer"},"t":{"type":"string"}},"dependencies":{"a":{"properties":{"t":{"maxLength":1}}}}})",
        R"({"type":"object","properties":{"na":{"type":"integer"},"b":{"type":"null"}},"required":["b"],"minProperties":2})",
    };
    for (const char* s : schemas) {
        auto ir = json_schema_grammar(s);
        ASSERT_TRUE(ir.is_ok()) << ir.message();
        EXPECT_GT(test::compare_masks_on_walks(ir.value(), v, 8, 30, 21), 20) << s;
    }
}

// The plain-character targets of a DFA state are enumerated once per grammar (runtime.h plain_step), however
// many inner sets walk through it: keys that must differ from 60 listed 33-character names make chains of ~32
// prefix states that every key state's plain_reach visits again.
TEST(JsonSchema, PlainStepsOncePerState) {
    std::string props;
    for (int i = 0; i < 60; ++i) {
        if (i) props += ',';
        props += "\"p" + std::string(30, 'x') + std::to_string(i) + "\":{\"type\":\"string\"}";
    }
    // long plain tokens: plain_reach follows the chains for up to 40 characters
    auto v = test::synthetic_vocab({"{\"", "\":", "\": ", "\"}", "p1", "p12", "2x", std::string(40, 'x'), "p12" + std::string(37, 'y')},
                                   "p0123456789xyz \":,", 400, 5);
    auto ir = json_schema_grammar("{\"type\":\"object\",\"properties\":{" + props + "}}");
    ASSERT_TRUE(ir.is_ok()) << ir.message();
    auto g = Grammar::create(ir.value(), v);
    ASSERT_TRUE(g.is_ok()) << g.message();
    Matcher m(g.value());
    std::vector<uint32_t> mask(size_t(m.mask_words()));
    const std::string x30(30, 'x');
    for (char c : "{\"p" + x30 + "3\": \"t\", \"p" + x30 + "12\": \"s\", \"p" + x30 + "12x\": \"u\", \"p" + x30 + "y\": \"w\"}") {
        ASSERT_TRUE(m.fill_mask(mask.data()));
        ASSERT_TRUE(m.accept_bytes(std::string(1, c)).is_ok()) << c;
    }
    EXPECT_TRUE(m.is_complete());
    const Grammar::CacheStats st = g.value()->cache_stats();
    EXPECT_GT(st.plain_steps, 0);
    EXPECT_LE(st.plain_steps, g.value()->compiled().n_states());
}

// Every position inside a free string leaves it with the same tokens (`"`, `",`, `"}` …): one edge set serves
// all of them (runtime.h EdgeSet), and the masks stay those of the brute force.
TEST(JsonSchema, EdgeSetsAreShared) {
    auto v = test::synthetic_vocab({"{\"", "\":", "\": ", "\"}", "\",", "\", \"", "ab\"", "b\"}", "x\":"},
                                   "abxy \":,{}", 300, 13);
    std::string props;
    for (int i = 0; i < 12; ++i) {
        if (i) props += ',';
        props += "\"k" + std::to_string(i) + "\":{\"type\":\"string\"}";
    }
    auto ir = json_schema_grammar("{\"type\":\"object\",\"properties\":{" + props + "},\"additionalProperties\":false}");
    ASSERT_TRUE(ir.is_ok()) << ir.message();
    EXPECT_GT(test::compare_masks_on_walks(ir.value(), v, 6, 60, 5), 100);
    auto g = Grammar::create(ir.value(), v);
    ASSERT_TRUE(g.is_ok());
    std::string text = "{";
    for (int i = 0; i < 12; ++i) text += std::string(i ? ", " : "") + "\"k" + std::to_string(i) + "\": \"ab xy ba\"";
    text += "}";
    Matcher m(g.value());
    std::vector<uint32_t> mask(size_t(m.mask_words()));
    for (char c : text) {
        ASSERT_TRUE(m.fill_mask(mask.data()));
        ASSERT_TRUE(m.accept_bytes(std::string(1, c)).is_ok()) << c;
    }
    EXPECT_TRUE(m.is_complete());
    const Grammar::CacheStats st = g.value()->cache_stats();
    EXPECT_GT(st.edge_sets, 0);
    EXPECT_LE(st.edge_sets * 10, st.inner_states);  // 4 sets for 89 inner states
}

}  // namespace
}  // namespace ember::grammar
