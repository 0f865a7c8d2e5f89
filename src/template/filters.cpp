// filters.cpp: jinja2's built-in filters as transformers' chat-template environment has them
// (see builtins.h for the list). Each follows jinja2/filters.py with autoescape off.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "template/builtins.h"
#include "template/eval.h"
#include "template/ops.h"
#include "template/py_text.h"
#include "template/value_json.h"

namespace ember::jinja {

namespace {

using Args = std::vector<std::optional<Value>>;

Value arg_or(const Args& a, size_t i, Value dflt) { return a[i] ? *a[i] : std::move(dflt); }
bool flag(const Args& a, size_t i, bool dflt = false) { return a[i] ? a[i]->truthy() : dflt; }

// jinja2's make_attrgetter: "a.b.0" → item["a"]["b"][0] with getattr fallback.
Expected<Value> attr_path(const Value& item, const Value& attribute) {
    if (!attribute.is_string()) return get_item(item, attribute);
    Value cur = item;
    const std::string& path = attribute.as_string();
    size_t pos = 0;
    while (true) {
        size_t dot = path.find('.', pos);
        std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
        bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
        EMBER_ASSIGN(cur, get_item(cur, digits ? Value::integer(std::atoll(part.c_str())) : Value::string(part)));
        if (dot == std::string::npos) return cur;
        pos = dot + 1;
    }
}

Value ignore_case(const Value& v) { return v.is_string() ? Value::string(py_lower(v.as_string())) : v; }

// Stable sort with a Python comparison that may fail.
Status sort_values(ValueList& items, const std::vector<Value>& keys, bool reverse) {
    std::vector<size_t> order(items.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    Status err;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
        if (!err) return false;
        auto lt = compare("<", reverse ? keys[y] : keys[x], reverse ? keys[x] : keys[y]);
        if (!lt) {
            err = lt.status();
            return false;
        }
        return lt.value();
    });
    EMBER_TRY(err);
    ValueList out;
    out.reserve(items.size());
    for (size_t i : order) out.push_back(items[i]);
    items = std::move(out);
    return Status::ok();
}

Expected<Value> f_default(Renderer&, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Args p, bind_args(a, {"default_value", "boolean"}, "default"));
    if (v.is_undefined() || (flag(p, 1) && !v.truthy())) return arg_or(p, 0, Value::string(""));
    return v;
}

Expected<Value> f_length(Renderer&, const Value& v, CallArgs& a) {
    EMBER_TRY(bind_args(a, {}, "length").status());
    EMBER_ASSIGN(int64_t n, length(v));
    return Value::integer(n);
}

Expected<Value> f_string(Renderer&, const Value& v, CallArgs&) {
    return v.is_string() ? v : Value::string(v.str());
}

Expected<Value> f_int(Renderer&, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Args p, bind_args(a, {"default", "base"}, "int"));
    Value dflt = arg_or(p, 0, Value::integer(0));
    int base = p[1] && p[1]->is_integral() ? static_cast<int>(p[1]->as_int()) : 10;
    if (v.is_integral()) return Value::integer(v.as_int());
    if (v.is_float()) {
        double f = v.as_float();
        if (!std::isfinite(f) || std::fabs(f) >= 9.2e18) return dflt;
        return Value::integer(static_cast<int64_t>(f));
    }
    if (v.is_string()) {
        if (auto i = py_parse_int(v.as_string(), base)) return Value::integer(*i);
        if (auto f = py_parse_float(v.as_string()); f && std::isfinite(*f) && std::fabs(*f) < 9.2e18)
            return Value::integer(static_cast<int64_t>(*f));
    }
    return dflt;
}

Expected<Value> f_float(Renderer&, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Args p, bind_args(a, {"default"}, "float"));
    if (v.is_number()) return Value::real(v.as_float());
    if (v.is_string())
        if (auto f = py_parse_float(v.as_string())) return Value::real(*f);
    return arg_or(p, 0, Value::real(0.0));
}

Expected<Value> f_upper(Renderer&, const Value& v, CallArgs&) { return Value::string(py_upper(v.str())); }
Expected<Value> f_lower(Renderer&, const Value& v, CallArgs&) { return Value::string(py_lower(v.str())); }
Expected<Value> f_capitalize(Renderer&, const Value& v, CallArgs&) { return Value::string(py_capitalize(v.str())); }

