// methods.cpp: the Python methods of str, dict and list that chat templates call
// (message.content.split('</think>'), tool.get('name'), d.items(), ...), with Python's semantics.
// The mutating methods (list.append, dict.update, ...) fail as they do in jinja2's
// ImmutableSandboxedEnvironment. dict.keys()/values()/items() return lists.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "template/builtins.h"
#include "template/eval.h"
#include "template/ops.h"
#include "template/py_text.h"

namespace ember::jinja {

namespace {

using Args = std::vector<std::optional<Value>>;
using Method = Expected<Value> (*)(Renderer&, const Value&, const std::string&, CallArgs&);

Expected<std::string> str_arg(const Args& p, size_t i, const char* what) {
    if (!p[i] || !p[i]->is_string()) return errorf("%s must be a string", what);
    return p[i]->as_string();
}

// s[start:end] in code points (Python's optional start/end of find/count/startswith).
Expected<std::string> sub_range(const std::string& s, const Args& p, size_t i) {
    if (!p[i] && !p[i + 1]) return s;
    EMBER_ASSIGN(Value v, slice(Value::string(s), p[i] ? *p[i] : Value(), p[i + 1] ? *p[i + 1] : Value(), Value()));
    return v.as_string();
}

Value list_of(std::vector<std::string> parts) {
    ValueList out;
    for (std::string& x : parts) out.push_back(Value::string(std::move(x)));
    return Value::list(std::move(out));
}

std::vector<std::string> split_ws(const std::string& s, int64_t maxsplit, bool from_right) {
    std::u32string u = utf8_decode(s);
    std::vector<std::string> out;
    if (!from_right) {
        size_t i = 0;
        while (true) {
            while (i < u.size() && py_isspace(u[i])) ++i;
            if (i >= u.size()) break;
            if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
                out.push_back(utf8_encode(std::u32string_view(u).substr(i)));
                break;
            }
            size_t j = i;
            while (j < u.size() && !py_isspace(u[j])) ++j;
            out.push_back(utf8_encode(std::u32string_view(u).substr(i, j - i)));
            i = j;
        }
        return out;
    }
    size_t e = u.size();
    while (true) {
        while (e > 0 && py_isspace(u[e - 1])) --e;
        if (e == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
            out.push_back(utf8_encode(std::u32string_view(u).substr(0, e)));
            break;
        }
        size_t b = e;
        while (b > 0 && !py_isspace(u[b - 1])) --b;
        out.push_back(utf8_encode(std::u32string_view(u).substr(b, e - b)));
        e = b;
    }
    std::reverse(out.begin(), out.end());
    return out;
}

std::vector<std::string> split_sep(const std::string& s, const std::string& sep, int64_t maxsplit, bool from_right) {
    std::vector<std::string> out;
    if (!from_right) {
        size_t pos = 0;
        while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
            size_t hit = s.find(sep, pos);
            if (hit == std::string::npos) break;
            out.push_back(s.substr(pos, hit - pos));
            pos = hit + sep.size();
        }
        out.push_back(s.substr(pos));
        return out;
    }
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
        if (end < sep.size()) break;
        size_t hit = s.rfind(sep, end - sep.size());
        if (hit == std::string::npos) break;
        out.push_back(s.substr(hit + sep.size(), end - hit - sep.size()));
        end = hit;
    }
    out.push_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
}

