// JSON Schema objects and arrays as explicit automata (ir.h Graph): members in `properties` order, counted
// where minProperties / maxProperties / minItems / maxItems need it; additional keys split into regions by the
// patterns they match (byte DFA intersections / complements of the quoted key).
#include <algorithm>
#include <map>
#include <set>

#include "grammar/byte_dfa.h"
#include "grammar/json_lexemes.h"
#include "grammar/json_schema_impl.h"
#include "grammar/regex.h"

namespace ember::grammar {

namespace {

constexpr int kMaxPatternRegions = 4;    // patternProperties: at most this many patterns (2^n key regions)
constexpr int64_t kMaxCount = 100000;    // counted members / items
// Objects of at most this many listed keys take them in any order. 2 covers most valid instances MaskBench's
// order rejected (Glaive: 30 -> 12 of 1,707) at no measurable compile cost; 3 cost +45 % on some schemas (the
// key literals repeat per set of written keys), 5 ×3 on Glaive.
constexpr int64_t kAnyOrderMax = 2;

Expected<int64_t> count_kw(const ojson& s, const char* k, int64_t dflt) {
    if (!s.contains(k)) return dflt;
    EMBER_REQUIRE(s[k].is_number() && s[k].get<double>() >= 0, "%s must be a non-negative number", k);
    const double v = s[k].get<double>();
    return v > double(kMaxCount) ? kMaxCount + 1 : int64_t(v);
}

// The quoted JSON encoding of keys, as a DFA over its bytes, from an expression of `lex`.
Expected<ByteDfa> quoted(GrammarIR& lex, int content) {
    return dfa_from_expr(lex, lex.seq({lex.byte('"'), content, lex.byte('"')}));
}

// dependencies / dependentRequired in their array form: (trigger, names that must be present with it). A
// schema value (draft ≤ 7 "schema dependencies") is refused naming the keyword; true / {} asserts nothing.
Expected<std::vector<std::pair<std::string, std::vector<std::string>>>> property_dependencies(const ojson& s) {
    std::vector<std::pair<std::string, std::vector<std::string>>> deps;
    for (const char* kw : {"dependencies", "dependentRequired"}) {
        if (!s.contains(kw)) continue;
        EMBER_REQUIRE(s[kw].is_object(), "%s must be an object", kw);
        for (auto it = s[kw].begin(); it != s[kw].end(); ++it) {
            const ojson& v = it.value();
            if (v == true || (v.is_object() && v.empty())) continue;
            if (!v.is_array()) return errorf("JSON Schema keyword '%s' with a schema (not a list of names) is not supported", kw);
            std::vector<std::string> names;
            for (const auto& x : v) {
                EMBER_REQUIRE(x.is_string(), "%s must list property names", kw);
                if (x.get<std::string>() != it.key()) names.push_back(x.get<std::string>());
            }
            if (!names.empty()) deps.push_back({it.key(), std::move(names)});
        }
    }
    return deps;
}

// Any quoted JSON string, as a DFA: the same for every object, built once.
const ByteDfa& any_key_dfa() {
    static const ByteDfa d = [] {
        GrammarIR lex;
        return quoted(lex, lex.star(json::string_char_expr(lex, cp_any()))).value();
    }();
    return d;
}

}  // namespace

Expected<int> SchemaCompiler::object_expr(const ojson& s) {
    // Listed properties: `properties` in order, then required keys not listed there.
    std::vector<std::pair<std::string, const ojson*>> props;
    std::set<std::string> listed;
    if (s.contains("properties")) {
        EMBER_REQUIRE(s["properties"].is_object(), "properties must be an object");
        for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
            props.push_back({it.key(), &it.value()});
            listed.insert(it.key());
        }
    }
    std::set<std::string> required;
    if (s.contains("required")) {
        EMBER_REQUIRE(s["required"].is_array(), "required must be an array");
        for (const auto& r : s["required"]) {
            EMBER_REQUIRE(r.is_string(), "required must list strings");
            required.insert(r.get<std::string>());
        }
    }
    const ojson kTrue = true;
    const ojson* additional = &kTrue;
    if (s.contains("additionalProperties")) additional = &s["additionalProperties"];
    std::vector<std::pair<std::string, const ojson*>> patterns;
    if (s.contains("patternProperties")) {
        EMBER_REQUIRE(s["patternProperties"].is_object(), "patternProperties must be an object");
        for (auto it = s["patternProperties"].begin(); it != s["patternProperties"].end(); ++it)
            patterns.push_back({it.key(), &it.value()});
    }
    EMBER_REQUIRE(int(patterns.size()) <= kMaxPatternRegions, "patternProperties with more than %d patterns is not supported",
                  kMaxPatternRegions);
    // Key languages (quoted, as DFAs over the JSON encoding).
    GrammarIR lex;
    CharEncoder enc = [](GrammarIR& gg, const CpSet& c) { return json::string_char_expr(gg, c); };
    std::vector<ByteDfa> pat_dfa;
    for (auto& [p, sch] : patterns) {
        auto re = regex_to_ir(lex, p, RegexMatch::SEARCH, enc);
        if (!re) return re.status().with_context("patternProperties");
        EMBER_ASSIGN(ByteDfa d, quoted(lex, re.value()));
        pat_dfa.push_back(std::move(d));
    }
    const ByteDfa& any_key = any_key_dfa();
    ByteDfa names;  // propertyNames (any key when absent)
    const bool has_names = s.contains("propertyNames") && !(s["propertyNames"].is_boolean() && s["propertyNames"].get<bool>());
    if (has_names) {
        const ojson& pn = s["propertyNames"];
        EMBER_REQUIRE(pn.is_object(), "propertyNames must be a schema object");
        json::StringConstraints c;
        for (auto it = pn.begin(); it != pn.end(); ++it) {
            const std::string& k = it.key();
            if (k == "pattern") c.patterns.push_back(it.value().get<std::string>());
            else if (k == "minLength") c.min_length = it.value().get<int64_t>();
            else if (k == "maxLength") c.max_length = it.value().get<int64_t>();
            else if (k == "format") c.format = it.value().get<std::string>();
            else if (k == "type") EMBER_REQUIRE(it.value() == "string", "propertyNames: type must be string");
            else if (!is_annotation(k)) return errorf("propertyNames with '%s' is not supported", k.c_str());
        }
        EMBER_ASSIGN(int e, json::string_expr(lex, c));
        EMBER_ASSIGN(names, dfa_from_expr(lex, e));
    }
    // Listed keys: required ones missing from `properties` take the additional / pattern schemas; so do the
    // names dependencies mention (every key they constrain gets a slot in the member order).
    EMBER_ASSIGN(auto deps, property_dependencies(s));
    auto list = [&](const std::string& k) {
        if (listed.insert(k).second) props.push_back({k, nullptr});
    };
    for (const std::string& r : required) list(r);
    for (auto& [trigger, names] : deps) {
        list(trigger);
        for (const std::string& k : names) list(k);
    }
    // Presence constraints (json_schema_impl.h kPresenceKeyword): per constraint, its lists of names.
    std::vector<std::vector<std::vector<std::string>>> one_of;
    if (s.contains(kPresenceKeyword)) {
        for (const auto& c : s[kPresenceKeyword]) {
            EMBER_REQUIRE(c.is_object() && c.contains("oneOf") && c["oneOf"].is_array(), "%s: malformed", kPresenceKeyword);
            std::vector<std::vector<std::string>> lists;
            for (const auto& l : c["oneOf"]) {
                EMBER_REQUIRE(l.is_array(), "%s: malformed", kPresenceKeyword);
                lists.emplace_back();
                for (const auto& x : l) {
                    EMBER_REQUIRE(x.is_string(), "%s: malformed", kPresenceKeyword);
                    lists.back().push_back(x.get<std::string>());
                    list(x.get<std::string>());
                }
            }
            one_of.push_back(std::move(lists));
        }
    }
    std::vector<int> kv;        // per listed key: key ws ':' ws value
    std::vector<bool> must;     // required
    std::vector<std::string> keys_enc, keys;
    for (auto& [k, sch] : props) {
        const std::string enc_k = json::encode_string(k);
        if (!dfa_matches(has_names ? names : any_key, enc_k)) {  // propertyNames forbids it
            if (required.count(k)) return g.nothing();
            continue;
        }
        // The value schema: the property's, and every matching pattern's (all apply).
        ojson all = ojson::array();
        if (sch) all.push_back(*sch);
        for (size_t j = 0; j < patterns.size(); ++j)
            if (dfa_matches(pat_dfa[j], enc_k)) all.push_back(*patterns[j].second);
        if (!sch && all.empty()) all.push_back(*additional);
        const ojson& vs = all.size() == 1 ? own(all[0]) : own(ojson{{"allOf", all}});
        EMBER_ASSIGN(int v, call(vs));
        kv.push_back(g.seq({g.literal(enc_k), ws(), g.byte(':'), ws(), v}));
        must.push_back(required.count(k) > 0);
        keys_enc.push_back(enc_k);
        keys.push_back(k);
    }
    // Additional keys: regions by the set of patterns matched; listed keys excluded.
    int extra = -1;
    {
        std::vector<int> lits;
        for (const std::string& k : keys_enc) lits.push_back(lex.literal(k));
        ByteDfa base = any_key;
        if (has_names) {
            EMBER_ASSIGN(base, dfa_intersect(any_key, names));
        }
        if (!lits.empty()) {
            EMBER_ASSIGN(ByteDfa listed_d, dfa_from_expr(lex, lex.alt(lits)));
            EMBER_ASSIGN(base, dfa_intersect(base, dfa_complement(listed_d)));
        }
        std::vector<int> alts;
        const size_t P = patterns.size();
        for (size_t mask = 0; mask < (size_t(1) << P); ++mask) {
            ByteDfa region = base;
            ojson all = ojson::array();
            for (size_t j = 0; j < P; ++j) {
                if (mask >> j & 1) {
                    EMBER_ASSIGN(region, dfa_intersect(region, pat_dfa[j]));
                    all.push_back(*patterns[j].second);
                } else {
                    EMBER_ASSIGN(region, dfa_intersect(region, dfa_complement(pat_dfa[j])));
                }
                if (dfa_empty(region)) break;
            }
            if (dfa_empty(region)) continue;
            if (mask == 0) {
                if (additional->is_boolean() && !additional->get<bool>()) continue;
                all.push_back(*additional);
            }
            const ojson& vs = all.size() == 1 ? own(all[0]) : own(ojson{{"allOf", all}});
            if (vs.is_boolean() && !vs.get<bool>()) continue;
            EMBER_ASSIGN(int v, call(vs));
            alts.push_back(g.seq({dfa_expr(g, std::move(region)), ws(), g.byte(':'), ws(), v}));
        }
        if (!alts.empty()) extra = g.alt(alts);
    }
    // Members: states (i, c, d) — i listed keys decided, c members written (saturating at C), d which keys that
    // dependencies or presence constraints mention were written (one bit each): a key whose dependency names come
    // earlier needs them written; a key named by an earlier written one cannot be skipped; the final states are
    // those where each presence constraint has exactly one complete list.
    EMBER_ASSIGN(int64_t min_p, count_kw(s, "minProperties", 0));
    EMBER_ASSIGN(int64_t max_p, count_kw(s, "maxProperties", -1));
    EMBER_REQUIRE(min_p <= kMaxCount && max_p <= kMaxCount, "minProperties / maxProperties beyond %lld are not supported",
                  (long long)kMaxCount);
    const int64_t n = int64_t(kv.size());
    std::map<std::string, int64_t> pos;
    for (int64_t i = 0; i < n; ++i) pos[keys[size_t(i)]] = i;
    std::vector<std::vector<int64_t>> needs(static_cast<size_t>(n));  // per key: the keys it requires (dependencies)
    std::vector<bool> takable(size_t(n), true);
    // Up to kAnyOrderMax listed keys are accepted in any order: the state holds the set of keys written, which
    // also tells every dependency and presence constraint (bit i = key i). Beyond that, `properties` order.
    const bool any_order = n <= kAnyOrderMax;
    std::vector<int> bit(size_t(n), -1);
    int n_bits = 0;
    if (any_order)
        for (int64_t i = 0; i < n; ++i) bit[size_t(i)] = n_bits++;
    for (auto& [trigger, names] : deps) {
        if (!pos.count(trigger)) continue;  // propertyNames forbids it: never present
        const int64_t a = pos[trigger];
        for (const std::string& k : names) {
            if (!pos.count(k)) {  // a required name that cannot be written
                takable[size_t(a)] = false;
                continue;
            }
            needs[size_t(a)].push_back(pos[k]);
            for (int64_t x : {a, pos[k]})
                if (bit[size_t(x)] < 0) bit[size_t(x)] = n_bits++;
        }
        if (!takable[size_t(a)] && must[size_t(a)]) return g.nothing();
    }
    // Per constraint and list: the keys' indices, or empty with possible = false when a name cannot be written.
    struct KeyList {
        std::vector<int64_t> keys;
        bool possible = true;
    };
    std::vector<std::vector<KeyList>> one_of_keys;
    for (const auto& lists : one_of) {
        one_of_keys.emplace_back();
        for (const auto& names : lists) {
            KeyList kl;
            for (const std::string& k : names) {
                if (!pos.count(k)) { kl.possible = false; continue; }
                kl.keys.push_back(pos[k]);
                if (bit[size_t(pos[k])] < 0) bit[size_t(pos[k])] = n_bits++;
            }
            one_of_keys.back().push_back(std::move(kl));
        }
    }
    EMBER_REQUIRE(n_bits <= 12, "'dependencies' / 'oneOf' of required lists over more than 12 properties is not supported");
    const int64_t C = max_p >= 0 ? max_p : std::max<int64_t>(min_p, 1);
    const int64_t D = int64_t(1) << n_bits;
    EMBER_REQUIRE((n + 1) * (C + 1) * D <= 1000000, "object automaton too large (properties × count × dependencies)");
    auto written = [&](int64_t d, int64_t k) { return bit[size_t(k)] >= 0 && (d >> bit[size_t(k)] & 1); };
    auto presence_ok = [&](int64_t d) {  // every constraint: exactly one list complete
        for (const auto& lists : one_of_keys) {
            int complete = 0;
            for (const KeyList& kl : lists) {
                bool all = kl.possible;
                for (int64_t k : kl.keys) all = all && written(d, k);
                complete += all;
            }
            if (complete != 1) return false;
        }
        return true;
    };
    Graph gr;
    auto member = [&](int e, int64_t c) { return c > 0 ? g.seq({sep(), e}) : e; };
    if (any_order) {
        // States (S, c): S the listed keys written, c members written; then X_c: additional keys (after the
        // listed ones, as in the ordered form, so the key-exclusion automaton appears once per c, not per S).
        auto sid = [&](int64_t S, int64_t c) { return int(S * (C + 1) + c); };
        auto xid = [&](int64_t c) { return int(D * (C + 1) + c); };
        gr.n_states = int((D + 1) * (C + 1));
        for (int64_t S = 0; S < D; ++S) {
            bool done = presence_ok(S);  // the listed keys may stop here
            for (int64_t i = 0; i < n && done; ++i) {
                if (must[size_t(i)] && !written(S, i)) done = false;
                if (written(S, i))
                    for (int64_t k : needs[size_t(i)]) done = done && written(S, k);
            }
            for (int64_t c = 0; c <= C; ++c) {
                const int64_t c1 = max_p >= 0 ? c + 1 : std::min(c + 1, C);
                const bool more = max_p < 0 || c + 1 <= max_p;
                for (int64_t i = 0; i < n && more; ++i)
                    if (takable[size_t(i)] && !written(S, i))
                        gr.edges.push_back({sid(S, c), sid(S | (int64_t(1) << i), c1), member(kv[size_t(i)], c)});
                if (!done) continue;
                if (c >= min_p) gr.finals.push_back(sid(S, c));
                if (extra >= 0 && more) gr.edges.push_back({sid(S, c), xid(c), -1});
            }
        }
        for (int64_t c = 0; c <= C; ++c) {
            const int64_t c1 = max_p >= 0 ? c + 1 : std::min(c + 1, C);
            if (extra >= 0 && (max_p < 0 || c + 1 <= max_p)) gr.edges.push_back({xid(c), xid(c1), member(extra, c)});
            if (c >= min_p) gr.finals.push_back(xid(c));
        }
        gr.start = sid(0, 0);
        return g.seq({g.byte('{'), ws(), g.graph(std::move(gr)), ws(), g.byte('}')});
    }
    gr.n_states = int((n + 1) * (C + 1) * D);
    auto id = [&](int64_t i, int64_t c, int64_t d) { return int((i * (C + 1) + c) * D + d); };
    for (int64_t i = 0; i <= n; ++i)
        for (int64_t c = 0; c <= C; ++c)
            for (int64_t d = 0; d < D; ++d) {
                const int64_t c1 = max_p >= 0 ? c + 1 : std::min(c + 1, C);
                if (i < n) {
                    bool take = takable[size_t(i)], skip = !must[size_t(i)];
                    for (int64_t k : needs[size_t(i)]) take = take && (k > i || written(d, k));
                    for (int64_t a = 0; a < i && skip; ++a)
                        if (written(d, a))
                            for (int64_t k : needs[size_t(a)]) skip = skip && k != i;
                    const int64_t d1 = bit[size_t(i)] >= 0 ? d | (int64_t(1) << bit[size_t(i)]) : d;
                    if (take && c1 <= C && (max_p < 0 || c + 1 <= max_p))
                        gr.edges.push_back({id(i, c, d), id(i + 1, c1, d1), member(kv[size_t(i)], c)});
                    if (skip) gr.edges.push_back({id(i, c, d), id(i + 1, c, d), -1});
                } else if (extra >= 0 && (max_p < 0 || c + 1 <= max_p)) {
                    gr.edges.push_back({id(i, c, d), id(i, c1, d), member(extra, c)});
                }
            }
    for (int64_t c = 0; c <= C; ++c)
        if (c >= min_p)
            for (int64_t d = 0; d < D; ++d)
                if (presence_ok(d)) gr.finals.push_back(id(n, c, d));
    gr.start = id(0, 0, 0);
    return g.seq({g.byte('{'), ws(), g.graph(std::move(gr)), ws(), g.byte('}')});
}