// jinja2's title: re.split(r"([-\s\(\{\[\<]+)") and item[0].upper() + item[1:].lower() per piece.
Expected<Value> f_title(Renderer&, const Value& v, CallArgs&) {
    std::u32string u = utf8_decode(v.str());
    auto delim = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c); };
    std::string out;
    for (size_t i = 0; i < u.size();) {
        size_t j = i;
        bool d = delim(u[i]);
        while (j < u.size() && delim(u[j]) == d) ++j;
        std::u32string_view piece(u.data() + i, j - i);
        out += py_upper(utf8_encode(piece.substr(0, 1)));
        out += py_lower(utf8_encode(piece.substr(1)));
        i = j;
    }
    return Value::string(std::move(out));
}

Expected<Value> f_trim(Renderer&, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Args p, bind_args(a, {"chars"}, "trim"));
    if (p[0] && !p[0]->is_none()) {
        std::u32string chars = utf8_decode(p[0]->str());
        return Value::string(py_strip(v.str(), &chars, true, true));
    }
    return Value::string(py_strip(v.str(), nullptr, true, true));
}

Expected<Value> f_replace(Renderer& r, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Args p, bind_args(a, {"old", "new", "count"}, "replace"));
    if (!p[0] || !p[1]) return errorf("replace() needs 'old' and 'new'");
    long long count = p[2] && p[2]->is_integral() ? p[2]->as_int() : -1;
    std::string s = v.str(), old = p[0]->str(), repl = p[1]->str();
    if (repl.size() > old.size()) {
        size_t hits = old.empty() ? utf8_length(s) + 1 : 0;
        size_t i = old.empty() ? std::string::npos : s.find(old);
        for (; i != std::string::npos; i = s.find(old, i + old.size())) ++hits;
        EMBER_TRY(r.produced(s.size() + hits * (repl.size() - old.size())));
    }
    return Value::string(py_replace(s, old, repl, count));
}

Expected<Value> f_join(Renderer& r, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Args p, bind_args(a, {"d", "attribute"}, "join"));
    std::string sep = p[0] ? p[0]->str() : "";
    EMBER_ASSIGN(ValueList items, iterate(v));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
        Value item = items[i];
        if (p[1] && !p[1]->is_none()) {
            EMBER_ASSIGN(item, attr_path(item, *p[1]));
        }
        if (i) out += sep;
        out += item.str();
        EMBER_TRY(r.check_size(out.size()));
    }
    EMBER_TRY(r.produced(out.size()));
    return Value::string(std::move(out));
}

Expected<Value> f_first(Renderer&, const Value& v, CallArgs&) {
    if (v.is_generator()) {  // next(iter(gen)) takes one item
        const Value* x = v.take_one();
        if (!x) return Value::undefined("No first item, sequence was empty.");
        return *x;
    }
    EMBER_ASSIGN(ValueList items, iterate(v));
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items.front();
}

Expected<Value> f_last(Renderer&, const Value& v, CallArgs&) {
    if (v.is_undefined()) return undefined_error(v);
    if (v.is_generator()) return errorf("'generator' object is not reversible");
    EMBER_ASSIGN(ValueList items, iterate(v));
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
}

Expected<Value> f_list(Renderer&, const Value& v, CallArgs&) {
    EMBER_ASSIGN(ValueList items, iterate(v));
    return Value::list(std::move(items));
}

Expected<Value> f_items(Renderer&, const Value& v, CallArgs&) {
    if (v.is_undefined()) return Value::generator({});
    if (!v.is_dict()) return errorf("Can only get item pairs from a mapping.");
    ValueList out;
    for (const auto& [k, x] : v.as_dict().items()) out.push_back(Value::tuple({k, x}));
    return Value::generator(std::move(out));
}

Expected<Value> f_dictsort(Renderer&, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Args p, bind_args(a, {"case_sensitive", "by", "reverse"}, "dictsort"));
    if (!v.is_dict()) return errorf("dictsort: expected a mapping, got %s", v.type_name());
    std::string by = p[1] ? p[1]->str() : "key";
    if (by != "key" && by != "value") return errorf("You can only sort by either \"key\" or \"value\"");
    ValueList items;
    std::vector<Value> keys;
    for (const auto& [k, x] : v.as_dict().items()) {
        items.push_back(Value::tuple({k, x}));
        const Value& key = by == "key" ? k : x;
        keys.push_back(flag(p, 0) ? key : ignore_case(key));
    }
    EMBER_TRY(sort_values(items, keys, flag(p, 2)));
    return Value::list(std::move(items));
}