// str.format: {} {0} {name} with .attr / [key] accessors and !r/!s conversions; no format specs.
Expected<std::string> str_format(Renderer&, const std::string& fmt, CallArgs& a) {
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        char c = fmt[i];
        if (c == '}') {
            if (i + 1 < fmt.size() && fmt[i + 1] == '}') { out += '}'; ++i; continue; }
            return errorf("Single '}' encountered in format string");
        }
        if (c != '{') { out += c; continue; }
        if (i + 1 < fmt.size() && fmt[i + 1] == '{') { out += '{'; ++i; continue; }
        size_t close = fmt.find('}', i);
        if (close == std::string::npos) return errorf("Single '{' encountered in format string");
        std::string field = fmt.substr(i + 1, close - i - 1);
        i = close;
        char conv = 0;
        size_t colon = field.find(':');
        if (colon != std::string::npos) {
            if (colon + 1 != field.size()) return errorf("str.format: format specs are not supported");
            field.resize(colon);
        }
        size_t bang = field.find('!');
        if (bang != std::string::npos) {
            if (bang + 2 != field.size()) return errorf("str.format: bad conversion");
            conv = field[bang + 1];
            field.resize(bang);
        }
        size_t name_end = field.find_first_of(".[");
        std::string head = field.substr(0, name_end);
        Value v;
        if (head.empty()) {
            if (auto_index >= a.pos.size()) return errorf("Replacement index %zu out of range", auto_index);
            v = a.pos[auto_index++];
        } else if (std::all_of(head.begin(), head.end(), [](char d) { return d >= '0' && d <= '9'; })) {
            size_t k = std::stoul(head);
            if (k >= a.pos.size()) return errorf("Replacement index %zu out of range", k);
            v = a.pos[k];
        } else {
            bool found = false;
            for (const auto& [k, x] : a.kw)
                if (k == head) { v = x; found = true; }
            if (!found) return errorf("KeyError: '%s'", head.c_str());
        }
        for (size_t p = name_end; p != std::string::npos && p < field.size();) {
            if (field[p] == '.') {
                size_t q = field.find_first_of(".[", p + 1);
                EMBER_ASSIGN(v, get_attr(v, field.substr(p + 1, q == std::string::npos ? std::string::npos : q - p - 1)));
                p = q;
            } else {
                size_t q = field.find(']', p);
                if (q == std::string::npos) return errorf("Missing ']' in format string");
                std::string key = field.substr(p + 1, q - p - 1);
                bool digits = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
                EMBER_ASSIGN(v, get_item(v, digits ? Value::integer(std::stoll(key)) : Value::string(key)));
                p = q + 1;
            }
        }
        out += conv == 'r' || conv == 'a' ? v.repr() : v.str();
    }
    return out;
}

bool all_cp(const std::string& s, bool (*pred)(char32_t)) {
    if (s.empty()) return false;
    for (char32_t c : utf8_decode(s))
        if (!pred(c)) return false;
    return true;
}

