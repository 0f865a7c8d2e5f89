// JSON Schema → grammar IR: keyword dispatch, $ref resolution, composition, per-type lexemes (json_schema.h).
#include "grammar/json_schema.h"

#include <set>

#include "grammar/json_lexemes.h"
#include "grammar/json_schema_impl.h"

namespace ember::grammar {

namespace {

const std::set<std::string> kAnnotations = {
    "$schema", "$id", "id", "$comment", "$anchor", "$vocabulary", "$dynamicAnchor", "$recursiveAnchor", "title",
    "description", "default", "examples", "example", "readOnly", "writeOnly", "deprecated", "contentEncoding",
    "contentMediaType", "contentSchema", "$defs", "definitions", "discriminator", "xml", "externalDocs"};
const std::set<std::string> kUnsupported = {"not", "if", "then", "else", "contains", "minContains", "maxContains",
                                            "uniqueItems", "unevaluatedProperties", "unevaluatedItems",
                                            "$dynamicRef", "$recursiveRef"};

// The content of a schema with its annotations dropped (recursively): equal keys, equal languages.
ojson strip(const ojson& s) {
    if (s.is_array()) {
        ojson a = ojson::array();
        for (const auto& x : s) a.push_back(strip(x));
        return a;
    }
    if (!s.is_object()) return s;
    ojson o = ojson::object();
    for (auto it = s.begin(); it != s.end(); ++it) {
        const std::string& k = it.key();
        if (k == "description" || k == "title" || k == "examples" || k == "example" || k == "default" || k == "$comment")
            continue;
        // Values of these keywords are data (or maps of schemas whose keys are data): keep them as they are
        // except that subschemas are stripped.
        if (k == "enum" || k == "const" || k == "required") o[k] = it.value();
        else o[k] = strip(it.value());
    }
    return o;
}

std::string pointer_unescape(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && isxdigit(static_cast<unsigned char>(s[i + 1])) &&
            isxdigit(static_cast<unsigned char>(s[i + 2]))) {
            out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

// Branches that are objects of `required` (a list of names) and annotations only.
bool required_lists_only(const ojson& branches) {
    for (const auto& b : branches) {
        if (!b.is_object()) return false;
        for (auto it = b.begin(); it != b.end(); ++it) {
            if (is_annotation(it.key())) continue;
            if (it.key() != "required" || !it.value().is_array()) return false;
            for (const auto& x : it.value())
                if (!x.is_string()) return false;
        }
    }
    return true;
}

}  // namespace

bool is_annotation(const std::string& k) { return kAnnotations.count(k) > 0; }
bool is_unsupported(const std::string& k) { return kUnsupported.count(k) > 0; }

std::vector<std::string> schema_types(const ojson& s) {
    std::set<std::string> t;
    if (s.is_object() && s.contains("type")) {
        const ojson& ty = s["type"];
        if (ty.is_string()) t.insert(ty.get<std::string>());
        else if (ty.is_array())
            for (const auto& x : ty)
                if (x.is_string()) t.insert(x.get<std::string>());
        if (s.contains("nullable") && s["nullable"].is_boolean() && s["nullable"].get<bool>()) t.insert("null");
    } else {
        t = {"null", "boolean", "object", "array", "number", "string"};
    }
    if (t.count("number")) t.erase("integer");
    std::vector<std::string> out;
    for (const char* k : {"null", "boolean", "object", "array", "integer", "number", "string"})
        if (t.count(k)) out.push_back(k);
    return out;
}

SchemaCompiler::SchemaCompiler(const ojson& root, const JsonSchemaOptions& opt) : root_(root), opt_(opt) {
    if (root.is_object() && root.contains("$schema") && root["$schema"].is_string()) {
        const std::string v = root["$schema"].get<std::string>();
        for (const char* d : {"draft-03", "draft-04", "draft-06", "draft-07"})
            if (v.find(d) != std::string::npos) ref_siblings_ignored_ = true;
    }
}

int SchemaCompiler::ws() {
    if (ws_ < 0)
        ws_ = opt_.whitespace ? g.repeat(g.bytes(ByteSet::of(' ') | ByteSet::of('\t') | ByteSet::of('\n') | ByteSet::of('\r')), 0,
                                         opt_.max_whitespace)
                              : g.empty();
    return ws_;
}

int SchemaCompiler::sep() {
    if (sep_ < 0) sep_ = g.seq({ws(), g.byte(','), ws()});
    return sep_;
}

Expected<GrammarIR> SchemaCompiler::run() {
    const int root = g.add_rule("root");
    EMBER_ASSIGN(int body, value(root_));
    g.define(root, body);
    g.root = root;
    return std::move(g);
}

Expected<const ojson*> SchemaCompiler::resolve(const std::string& ref) {
    if (ref.empty() || ref[0] != '#')
        return errorf("$ref '%s': only references within the document (#/...) are supported", ref.c_str());
    const std::string ptr = pointer_unescape(ref.substr(1));
    if (ptr.empty()) return &root_;
    if (ptr[0] != '/') return errorf("$ref '%s': anchors are not supported", ref.c_str());
    const ojson* cur = &root_;
    size_t i = 1;
    while (true) {
        const size_t j = ptr.find('/', i);
        std::string tok = ptr.substr(i, j == std::string::npos ? std::string::npos : j - i);
        std::string t;
        for (size_t k = 0; k < tok.size(); ++k) {
            if (tok[k] == '~' && k + 1 < tok.size()) { t += tok[k + 1] == '1' ? '/' : '~'; ++k; }
            else t += tok[k];
        }
        if (cur->is_object() && cur->contains(t)) cur = &(*cur)[t];
        else if (cur->is_array() && !t.empty() && t.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoul(t) < cur->size())
            cur = &(*cur)[std::stoul(t)];
        else return errorf("$ref '%s' does not resolve", ref.c_str());
        if (j == std::string::npos) break;
        i = j + 1;
    }
    return cur;
}

int SchemaCompiler::literal_value(const ojson& v) {
    if (v.is_string()) return g.literal(json::encode_string(v.get<std::string>()));
    if (v.is_array()) {
        std::vector<int> items = {g.byte('['), ws()};
        for (size_t i = 0; i < v.size(); ++i) {
            if (i) items.push_back(sep());
            items.push_back(literal_value(v[i]));
        }
        items.push_back(ws());
        items.push_back(g.byte(']'));
        return g.seq(items);
    }
    if (v.is_object()) {
        std::vector<int> items = {g.byte('{'), ws()};
        bool first = true;
        for (auto it = v.begin(); it != v.end(); ++it) {
            if (!first) items.push_back(sep());
            first = false;
            items.push_back(g.literal(json::encode_string(it.key())));
            items.push_back(g.seq({ws(), g.byte(':'), ws()}));
            items.push_back(literal_value(it.value()));
        }
        items.push_back(ws());
        items.push_back(g.byte('}'));
        return g.seq(items);
    }
    if (v.is_number_float()) {  // 2.0 == 2: both spellings
        const double d = v.get<double>();
        const std::string s = v.dump();
        if (d == double(int64_t(d)) && std::abs(d) < 1e15) {
            const std::string i = std::to_string(int64_t(d));
            return g.alt({g.literal(i), g.literal(i + ".0"), g.literal(s)});
        }
        return g.literal(s);
    }
    if (v.is_number()) return g.alt({g.literal(v.dump()), g.literal(v.dump() + ".0")});  // 2 == 2.0
    return g.literal(v.dump());
}

Expected<int> SchemaCompiler::call(const ojson& s) {
    std::string key;
    if (s.is_boolean() || s.is_object()) {
        const std::string d = s.dump();
        if (d.size() <= 16384) {
            key = strip(s).dump();
        } else {
            key = std::to_string(reinterpret_cast<uintptr_t>(&s));
            key.insert(key.begin(), '@');
        }
    } else {
        return errorf("a schema must be an object or a boolean, not %s", s.dump().substr(0, 80).c_str());
    }
    auto it = rules_.find(key);
    if (it != rules_.end()) return g.ref(it->second);
    const int r = g.add_rule("schema" + std::to_string(rules_.size()), /*inline_ok=*/false);
    rules_.emplace(key, r);
    EMBER_ASSIGN(int body, value(s));
    g.define(r, body);
    return g.ref(r);
}

Expected<int> SchemaCompiler::value(const ojson& s) {
    struct Depth {
        int& d;
        explicit Depth(int& x) : d(++x) {}
        ~Depth() { --d; }
    } depth(depth_);
    EMBER_REQUIRE(depth_ < 400, "schema nested too deeply");
    if (s.is_boolean()) {
        if (!s.get<bool>()) return g.nothing();
        // any JSON value: a generic rule set, built once
        const int r = g.find_rule("any_value");
        if (r >= 0) return g.ref(r);
        const int value_r = g.add_rule("any_value", false), obj_r = g.add_rule("any_object", false),
                  arr_r = g.add_rule("any_array", false);
        EMBER_ASSIGN(int str, call(ojson{{"type", "string"}}));
        EMBER_ASSIGN(int num, call(ojson{{"type", "number"}}));
        const int kv = g.seq({str, ws(), g.byte(':'), ws(), g.ref(value_r)});
        g.define(obj_r, g.seq({g.byte('{'), ws(), g.opt(g.seq({kv, g.star(g.seq({sep(), kv}))})), ws(), g.byte('}')}));
        g.define(arr_r, g.seq({g.byte('['), ws(), g.opt(g.seq({g.ref(value_r), g.star(g.seq({sep(), g.ref(value_r)}))})), ws(),
                               g.byte(']')}));
        g.define(value_r, g.alt({g.ref(obj_r), g.ref(arr_r), str, num, g.literal("true"), g.literal("false"), g.literal("null")}));
        return g.ref(value_r);
    }
    EMBER_REQUIRE(s.is_object(), "a schema must be an object or a boolean, not %s", s.dump().substr(0, 80).c_str());
    if (s.contains("not")) {  // not of a schema that accepts everything: nothing; not false: no constraint
        const ojson& n = s["not"];
        bool everything = n == true;
        if (n.is_object()) {
            everything = true;
            for (auto it = n.begin(); it != n.end(); ++it) everything = everything && is_annotation(it.key());
        }
        if (everything) return g.nothing();
        if (n == false) {
            ojson rest = s;
            rest.erase("not");
            return value(own(std::move(rest)));
        }
    }
    for (auto it = s.begin(); it != s.end(); ++it) {
        const std::string& k = it.key();
        if (!is_unsupported(k)) continue;
        const ojson& v = it.value();
        const bool harmless = (k == "uniqueItems" && (v == false || (s.contains("maxItems") && s["maxItems"].is_number() &&
                                                                    s["maxItems"].get<double>() <= 1))) ||
                              ((k == "unevaluatedProperties" || k == "unevaluatedItems") && v == true) ||
                              ((k == "then" || k == "else") && !s.contains("if")) ||
                              ((k == "minContains" || k == "maxContains") && !s.contains("contains"));
        if (!harmless) return errorf("JSON Schema keyword '%s' is not supported", k.c_str());
    }
    if (s.contains("$ref")) {
        EMBER_REQUIRE(s["$ref"].is_string(), "$ref must be a string");
        EMBER_ASSIGN(const ojson* t, resolve(s["$ref"].get<std::string>()));
        bool only_ref = true;
        for (auto it = s.begin(); it != s.end(); ++it) only_ref = only_ref && (it.key() == "$ref" || is_annotation(it.key()));
        if (only_ref || ref_siblings_ignored_) return call(*t);
        ojson rest = s;
        rest.erase("$ref");
        EMBER_ASSIGN(ojson m, merge(*t, rest));
        return value(own(std::move(m)));
    }
    if (s.contains("allOf")) {
        EMBER_REQUIRE(s["allOf"].is_array() && !s["allOf"].empty(), "allOf must be a non-empty array");
        ojson acc = s;
        acc.erase("allOf");
        for (const auto& b : s["allOf"]) {
            EMBER_ASSIGN(ojson m, merge(acc, b));
            acc = std::move(m);
        }
        return value(own(std::move(acc)));
    }
    // Schema dependencies (dependencies with a schema value, dependentSchemas): "if key K is present, the object
    // also satisfies S". Split on K: objects without K (properties K: false), or with K (required K) satisfying S
    // too — disjoint, so an anyOf. Values other than objects pass through the first branch unchanged.
    for (const char* kw : {"dependencies", "dependentSchemas"}) {
        if (!s.contains(kw) || !s[kw].is_object()) continue;
        for (auto it = s[kw].begin(); it != s[kw].end(); ++it) {
            const ojson& dep = it.value();
            if (dep.is_array() || dep == true || (dep.is_object() && dep.empty())) continue;
            EMBER_REQUIRE(++schema_deps_ <= 64, "JSON Schema keyword '%s': schema dependencies split objects more than 64 times",
                          kw);
            ojson rest = s;
            rest[kw].erase(it.key());
            if (rest[kw].empty()) rest.erase(kw);
            EMBER_ASSIGN(ojson without, merge(rest, ojson{{"properties", {{it.key(), false}}}}));
            EMBER_ASSIGN(ojson with, merge(rest, dep));
            EMBER_ASSIGN(ojson with_k, merge(with, ojson{{"required", ojson::array({it.key()})}}));
            return value(own(ojson{{"anyOf", ojson::array({without, with_k})}}));
        }
    }
    for (const char* key : {"anyOf", "oneOf"}) {
        if (!s.contains(key)) continue;
        EMBER_REQUIRE(s[key].is_array() && !s[key].empty(), "%s must be a non-empty array", key);
        ojson base = s;
        base.erase(key);
        // oneOf of branches that only list required keys: exactly one list complete. Objects only (every branch
        // holds for any other value, so two or more branches reject it); the object automaton checks the lists
        // by which keys were written (json_schema_object.cpp, kPresenceKeyword).
        if (std::string(key) == "oneOf" && s[key].size() >= 2 && required_lists_only(s[key])) {
            EMBER_ASSIGN(ojson m, merge(base, ojson{{"type", "object"}}));
            if (m.is_boolean()) return value(own(std::move(m)));
            ojson lists = ojson::array();
            for (const auto& br : s[key]) lists.push_back(br.contains("required") ? br["required"] : ojson::array());
            if (!m.contains(kPresenceKeyword)) m[kPresenceKeyword] = ojson::array();
            m[kPresenceKeyword].push_back(ojson{{"oneOf", lists}});
            return value(own(std::move(m)));
        }
        bool trivial = true;
        for (auto it = base.begin(); it != base.end(); ++it) trivial = trivial && is_annotation(it.key());
        std::vector<const ojson*> branches;
        for (const auto& b : s[key]) {
            if (trivial) { branches.push_back(&b); continue; }
            EMBER_ASSIGN(ojson m, merge(base, b));
            branches.push_back(&own(std::move(m)));
        }
        if (std::string(key) == "oneOf" && !opt_.oneof_as_anyof)
            for (size_t i = 0; i < branches.size(); ++i)
                for (size_t j = i + 1; j < branches.size(); ++j)
                    if (!provably_disjoint(*branches[i], *branches[j]))
                        return errorf("oneOf: branches %zu and %zu may overlap (only disjoint branches are supported)", i, j);
        std::vector<int> alts;
        for (const ojson* b : branches) {
            EMBER_ASSIGN(int e, call(*b));
            alts.push_back(e);
        }
        return g.alt(alts);
    }
    if (s.contains("const") || s.contains("enum")) {
        std::vector<ojson> vals;
        if (s.contains("enum")) {
            EMBER_REQUIRE(s["enum"].is_array(), "enum must be an array");
            for (const auto& v : s["enum"]) vals.push_back(v);
        }
        if (s.contains("const")) {
            if (s.contains("enum")) {
                bool found = false;
                for (const auto& v : vals) found = found || v == s["const"];
                vals.clear();
                if (found) vals.push_back(s["const"]);
            } else {
                vals.push_back(s["const"]);
            }
        }
        std::vector<int> alts;
        for (const ojson& v : vals) {
            EMBER_ASSIGN(bool ok, enum_value_ok(s, v));
            if (ok) alts.push_back(literal_value(v));
        }
        return g.alt(alts);
    }
    std::vector<int> alts;
    for (const std::string& t : schema_types(s)) {
        EMBER_ASSIGN(int e, typed(s, t));
        alts.push_back(e);
    }
    return g.alt(alts);
}

namespace {
Expected<std::optional<json::Decimal>> decimal_kw(const ojson& s, const char* k) {
    if (!s.contains(k) || s[k].is_boolean()) return std::optional<json::Decimal>();
    EMBER_REQUIRE(s[k].is_number(), "%s must be a number", k);
    EMBER_ASSIGN(json::Decimal d, json::Decimal::parse(s[k].dump()));
    return std::optional<json::Decimal>(d);
}
bool dec_less(const json::Decimal& a, const json::Decimal& b) {
    if (a.neg != b.neg) return a.neg;
    auto mag_less = [](const json::Decimal& x, const json::Decimal& y) {
        if (x.int_digits.size() != y.int_digits.size()) return x.int_digits.size() < y.int_digits.size();
        if (x.int_digits != y.int_digits) return x.int_digits < y.int_digits;
        return x.frac_digits < y.frac_digits;
    };
    return a.neg ? mag_less(b, a) : mag_less(a, b);
}
}  // namespace

Expected<int> SchemaCompiler::typed(const ojson& s, const std::string& t) {
    if (t == "null") return g.literal("null");
    if (t == "boolean") return g.alt({g.literal("true"), g.literal("false")});
    if (t == "object") return object_expr(s);
    if (t == "array") return array_expr(s);
    if (t == "string") {
        json::StringConstraints c;
        if (s.contains("minLength")) {
            EMBER_REQUIRE(s["minLength"].is_number(), "minLength must be a number");
            c.min_length = int64_t(std::ceil(s["minLength"].get<double>()));
        }
        if (s.contains("maxLength")) {
            EMBER_REQUIRE(s["maxLength"].is_number(), "maxLength must be a number");
            c.max_length = int64_t(std::floor(s["maxLength"].get<double>()));
        }
        if (s.contains("pattern")) {
            const ojson& p = s["pattern"];
            if (p.is_string()) c.patterns.push_back(p.get<std::string>());
            else if (p.is_array())
                for (const auto& x : p) c.patterns.push_back(x.get<std::string>());
            else return errorf("pattern must be a string");
        }
        if (s.contains("format") && s["format"].is_string()) {
            c.format = s["format"].get<std::string>();
            EMBER_REQUIRE(json::known_format(c.format), "string format '%s' is not supported", c.format.c_str());
        }
        auto e = json::string_expr(g, c);
        if (!e) return e.status().with_context("string");
        return e;
    }
    if (t == "number" || t == "integer") {
        json::NumberConstraints c;
        c.integer = t == "integer";
        EMBER_ASSIGN(c.min, decimal_kw(s, "minimum"));
        EMBER_ASSIGN(c.max, decimal_kw(s, "maximum"));
        if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean()) c.min_exclusive = s["exclusiveMinimum"].get<bool>() && c.min;
        if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean()) c.max_exclusive = s["exclusiveMaximum"].get<bool>() && c.max;
        EMBER_ASSIGN(auto xmin, decimal_kw(s, "exclusiveMinimum"));
        EMBER_ASSIGN(auto xmax, decimal_kw(s, "exclusiveMaximum"));
        if (xmin && (!c.min || !dec_less(*xmin, *c.min))) { c.min = xmin; c.min_exclusive = true; }
        if (xmax && (!c.max || !dec_less(*c.max, *xmax))) { c.max = xmax; c.max_exclusive = true; }
        EMBER_ASSIGN(c.multiple_of, decimal_kw(s, "multipleOf"));
        if (c.multiple_of) EMBER_REQUIRE(!c.multiple_of->neg && !c.multiple_of->is_zero(), "multipleOf must be > 0");
        auto e = json::number_expr(g, c);
        if (!e) return e.status().with_context(t);
        return e;
    }
    return errorf("unknown type '%s'", t.c_str());
}

Expected<GrammarIR> json_schema_grammar_json(const ojson& schema, const JsonSchemaOptions& opt) {
    SchemaCompiler c(schema, opt);
    try {
        return c.run();
    } catch (const std::exception& e) {  // nlohmann type errors on malformed schemas
        return errorf("JSON Schema: %s", e.what());
    }
}

Expected<GrammarIR> json_schema_grammar(std::string_view text, const JsonSchemaOptions& opt) {
    ojson j = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
    EMBER_REQUIRE(!j.is_discarded(), "JSON Schema: not valid JSON");
    return json_schema_grammar_json(j, opt);
}

GrammarIR json_value_grammar(bool object_only, const JsonSchemaOptions& opt) {
    const ojson s = object_only ? ojson{{"type", "object"}} : ojson(true);
    auto g = json_schema_grammar_json(s, opt);
    return std::move(g.value());
}

}  // namespace ember::grammar