Expected<Value> f_sort(Renderer&, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Args p, bind_args(a, {"reverse", "case_sensitive", "attribute"}, "sort"));
    EMBER_ASSIGN(ValueList items, iterate(v));
    std::vector<Value> keys;
    for (const Value& item : items) {
        Value k = item;
        if (p[2] && !p[2]->is_none()) {
            EMBER_ASSIGN(k, attr_path(item, *p[2]));
        }
        keys.push_back(flag(p, 1) ? k : ignore_case(k));
    }
    EMBER_TRY(sort_values(items, keys, flag(p, 0)));
    return Value::list(std::move(items));
}

Expected<Value> f_unique(Renderer&, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Args p, bind_args(a, {"case_sensitive", "attribute"}, "unique"));
    EMBER_ASSIGN(ValueList items, iterate(v));
    std::unordered_map<std::string, bool> seen;
    ValueList out;
    for (const Value& item : items) {
        Value k = item;
        if (p[1] && !p[1]->is_none()) {
            EMBER_ASSIGN(k, attr_path(item, *p[1]));
        }
        if (!flag(p, 0)) k = ignore_case(k);
        if (seen.emplace(hash_key(k), true).second) out.push_back(item);
    }
    return Value::generator(std::move(out));
}

Expected<Value> f_reverse(Renderer&, const Value& v, CallArgs&) {
    if (v.is_string()) {
        std::u32string u = utf8_decode(v.as_string());
        std::reverse(u.begin(), u.end());
        return Value::string(utf8_encode(u));
    }
    bool reversible = v.is_sequence() || v.is_dict();  // reversed() works: an iterator; else list(value)
    EMBER_ASSIGN(ValueList items, iterate(v));
    std::reverse(items.begin(), items.end());
    return reversible ? Value::generator(std::move(items)) : Value::list(std::move(items));
}

Expected<Value> f_map(Renderer& r, const Value& v, CallArgs& a) {
    if (!v.truthy()) return Value::generator({});  // jinja2: `if value:` before iterating
    EMBER_ASSIGN(ValueList items, iterate(v));
    ValueList out;
    if (a.pos.empty()) {
        EMBER_ASSIGN(Args p, bind_args(a, {"attribute", "default"}, "map"));
        if (!p[0]) return errorf("map() needs a filter name or attribute=");
        for (const Value& item : items) {
            EMBER_ASSIGN(Value x, attr_path(item, *p[0]));
            if (x.is_undefined() && p[1] && !p[1]->is_none()) x = *p[1];
            out.push_back(std::move(x));
        }
        return Value::generator(std::move(out));
    }
    std::string name = a.pos[0].str();
    CallArgs rest{ValueList(a.pos.begin() + 1, a.pos.end()), a.kw};
    for (const Value& item : items) {
        CallArgs call = rest;
        EMBER_ASSIGN(Value x, r.apply_filter(name, item, call));
        out.push_back(std::move(x));
    }
    return Value::generator(std::move(out));
}

// select / reject / selectattr / rejectattr
Expected<Value> select_impl(Renderer& r, const Value& v, CallArgs& a, bool keep_if, bool by_attr) {
    if (!v.truthy()) return Value::generator({});  // jinja2: `if value:` before iterating
    EMBER_ASSIGN(ValueList items, iterate(v));
    size_t at = 0;
    Value attr;
    if (by_attr) {
        if (a.pos.empty()) return errorf("selectattr/rejectattr need an attribute name");
        attr = a.pos[at++];
    }
    std::optional<std::string> test;
    if (at < a.pos.size()) test = a.pos[at++].str();
    CallArgs rest{ValueList(a.pos.begin() + at, a.pos.end()), a.kw};
    ValueList out;
    for (const Value& item : items) {
        Value x = item;
        if (by_attr) {
            EMBER_ASSIGN(x, attr_path(item, attr));
        }
        bool ok;
        if (test) {
            CallArgs call = rest;
            EMBER_ASSIGN(ok, r.apply_test(*test, x, call));
        } else {
            ok = x.truthy();
        }
        if (ok == keep_if) out.push_back(item);
    }
    return Value::generator(std::move(out));
}
Expected<Value> f_select(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, true, false); }
Expected<Value> f_reject(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, false, false); }
Expected<Value> f_selectattr(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, true, true); }
Expected<Value> f_rejectattr(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, false, true); }

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
Expected<Value> f_tojson(Renderer& r, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Args p, bind_args(a, {"ensure_ascii", "indent", "separators", "sort_keys"}, "tojson"));
    JsonDumpOptions o;
    o.ensure_ascii = flag(p, 0);
    o.sort_keys = flag(p, 3);
    if (p[1] && !p[1]->is_none()) {
        if (p[1]->is_integral()) o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(p[1]->as_int(), 0, 1024)),
                                                        ' ');
        else if (p[1]->is_string()) o.indent = p[1]->as_string();
        else return errorf("tojson: indent must be an int or a string");
    }
    if (p[2] && !p[2]->is_none()) {
        if (!p[2]->is_sequence() || p[2]->as_list().size() != 2) return errorf("tojson: separators must be a pair");
        o.item_sep = p[2]->as_list()[0].str();
        o.key_sep = p[2]->as_list()[1].str();
    }
    EMBER_ASSIGN(std::string s, json_dumps(v, o));
    EMBER_TRY(r.produced(s.size()));
    return Value::string(std::move(s));
}