Expected<Value> str_method(Renderer& r, const Value& self, const std::string& name, CallArgs& a) {
    const std::string& s = self.as_string();
    if (name == "upper") return Value::string(py_upper(s));
    if (name == "lower") return Value::string(py_lower(s));
    if (name == "title") return Value::string(py_title(s));
    if (name == "capitalize") return Value::string(py_capitalize(s));
    if (name == "swapcase") return Value::string(py_swapcase(s));
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        EMBER_ASSIGN(Args p, bind_args(a, {"chars"}, name.c_str()));
        bool l = name != "rstrip", rr = name != "lstrip";
        if (p[0] && !p[0]->is_none()) {
            std::u32string chars = utf8_decode(p[0]->str());
            return Value::string(py_strip(s, &chars, l, rr));
        }
        return Value::string(py_strip(s, nullptr, l, rr));
    }
    if (name == "split" || name == "rsplit") {
        EMBER_ASSIGN(Args p, bind_args(a, {"sep", "maxsplit"}, name.c_str()));
        int64_t maxsplit = p[1] && p[1]->is_integral() ? p[1]->as_int() : -1;
        if (!p[0] || p[0]->is_none()) return list_of(split_ws(s, maxsplit, name == "rsplit"));
        EMBER_ASSIGN(std::string sep, str_arg(p, 0, "separator"));
        if (sep.empty()) return errorf("empty separator");
        return list_of(split_sep(s, sep, maxsplit, name == "rsplit"));
    }
    if (name == "splitlines") {
        EMBER_ASSIGN(Args p, bind_args(a, {"keepends"}, "splitlines"));
        return list_of(py_splitlines(s, p[0] && p[0]->truthy()));
    }
    if (name == "startswith" || name == "endswith") {
        EMBER_ASSIGN(Args p, bind_args(a, {"prefix", "start", "end"}, name.c_str()));
        if (!p[0]) return errorf("%s() takes at least 1 argument", name.c_str());
        EMBER_ASSIGN(std::string hay, sub_range(s, p, 1));
        ValueList options = p[0]->is_tuple() ? p[0]->as_list() : ValueList{*p[0]};
        for (const Value& o : options) {
            if (!o.is_string()) return errorf("%s first arg must be str or a tuple of str", name.c_str());
            const std::string& x = o.as_string();
            bool hit = x.size() <= hay.size() &&
                       (name == "startswith" ? hay.compare(0, x.size(), x) == 0
                                             : hay.compare(hay.size() - x.size(), x.size(), x) == 0);
            if (hit) return Value::boolean(true);
        }
        return Value::boolean(false);
    }
    if (name == "replace") {
        EMBER_ASSIGN(Args p, bind_args(a, {"old", "new", "count"}, "replace"));
        EMBER_ASSIGN(std::string old, str_arg(p, 0, "replace() old"));
        EMBER_ASSIGN(std::string repl, str_arg(p, 1, "replace() new"));
        long long count = p[2] && p[2]->is_integral() ? p[2]->as_int() : -1;
        std::string out = py_replace(s, old, repl, count);
        EMBER_TRY(r.produced(out.size()));
        return Value::string(std::move(out));
    }
    if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
        EMBER_ASSIGN(Args p, bind_args(a, {"sub", "start", "end"}, name.c_str()));
        EMBER_ASSIGN(std::string sub, str_arg(p, 0, "substring"));
        EMBER_ASSIGN(std::string hay, sub_range(s, p, 1));
        int64_t offset = 0;
        if (p[1] && p[1]->is_integral()) {
            int64_t n = static_cast<int64_t>(utf8_length(s)), st = p[1]->as_int();
            offset = st < 0 ? std::max<int64_t>(0, st + n) : std::min(st, n);
        }
        if (name == "count") {
            if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(hay)) + 1);
            int64_t n = 0;
            for (size_t i = hay.find(sub); i != std::string::npos; i = hay.find(sub, i + sub.size())) ++n;
            return Value::integer(n);
        }
        size_t hit = name[0] == 'r' ? hay.rfind(sub) : hay.find(sub);
        if (hit == std::string::npos) {
            if (name == "index" || name == "rindex") return errorf("substring not found");
            return Value::integer(-1);
        }
        return Value::integer(offset + static_cast<int64_t>(cp_index(hay, hit)));
    }
    if (name == "join") {
        EMBER_ASSIGN(Args p, bind_args(a, {"iterable"}, "join"));
        if (!p[0]) return errorf("join() takes exactly one argument");
        EMBER_ASSIGN(ValueList items, iterate(*p[0]));
        std::string out;
        for (size_t i = 0; i < items.size(); ++i) {
            if (!items[i].is_string())
                return errorf("sequence item %zu: expected str instance, %s found", i, items[i].type_name());
            if (i) out += s;
            out += items[i].as_string();
            EMBER_TRY(r.check_size(out.size()));
        }
        EMBER_TRY(r.produced(out.size()));
        return Value::string(std::move(out));
    }
    if (name == "format") {
        EMBER_ASSIGN(std::string out, str_format(r, s, a));
        return Value::string(std::move(out));
    }
    if (name == "isdigit") return Value::boolean(all_cp(s, py_is_digit));
    if (name == "isdecimal") return Value::boolean(all_cp(s, py_is_decimal));
    if (name == "isnumeric") return Value::boolean(all_cp(s, py_is_numeric));
    if (name == "isalpha") return Value::boolean(all_cp(s, py_is_alpha));
    if (name == "isalnum")
        return Value::boolean(all_cp(s, [](char32_t c) { return py_is_alpha(c) || py_is_numeric(c) || py_is_digit(c); }));
    if (name == "isspace") return Value::boolean(all_cp(s, py_isspace));
    if (name == "islower") return Value::boolean(py_str_islower(s));
    if (name == "isupper") return Value::boolean(py_str_isupper(s));
    if (name == "removeprefix" || name == "removesuffix") {
        EMBER_ASSIGN(Args p, bind_args(a, {"affix"}, name.c_str()));
        EMBER_ASSIGN(std::string x, str_arg(p, 0, "argument"));
        if (name == "removeprefix" && s.compare(0, x.size(), x) == 0) return Value::string(s.substr(x.size()));
        bool has_suffix = !x.empty() && x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
        if (name == "removesuffix" && has_suffix)
            return Value::string(s.substr(0, s.size() - x.size()));
        return Value::string(s);
    }
    if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
        EMBER_ASSIGN(Args p, bind_args(a, {"width", "fillchar"}, name.c_str()));
        if (!p[0] || !p[0]->is_integral()) return errorf("%s() needs an integer width", name.c_str());
        int64_t width = p[0]->as_int(), n = static_cast<int64_t>(utf8_length(s));
        std::string fill = name == "zfill" ? "0" : p[1] ? p[1]->str() : " ";
        if (width <= n) return Value::string(s);
        EMBER_TRY(r.produced(static_cast<size_t>(width) * fill.size()));
        int64_t marg = width - n;
        int64_t left = name == "ljust" ? 0 : name == "center" ? marg / 2 + (marg & width & 1) : marg;
        auto pad = [&](int64_t k) { std::string o; for (int64_t i = 0; i < k; ++i) o += fill; return o; };
        if (name == "zfill" && !s.empty() && (s[0] == '-' || s[0] == '+'))
            return Value::string(s.substr(0, 1) + pad(marg) + s.substr(1));
        return Value::string(pad(left) + s + pad(marg - left));
    }
    if (name == "partition" || name == "rpartition") {
        EMBER_ASSIGN(Args p, bind_args(a, {"sep"}, name.c_str()));
        EMBER_ASSIGN(std::string sep, str_arg(p, 0, "separator"));
        if (sep.empty()) return errorf("empty separator");
        size_t hit = name == "partition" ? s.find(sep) : s.rfind(sep);
        if (hit == std::string::npos)
            return name == "partition" ? Value::tuple({Value::string(s), Value::string(""), Value::string("")})
                                       : Value::tuple({Value::string(""), Value::string(""), Value::string(s)});
        return Value::tuple(
            {Value::string(s.substr(0, hit)), Value::string(sep), Value::string(s.substr(hit + sep.size()))});
    }
    return errorf("str has no method '%s'", name.c_str());
}

