// allOf merging, oneOf disjointness proofs and enum filtering for the JSON Schema compiler.
#include <algorithm>
#include <cmath>
#include <set>

#include "grammar/byte_dfa.h"
#include "grammar/json_schema_impl.h"
#include "grammar/regex.h"
#include "grammar/utf8.h"

namespace ember::grammar {

namespace {

std::set<std::string> type_set(const ojson& s) {
    std::set<std::string> t;
    for (const std::string& x : schema_types(s)) t.insert(x);
    if (t.count("number")) t.insert("integer");
    return t;
}

std::string type_of(const ojson& v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "boolean";
    if (v.is_string()) return "string";
    if (v.is_array()) return "array";
    if (v.is_object()) return "object";
    if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
    const double d = v.get<double>();
    return d == std::floor(d) && std::isfinite(d) ? "integer" : "number";
}

// The values an enum / const admits, if any.
bool literal_values(const ojson& s, std::vector<ojson>& out) {
    if (!s.is_object()) return false;
    if (s.contains("const")) { out = {s["const"]}; return true; }
    if (s.contains("enum") && s["enum"].is_array()) { out.assign(s["enum"].begin(), s["enum"].end()); return true; }
    return false;
}

bool numbers_less(const ojson& a, const ojson& b) { return a.get<double>() < b.get<double>(); }

}  // namespace

Expected<ojson> SchemaCompiler::deref(const ojson& s) {
    if (!s.is_object() || !s.contains("$ref")) return s;
    EMBER_REQUIRE(s["$ref"].is_string(), "$ref must be a string");
    EMBER_ASSIGN(const ojson* t, resolve(s["$ref"].get<std::string>()));
    ojson rest = s;
    rest.erase("$ref");
    bool only = true;
    for (auto it = rest.begin(); it != rest.end(); ++it) only = only && is_annotation(it.key());
    if (only || ref_siblings_ignored_) return deref(*t);
    return merge(*t, rest);
}

Expected<ojson> SchemaCompiler::merge(const ojson& a0, const ojson& b0, int depth) {
    EMBER_REQUIRE(depth < 32, "allOf / $ref nesting too deep (recursive $ref inside allOf?)");
    EMBER_ASSIGN(ojson a, deref(a0));
    EMBER_ASSIGN(ojson b, deref(b0));
    if (a.is_boolean()) return a.get<bool>() ? b : ojson(false);
    if (b.is_boolean()) return b.get<bool>() ? a : ojson(false);
    EMBER_REQUIRE(a.is_object() && b.is_object(), "allOf branches must be schemas");
    for (ojson* x : {&a, &b}) {  // flatten nested allOf first
        if (!x->contains("allOf")) continue;
        ojson branches = (*x)["allOf"];
        x->erase("allOf");
        for (const auto& br : branches) {
            EMBER_ASSIGN(ojson m, merge(*x, br, depth + 1));
            *x = std::move(m);
            if (x->is_boolean()) return *x;
        }
    }
    for (ojson* x : {&a, &b}) {  // OpenAPI nullable → "null" in the type list
        if (!x->contains("nullable")) continue;
        if ((*x)["nullable"] == true && x->contains("type")) {
            ojson t = (*x)["type"].is_array() ? (*x)["type"] : ojson::array({(*x)["type"]});
            if (std::find(t.begin(), t.end(), "null") == t.end()) t.push_back("null");
            (*x)["type"] = t;
        }
        x->erase("nullable");
    }
    auto all_of = [](const ojson& x, const ojson& y) { return x == y ? x : ojson{{"allOf", ojson::array({x, y})}}; };
    // Keys listed on one side only are "additional" for the other.
    for (auto [x, y] : {std::pair<ojson*, ojson*>{&a, &b}, {&b, &a}}) {
        if (!y->contains("additionalProperties") || (*y)["additionalProperties"] == true || !x->contains("properties")) continue;
        EMBER_REQUIRE(!y->contains("patternProperties"), "allOf mixing properties with patternProperties + additionalProperties is not supported");
        const ojson ya = (*y)["additionalProperties"];
        for (auto it = (*x)["properties"].begin(); it != (*x)["properties"].end(); ++it)
            if (!y->contains("properties") || !(*y)["properties"].contains(it.key())) it.value() = all_of(it.value(), ya);
    }
    ojson m = a;
    for (auto it = b.begin(); it != b.end(); ++it) {
        const std::string& k = it.key();
        const ojson& vb = it.value();
        if (!m.contains(k)) { m[k] = vb; continue; }
        ojson& va = m[k];
        if (va == vb || is_annotation(k)) continue;
        if (k == "type") {
            auto ts = [](const ojson& x) {
                std::set<std::string> t;
                for (const std::string& y : schema_types(x)) t.insert(y);
                return t;
            };
            const std::set<std::string> ta = ts(a), tb = ts(b);
            ojson t = ojson::array();
            for (const char* x : {"null", "boolean", "object", "array", "string", "number"})
                if (ta.count(x) && tb.count(x)) t.push_back(x);
            const bool num_both = ta.count("number") && tb.count("number");
            if (!num_both && (ta.count("integer") || ta.count("number")) && (tb.count("integer") || tb.count("number")))
                t.push_back("integer");
            if (t.empty()) return ojson(false);
            m["type"] = t;
        } else if (k == "properties" || k == "patternProperties") {
            for (auto p = vb.begin(); p != vb.end(); ++p) va[p.key()] = va.contains(p.key()) ? all_of(va[p.key()], p.value()) : p.value();
        } else if (k == "required") {
            for (const auto& r : vb)
                if (std::find(va.begin(), va.end(), r) == va.end()) va.push_back(r);
        } else if (k == "additionalProperties" || k == "items" || k == "additionalItems" || k == "propertyNames") {
            if (va.is_array() || vb.is_array()) {  // draft-04 tuple items
                EMBER_REQUIRE(va.is_array() && vb.is_array(), "allOf mixing tuple and list items is not supported");
                ojson t = ojson::array();
                for (size_t i = 0; i < std::max(va.size(), vb.size()); ++i)
                    t.push_back(i < va.size() && i < vb.size() ? all_of(va[i], vb[i]) : (i < va.size() ? va[i] : vb[i]));
                va = t;
            } else {
                va = all_of(va, vb);
            }
        } else if (k == "prefixItems") {
            ojson t = ojson::array();
            for (size_t i = 0; i < std::max(va.size(), vb.size()); ++i)
                t.push_back(i < va.size() && i < vb.size() ? all_of(va[i], vb[i]) : (i < va.size() ? va[i] : vb[i]));
            va = t;
        } else if (k == "enum") {
            ojson t = ojson::array();
            for (const auto& x : va)
                if (std::find(vb.begin(), vb.end(), x) != vb.end()) t.push_back(x);
            va = t;
        } else if (k == "const") {
            return ojson(false);
        } else if (k == "minimum" || k == "minLength" || k == "minItems" || k == "minProperties" ||
                   (k == "exclusiveMinimum" && va.is_number() && vb.is_number())) {
            if (numbers_less(va, vb)) va = vb;
        } else if (k == "maximum" || k == "maxLength" || k == "maxItems" || k == "maxProperties" ||
                   (k == "exclusiveMaximum" && va.is_number() && vb.is_number())) {
            if (numbers_less(vb, va)) va = vb;
        } else if (k == "pattern") {
            ojson t = va.is_array() ? va : ojson::array({va});
            if (vb.is_array()) for (const auto& x : vb) t.push_back(x);
            else t.push_back(vb);
            va = t;
        } else if (k == "multipleOf") {
            const double x = va.get<double>(), y = vb.get<double>();
            const double big = std::max(x, y), small = std::min(x, y), r = big / small;
            EMBER_REQUIRE(std::abs(r - std::round(r)) < 1e-9, "allOf with two unrelated multipleOf is not supported");
            va = x > y ? va : vb;
        } else if (k == "anyOf" || k == "oneOf") {
            EMBER_REQUIRE(va.size() * vb.size() <= 64, "allOf of two large %s is not supported", k.c_str());
            ojson t = ojson::array();
            for (const auto& x : va)
                for (const auto& y : vb) t.push_back(ojson{{"allOf", ojson::array({x, y})}});
            va = t;
        } else if (k == kPresenceKeyword) {  // both constraints hold
            for (const auto& x : vb) va.push_back(x);
        } else if (k == "dependencies" || k == "dependentRequired" || k == "dependentSchemas") {
            // Per trigger both hold: name lists add up; otherwise the two as one schema (a list is {required: list}).
            EMBER_REQUIRE(va.is_object() && vb.is_object(), "%s must be an object", k.c_str());
            for (auto p = vb.begin(); p != vb.end(); ++p) {
                if (!va.contains(p.key())) { va[p.key()] = p.value(); continue; }
                ojson& x = va[p.key()];
                if (x.is_array() && p.value().is_array()) {
                    for (const auto& r : p.value())
                        if (std::find(x.begin(), x.end(), r) == x.end()) x.push_back(r);
                } else {
                    auto schema = [](const ojson& d) { return d.is_array() ? ojson{{"required", d}} : d; };
                    x = all_of(schema(x), schema(p.value()));
                }
            }
        } else if (k == "uniqueItems") {
            va = va.get<bool>() || vb.get<bool>();
        } else if (k == "format") {
            return errorf("allOf with two formats ('%s', '%s') is not supported", va.dump().c_str(), vb.dump().c_str());
        } else if (is_unsupported(k)) {
            return errorf("JSON Schema keyword '%s' is not supported", k.c_str());
        }
        // other (non-standard) keywords: a's value is kept
    }
    return m;
}

bool SchemaCompiler::provably_disjoint(const ojson& a0, const ojson& b0) {
    // Each side as one schema: $ref resolved and allOf merged (a branch "allOf: [$ref, {refinement}]" shows its
    // required keys and their values only then).
    auto flat = [&](const ojson& s) -> Expected<ojson> {
        EMBER_ASSIGN(ojson x, deref(s));
        if (x.is_object() && x.contains("allOf")) return merge(x, ojson::object());
        return x;
    };
    auto da = flat(a0), db = flat(b0);
    if (!da || !db) return false;
    const ojson &a = da.value(), &b = db.value();
    if (a.is_boolean() || b.is_boolean()) return (a == false) || (b == false);
    std::vector<ojson> va, vb;
    const bool la = literal_values(a, va), lb = literal_values(b, vb);
    auto kinds = [&](const ojson& s, bool lit, const std::vector<ojson>& vals) {
        std::set<std::string> t;
        if (lit) {
            for (const auto& v : vals) t.insert(type_of(v));
            if (t.count("integer")) t.insert("number");
        } else {
            t = type_set(s);
        }
        return t;
    };
    const std::set<std::string> ka = kinds(a, la, va), kb = kinds(b, lb, vb);
    std::set<std::string> common;
    for (const auto& t : ka)
        if (kb.count(t) && t != "integer") common.insert(t);
    if (ka.count("integer") && kb.count("integer") && !common.count("number")) common.insert("number");
    if (common.empty()) return true;
    if (la && lb) {
        for (const auto& x : va)
            if (std::find(vb.begin(), vb.end(), x) != vb.end()) return false;
        return true;
    }
    if (common.size() != 1 || !common.count("object")) return false;
    // Both objects: a key both require whose values are disjoint, or a key one requires that the other forbids.
    auto req = [](const ojson& s) {
        std::set<std::string> r;
        if (s.contains("required") && s["required"].is_array())
            for (const auto& x : s["required"]) if (x.is_string()) r.insert(x.get<std::string>());
        return r;
    };
    auto prop = [](const ojson& s, const std::string& k) -> const ojson* {
        if (s.contains("properties") && s["properties"].is_object() && s["properties"].contains(k)) return &s["properties"][k];
        return nullptr;
    };
    auto forbids = [&](const ojson& s, const std::string& k) {
        return !prop(s, k) && s.contains("additionalProperties") && s["additionalProperties"] == false &&
               !s.contains("patternProperties");
    };
    const std::set<std::string> ra = req(a), rb = req(b);
    for (const auto& k : ra) {
        if (forbids(b, k)) return true;
        if (rb.count(k)) {
            const ojson *pa = prop(a, k), *pb = prop(b, k);
            if (pa && pb && provably_disjoint(*pa, *pb)) return true;
        }
    }
    for (const auto& k : rb)
        if (forbids(a, k)) return true;
    return false;
}

Expected<bool> SchemaCompiler::enum_value_ok(const ojson& s, const ojson& v) {
    const std::string t = type_of(v);
    if (s.contains("type")) {
        const std::set<std::string> ts = type_set(s);
        if (!ts.count(t) && !(t == "integer" && ts.count("number"))) return false;
    }
    if (v.is_number()) {
        const double x = v.get<double>();
        auto num = [&](const char* k, double& out) {
            if (!s.contains(k) || !s[k].is_number()) return false;
            out = s[k].get<double>();
            return true;
        };
        double b;
        const bool xmin_b = s.contains("exclusiveMinimum") && s["exclusiveMinimum"] == true;
        const bool xmax_b = s.contains("exclusiveMaximum") && s["exclusiveMaximum"] == true;
        if (num("minimum", b) && (x < b || (xmin_b && x == b))) return false;
        if (num("maximum", b) && (x > b || (xmax_b && x == b))) return false;
        if (num("exclusiveMinimum", b) && x <= b) return false;
        if (num("exclusiveMaximum", b) && x >= b) return false;
        if (num("multipleOf", b) && b > 0) {
            const double r = x / b;
            if (std::abs(r - std::round(r)) > 1e-9 * std::max(1.0, std::abs(r))) return false;
        }
    }
    if (v.is_string()) {
        const std::string str = v.get<std::string>();
        int64_t n = 0;
        for (size_t i = 0; i < str.size(); ++i) n += (static_cast<unsigned char>(str[i]) & 0xC0) != 0x80;
        if (s.contains("minLength") && s["minLength"].is_number() && double(n) < s["minLength"].get<double>()) return false;
        if (s.contains("maxLength") && s["maxLength"].is_number() && double(n) > s["maxLength"].get<double>()) return false;
        if (s.contains("pattern")) {
            const ojson& p = s["pattern"];
            std::vector<std::string> ps;
            if (p.is_string()) ps.push_back(p.get<std::string>());
            else if (p.is_array()) for (const auto& x : p) ps.push_back(x.get<std::string>());
            for (const std::string& pat : ps) {
                GrammarIR lex;
                EMBER_ASSIGN(int e, regex_to_ir(lex, pat, RegexMatch::SEARCH));
                EMBER_ASSIGN(ByteDfa d, dfa_from_expr(lex, e));
                if (!dfa_matches(d, str)) return false;
            }
        }
    }
    if (v.is_object() || v.is_array())
        for (const char* k : {"properties", "required", "items", "prefixItems", "additionalProperties", "minItems",
                              "maxItems", "minProperties", "maxProperties", "patternProperties", "dependencies",
                              "dependentRequired", "dependentSchemas", kPresenceKeyword})
            if (s.contains(k)) return errorf("enum of objects / arrays together with '%s' is not supported", k);
    return true;
}

}  // namespace ember::grammar