Expected<Value> f_indent(Renderer& r, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Args p, bind_args(a, {"width", "first", "blank"}, "indent"));
    std::string ind = "    ";
    if (p[0]) {
        if (p[0]->is_string()) ind = p[0]->as_string();
        else if (p[0]->is_integral()) ind.assign(static_cast<size_t>(std::clamp<int64_t>(p[0]->as_int(), 0, 4096)), ' ');
        else return errorf("indent: width must be an int or a string");
    }
    std::string s = v.str() + "\n";
    std::vector<std::string> lines = py_splitlines(s, false);
    std::string out;
    if (flag(p, 2)) {
        for (size_t i = 0; i < lines.size(); ++i) out += cat({i ? "\n" : "", i ? ind : "", lines[i]});
    } else if (!lines.empty()) {
        out = lines[0];
        for (size_t i = 1; i < lines.size(); ++i) out += cat({"\n", lines[i].empty() ? "" : ind, lines[i]});
    }
    if (flag(p, 1)) out = ind + out;
    EMBER_TRY(r.produced(out.size()));
    return Value::string(std::move(out));
}

Expected<Value> f_safe(Renderer&, const Value& v, CallArgs&) { return Value::string(v.str(), true); }
Expected<Value> f_escape(Renderer&, const Value& v, CallArgs&) {
    if (v.is_markup()) return v;
    return Value::string(html_escape(v.str()), true);
}
Expected<Value> f_forceescape(Renderer&, const Value& v, CallArgs&) { return Value::string(html_escape(v.str()), true); }

Expected<Value> f_center(Renderer& r, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Args p, bind_args(a, {"width"}, "center"));
    int64_t width = p[0] && p[0]->is_integral() ? p[0]->as_int() : 80;
    std::string s = v.str();
    int64_t marg = width - static_cast<int64_t>(utf8_length(s));
    if (marg <= 0) return Value::string(s);
    EMBER_TRY(r.produced(static_cast<size_t>(width)));
    int64_t left = marg / 2 + (marg & width & 1);
    return Value::string(std::string(left, ' ') + s + std::string(marg - left, ' '));
}

Expected<Value> f_abs(Renderer&, const Value& v, CallArgs&) {
    if (v.is_float()) return Value::real(std::fabs(v.as_float()));
    if (v.is_integral()) return v.as_int() < 0 ? unary_minus(v) : Expected<Value>(Value::integer(v.as_int()));
    return errorf("bad operand type for abs(): '%s'", v.type_name());
}

Expected<Value> f_round(Renderer&, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Args p, bind_args(a, {"precision", "method"}, "round"));
    int64_t prec = p[0] && p[0]->is_integral() ? p[0]->as_int() : 0;
    std::string method = p[1] ? p[1]->str() : "common";
    if (method != "common" && method != "ceil" && method != "floor")
        return errorf("method must be common, ceil or floor");
    if (!v.is_number()) return errorf("type %s doesn't define __round__ method", v.type_name());
    if (method == "common" && v.is_integral() && prec >= 0) return Value::integer(v.as_int());
    double x = v.as_float();
    if (method != "common" || prec < 0 || prec > 300 || !std::isfinite(x)) {
        double scale = std::pow(10.0, static_cast<double>(prec));
        double y = method == "ceil" ? std::ceil(x * scale) : method == "floor" ? std::floor(x * scale)
                                                                                : std::nearbyint(x * scale);
        return Value::real(y / scale);
    }
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(prec), x);  // exact decimal, ties to even
    return Value::real(std::strtod(buf, nullptr));
}