Expected<int> SchemaCompiler::array_expr(const ojson& s) {
    std::vector<const ojson*> prefix;
    const ojson kTrue = true;
    const ojson* rest = &kTrue;
    if (s.contains("prefixItems")) {
        EMBER_REQUIRE(s["prefixItems"].is_array(), "prefixItems must be an array");
        for (const auto& x : s["prefixItems"]) prefix.push_back(&x);
        if (s.contains("items")) rest = &s["items"];
    } else if (s.contains("items") && s["items"].is_array()) {
        for (const auto& x : s["items"]) prefix.push_back(&x);
        if (s.contains("additionalItems")) rest = &s["additionalItems"];
    } else if (s.contains("items")) {
        rest = &s["items"];
    }
    EMBER_ASSIGN(int64_t min_i, count_kw(s, "minItems", 0));
    EMBER_ASSIGN(int64_t max_i, count_kw(s, "maxItems", -1));
    EMBER_REQUIRE(min_i <= kMaxCount && max_i <= kMaxCount, "minItems / maxItems beyond %lld are not supported",
                  (long long)kMaxCount);
    const int64_t P = int64_t(prefix.size());
    const bool rest_false = rest->is_boolean() && !rest->get<bool>();
    // States c = items written; N = the last counted state (loops when unbounded).
    const int64_t N = max_i >= 0 ? max_i : std::max<int64_t>({P, min_i, 1});
    Graph gr;
    gr.n_states = int(N + 1);
    int rest_v = -1;
    if (!rest_false) {
        EMBER_ASSIGN(rest_v, call(*rest));
    }
    for (int64_t c = 0; c < N; ++c) {
        int v;
        if (c < P) {
            EMBER_ASSIGN(v, call(*prefix[size_t(c)]));
        } else {
            if (rest_v < 0) break;
            v = rest_v;
        }
        gr.edges.push_back({int(c), int(c + 1), c > 0 ? g.seq({sep(), v}) : v});
    }
    if (max_i < 0 && rest_v >= 0 && N >= P) gr.edges.push_back({int(N), int(N), g.seq({sep(), rest_v})});
    for (int64_t c = min_i; c <= N; ++c) gr.finals.push_back(int(c));
    gr.start = 0;
    return g.seq({g.byte('['), ws(), g.graph(std::move(gr)), ws(), g.byte(']')});
}

}  // namespace ember::grammar