Expected<Value> dict_method(Renderer&, const Value& self, const std::string& name, CallArgs& a) {
    const Dict& d = self.as_dict();
    if (name == "get") {
        EMBER_ASSIGN(Args p, bind_args(a, {"key", "default"}, "get"));
        if (!p[0]) return errorf("get expected at least 1 argument, got 0");
        if (p[0]->is_list() || p[0]->is_dict()) return errorf("unhashable type: '%s'", p[0]->type_name());
        if (const Value* v = d.find(*p[0])) return *v;
        return p[1] ? *p[1] : Value::none();
    }
    EMBER_TRY(bind_args(a, {}, name.c_str()).status());
    if (name == "copy") return self;
    ValueList out;
    for (const auto& [k, v] : d.items()) {
        if (name == "keys") out.push_back(k);
        else if (name == "values") out.push_back(v);
        else out.push_back(Value::tuple({k, v}));
    }
    return Value::list(std::move(out));
}

Expected<Value> list_method(Renderer&, const Value& self, const std::string& name, CallArgs& a) {
    const ValueList& items = self.as_list();
    if (name == "copy") return Value::list(items);
    EMBER_ASSIGN(Args p, bind_args(a, {"value"}, name.c_str()));
    if (!p[0]) return errorf("%s() takes exactly one argument", name.c_str());
    int64_t n = 0;
    for (size_t i = 0; i < items.size(); ++i) {
        if (!py_equal(items[i], *p[0])) continue;
        if (name == "index") return Value::integer(static_cast<int64_t>(i));
        ++n;
    }
    if (name == "index") return errorf("%s is not in list", p[0]->repr().c_str());
    return Value::integer(n);
}

Expected<Value> unsafe_method(Renderer&, const Value& self, const std::string& name, CallArgs&) {
    return errorf("access to attribute '%s' of '%s' object is unsafe.", name.c_str(), self.type_name());
}

Method method_for(const Value& obj, const std::string& name) {
    static const std::unordered_set<std::string> str_names = {
        "upper", "lower", "title", "capitalize", "swapcase", "strip", "lstrip", "rstrip", "split", "rsplit",
        "splitlines", "startswith", "endswith", "replace", "find", "rfind", "index", "rindex", "count", "join",
        "format", "isdigit", "isdecimal", "isnumeric", "isalpha", "isalnum", "isspace", "islower", "isupper",
        "removeprefix", "removesuffix", "center", "ljust", "rjust", "zfill", "partition", "rpartition"};
    static const std::unordered_set<std::string> dict_names = {"get", "keys", "values", "items", "copy"};
    static const std::unordered_set<std::string> dict_unsafe = {"pop", "popitem", "setdefault", "update", "clear"};
    static const std::unordered_set<std::string> list_names = {"index", "count", "copy"};
    static const std::unordered_set<std::string> list_unsafe = {"append", "extend", "insert", "pop",
                                                                "remove", "reverse", "sort", "clear"};
    if (obj.is_string() && str_names.count(name)) return str_method;
    if (obj.is_dict()) {
        if (dict_names.count(name)) return dict_method;
        if (dict_unsafe.count(name)) return unsafe_method;
    }
    if (obj.is_sequence()) {
        if (list_names.count(name)) return list_method;
        if (obj.is_list() && list_unsafe.count(name)) return unsafe_method;
    }
    return nullptr;
}

}  // namespace

Value bind_method(const Value& obj, const std::string& name) {
    Method m = method_for(obj, name);
    if (!m) return Value();
    return Value::callable(Callable{name, [m, obj, name](Renderer& r, CallArgs& a) -> Expected<Value> {
                                        EMBER_TRY(r.charge(obj));  // the receiver is scanned / copied
                                        return m(r, obj, name, a);
                                    }});
}

}  // namespace ember::jinja