Expected<Value> minmax(const Value& v, CallArgs& a, bool want_max) {
    EMBER_ASSIGN(Args p, bind_args(a, {"case_sensitive", "attribute"}, want_max ? "max" : "min"));
    EMBER_ASSIGN(ValueList items, iterate(v));
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    size_t best = 0;
    Value best_key;
    for (size_t i = 0; i < items.size(); ++i) {
        Value k = items[i];
        if (p[1] && !p[1]->is_none()) {
            EMBER_ASSIGN(k, attr_path(items[i], *p[1]));
        }
        if (!flag(p, 0)) k = ignore_case(k);
        if (i == 0) { best_key = k; continue; }
        EMBER_ASSIGN(bool better, compare(want_max ? ">" : "<", k, best_key));
        if (better) { best = i; best_key = k; }
    }
    return items[best];
}
Expected<Value> f_max(Renderer&, const Value& v, CallArgs& a) { return minmax(v, a, true); }
Expected<Value> f_min(Renderer&, const Value& v, CallArgs& a) { return minmax(v, a, false); }

Expected<Value> f_sum(Renderer& r, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Args p, bind_args(a, {"attribute", "start"}, "sum"));
    EMBER_ASSIGN(ValueList items, iterate(v));
    Value total = arg_or(p, 1, Value::integer(0));
    for (const Value& item : items) {
        Value x = item;
        if (p[0] && !p[0]->is_none()) {
            EMBER_ASSIGN(x, attr_path(item, *p[0]));
        }
        if (x.is_string() || total.is_string()) return errorf("sum() can't sum strings [use ''.join(seq) instead]");
        EMBER_ASSIGN(total, binary_op("+", total, x, 1 << 30));
        if (total.is_list()) EMBER_TRY(r.produced(total.as_list().size() * 16));
    }
    return total;
}

Expected<Value> f_attr(Renderer&, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Args p, bind_args(a, {"name"}, "attr"));
    if (!p[0]) return errorf("attr() needs a name");
    // getattr() only: Python attributes (methods, namespace attributes), never dict keys.
    std::string name = p[0]->str();
    if (v.is_undefined()) return undefined_error(v);
    if (v.is_namespace())
        if (const Value* x = v.as_dict().find(name)) return *x;
    Value m = bind_method(v, name);
    if (!m.is_undefined()) return m;
    return Value::undefined(cat({"'", object_type_repr(v), "' has no attribute ", py_str_repr(name)}));
}

Expected<Value> f_format(Renderer&, const Value& v, CallArgs& a) {
    if (!a.pos.empty() && !a.kw.empty()) return errorf("can't handle positional and keyword arguments at the same time");
    Value args;
    if (!a.kw.empty()) {
        Dict d;
        for (const auto& [k, x] : a.kw) d.set(Value::string(k), x);
        args = Value::dict(std::move(d));
    } else {
        args = Value::tuple(a.pos);
    }
    EMBER_ASSIGN(std::string s, percent_format(v.str(), args));
    return Value::string(std::move(s));
}

Expected<Value> f_wordcount(Renderer&, const Value& v, CallArgs&) {
    int64_t n = 0;
    bool in_word = false;
    for (char32_t c : utf8_decode(v.str())) {
        bool w = c == '_' || py_is_alpha(c) || py_is_numeric(c);
        if (w && !in_word) ++n;
        in_word = w;
    }
    return Value::integer(n);
}

}  // namespace

FilterFn find_filter(const std::string& name) {
    static const std::unordered_map<std::string, FilterFn> filters = {
        {"abs", f_abs}, {"attr", f_attr}, {"capitalize", f_capitalize}, {"center", f_center},
        {"count", f_length}, {"d", f_default}, {"default", f_default}, {"dictsort", f_dictsort},
        {"e", f_escape}, {"escape", f_escape}, {"first", f_first}, {"float", f_float},
        {"forceescape", f_forceescape}, {"format", f_format}, {"indent", f_indent}, {"int", f_int},
        {"items", f_items}, {"join", f_join}, {"last", f_last}, {"length", f_length}, {"list", f_list},
        {"lower", f_lower}, {"map", f_map}, {"max", f_max}, {"min", f_min}, {"reject", f_reject},
        {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse}, {"round", f_round},
        {"safe", f_safe}, {"select", f_select}, {"selectattr", f_selectattr}, {"sort", f_sort},
        {"string", f_string}, {"sum", f_sum}, {"title", f_title}, {"tojson", f_tojson}, {"trim", f_trim},
        {"unique", f_unique}, {"upper", f_upper}, {"wordcount", f_wordcount},
    };
    auto it = filters.find(name);
    return it == filters.end() ? nullptr : it->second;
}

}  // namespace ember::jinja
