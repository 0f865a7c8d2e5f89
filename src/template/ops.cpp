// ops.cpp: Python operators, comparisons, iteration and element access (see ops.h).
#include "template/ops.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>

#include "template/py_text.h"

namespace ember::jinja {

namespace {

Status type_error(const char* op, const Value& a, const Value& b) {
    return errorf("unsupported operand type(s) for %s: '%s' and '%s'", op, a.type_name(), b.type_name());
}
Status overflow() { return errorf("integer overflow (templates compute with 64-bit integers)"); }

Expected<Value> repeat(const Value& seq, int64_t n, size_t max_size) {
    if (n < 0) n = 0;
    if (seq.is_string()) {
        const std::string& s = seq.as_string();
        if (n > 0 && s.size() > max_size / static_cast<size_t>(n)) return errorf("string repetition too large");
        // Doubling, not n appends: "x" * 16000000 was 16M one-byte appends.
        const size_t total = s.size() * static_cast<size_t>(n);
        std::string out;
        out.reserve(total);
        if (total) out = s;
        while (out.size() < total) out.append(out, 0, std::min(out.size(), total - out.size()));
        return Value::string(std::move(out), seq.is_markup());
    }
    const ValueList& items = seq.as_list();
    if (n > 0 && items.size() > max_size / 16 / static_cast<size_t>(n)) return errorf("list repetition too large");
    ValueList out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
    return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

// Python float divmod (Objects/floatobject.c).
void float_divmod(double a, double b, double& div, double& mod) {
    mod = std::fmod(a, b);
    div = (a - mod) / b;
    if (mod != 0.0) {
        if ((b < 0) != (mod < 0)) {
            mod += b;
            div -= 1.0;
        }
    } else {
        mod = std::copysign(0.0, b);
    }
    if (div != 0.0) {
        double fl = std::floor(div);
        if (div - fl > 0.5) fl += 1.0;
        div = fl;
    } else {
        div = std::copysign(0.0, a / b);
    }
}

Expected<Value> int_pow(int64_t base, int64_t exp) {
    if (exp < 0) {
        if (base == 0) return errorf("0.0 cannot be raised to a negative power");
        return Value::real(std::pow(static_cast<double>(base), static_cast<double>(exp)));
    }
    int64_t result = 1;
    while (exp > 0) {
        if (exp & 1)
            if (__builtin_mul_overflow(result, base, &result)) return overflow();
        exp >>= 1;
        if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return overflow();
    }
    return Value::integer(result);
}

Expected<Value> arith(const std::string& op, const Value& a, const Value& b) {
    bool ints = a.is_integral() && b.is_integral();
    if (ints) {
        int64_t x = a.as_int(), y = b.as_int(), r = 0;
        if (op == "+") { if (__builtin_add_overflow(x, y, &r)) return overflow(); return Value::integer(r); }
        if (op == "-") { if (__builtin_sub_overflow(x, y, &r)) return overflow(); return Value::integer(r); }
        if (op == "*") { if (__builtin_mul_overflow(x, y, &r)) return overflow(); return Value::integer(r); }
        if (op == "**") return int_pow(x, y);
        if (op == "/") {
            if (y == 0) return errorf("division by zero");
            return Value::real(static_cast<double>(x) / static_cast<double>(y));
        }
        if (y == 0) return errorf(op == "//" ? "integer division or modulo by zero" : "integer modulo by zero");
        if (x == INT64_MIN && y == -1) return overflow();
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
            q -= 1;
            m += y;
        }
        return Value::integer(op == "//" ? q : m);
    }
    double x = a.as_float(), y = b.as_float();
    if (op == "+") return Value::real(x + y);
    if (op == "-") return Value::real(x - y);
    if (op == "*") return Value::real(x * y);
    if (op == "**") {
        if (x == 0.0 && y < 0) return errorf("0.0 cannot be raised to a negative power");
        return Value::real(std::pow(x, y));
    }
    if (y == 0.0) return errorf(op == "/" ? "float division by zero" : op == "//" ? "float floor division by zero"
                                                                                   : "float modulo");
    if (op == "/") return Value::real(x / y);
    double div, mod;
    float_divmod(x, y, div, mod);
    return Value::real(op == "//" ? div : mod);
}

int cmp_order(const std::string& op) {  // not used for == / !=
    return op == "<" ? 0 : op == "<=" ? 1 : op == ">" ? 2 : 3;
}

// Three-way ordering (-1/0/1) for orderable pairs.
Expected<int> order(const Value& a, const Value& b, const std::string& op) {
    if (a.is_number() && b.is_number()) {
        if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
        double x = a.as_float(), y = b.as_float();
        if (std::isnan(x) || std::isnan(y)) return 2;  // every ordering with NaN is false
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.is_string() && b.is_string()) {
        int c = a.as_string().compare(b.as_string());  // UTF-8 byte order == code point order
        return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
        const ValueList &x = a.as_list(), &y = b.as_list();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (py_equal(x[i], y[i])) continue;
            return order(x[i], y[i], op);
        }
        return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    }
    if (a.is_undefined()) return undefined_error(a);
    if (b.is_undefined()) return undefined_error(b);
    return errorf("'%s' not supported between instances of '%s' and '%s'", op.c_str(), a.type_name(), b.type_name());
}

}  // namespace

Status undefined_error(const Value& v) {
    const std::string& hint = v.as_string();
    return errorf("%s", hint.empty() ? "value is undefined" : hint.c_str());
}

std::string object_type_repr(const Value& v) {
    if (v.is_none()) return "None";
    return std::string(v.type_name()) + " object";
}

std::string html_escape(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '\'': out += "&#39;"; break;
            case '"': out += "&#34;"; break;
            default: out += c;
        }
    }
    return out;
}

Expected<Value> binary_op(const std::string& op, const Value& a, const Value& b, size_t max_size) {
    if (a.is_undefined()) return undefined_error(a);
    if (b.is_undefined()) return undefined_error(b);
    if (a.is_number() && b.is_number()) return arith(op, a, b);
    if (op == "+") {
        if (a.is_string() && b.is_string()) {
            if (a.as_string().size() + b.as_string().size() > max_size) return errorf("string too large");
            if (a.is_markup() || b.is_markup()) {  // Markup.__add__/__radd__ escape the plain side
                std::string x = a.is_markup() ? a.as_string() : html_escape(a.as_string());
                std::string y = b.is_markup() ? b.as_string() : html_escape(b.as_string());
                return Value::string(x + y, true);
            }
            return Value::string(a.as_string() + b.as_string());
        }
        if ((a.is_list() && b.is_list()) || (a.is_tuple() && b.is_tuple())) {
            ValueList out = a.as_list();
            out.insert(out.end(), b.as_list().begin(), b.as_list().end());
            return a.is_list() ? Value::list(std::move(out)) : Value::tuple(std::move(out));
        }
        if (a.is_string() || a.is_sequence())
            return errorf("can only concatenate %s (not \"%s\") to %s", a.type_name(), b.type_name(), a.type_name());
        return type_error("+", a, b);
    }
    if (op == "*") {
        if ((a.is_string() || a.is_sequence()) && b.is_integral()) return repeat(a, b.as_int(), max_size);
        if ((b.is_string() || b.is_sequence()) && a.is_integral()) return repeat(b, a.as_int(), max_size);
        if (a.is_string() || a.is_sequence() || b.is_string() || b.is_sequence())
            return errorf("can't multiply sequence by non-int of type '%s'",
                          (a.is_string() || a.is_sequence()) ? b.type_name() : a.type_name());
        return type_error("*", a, b);
    }
    if (op == "%" && a.is_string()) {
        EMBER_ASSIGN(std::string s, percent_format(a.as_string(), b));
        return Value::string(std::move(s), a.is_markup());
    }
    return type_error(op.c_str(), a, b);
}

Expected<Value> unary_minus(const Value& a) {
    if (a.is_undefined()) return undefined_error(a);
    if (a.is_float()) return Value::real(-a.as_float());
    if (a.is_integral()) {
        if (a.as_int() == INT64_MIN) return overflow();
        return Value::integer(-a.as_int());
    }
    return errorf("bad operand type for unary -: '%s'", a.type_name());
}

Expected<bool> compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return py_equal(a, b);
    if (op == "!=") return !py_equal(a, b);
    if (op == "in") return contains(b, a);
    if (op == "notin") {
        EMBER_ASSIGN(bool in, contains(b, a));
        return !in;
    }
    EMBER_ASSIGN(int c, order(a, b, op));
    if (c == 2) return false;  // NaN
    switch (cmp_order(op)) {
        case 0: return c < 0;
        case 1: return c <= 0;
        case 2: return c > 0;
        default: return c >= 0;
    }
}

Expected<bool> contains(const Value& container, const Value& item) {
    switch (container.kind()) {
        case Kind::UNDEFINED: return false;
        case Kind::STRING:
            if (!item.is_string())
                return errorf("'in <string>' requires string as left operand, not %s", item.type_name());
            return container.as_string().find(item.as_string()) != std::string::npos;
        case Kind::LIST: case Kind::TUPLE:
            for (const Value& v : container.as_list())
                if (py_equal(v, item)) return true;
            return false;
        case Kind::DICT:
            if (item.is_list() || item.is_dict()) return errorf("unhashable type: '%s'", item.type_name());
            return container.as_dict().find(item) != nullptr;
        case Kind::GENERATOR:  // consumed up to the match, like Python's `in`
            while (const Value* v = container.take_one())
                if (py_equal(*v, item)) return true;
            return false;
        default: return errorf("argument of type '%s' is not iterable", container.type_name());
    }
}

Expected<ValueList> iterate(const Value& v) {
    switch (v.kind()) {
        case Kind::UNDEFINED: return ValueList{};
        case Kind::LIST: case Kind::TUPLE: return v.as_list();
        case Kind::GENERATOR: return v.take_all();
        case Kind::DICT: {
            ValueList keys;
            for (const auto& kv : v.as_dict().items()) keys.push_back(kv.first);
            return keys;
        }
        case Kind::STRING: {
            ValueList chars;
            const std::string& s = v.as_string();
            for (char32_t c : utf8_decode(s)) {
                std::string one;
                utf8_append(one, c);
                chars.push_back(Value::string(std::move(one)));
            }
            return chars;
        }
        default: return errorf("'%s' object is not iterable", v.type_name());
    }
}

Expected<int64_t> length(const Value& v) {
    switch (v.kind()) {
        case Kind::UNDEFINED: return int64_t{0};
        case Kind::STRING: return static_cast<int64_t>(utf8_length(v.as_string()));
        case Kind::LIST: case Kind::TUPLE: return static_cast<int64_t>(v.as_list().size());
        case Kind::DICT: return static_cast<int64_t>(v.as_dict().size());
        default: return errorf("object of type '%s' has no len()", v.type_name());
    }
}

Expected<Value> get_attr(const Value& obj, const std::string& name) {
    if (obj.is_undefined()) return undefined_error(obj);
    Value m = bind_method(obj, name);
    if (!m.is_undefined()) return m;
    if (obj.is_dict() || obj.is_namespace()) {
        if (const Value* v = obj.as_dict().find(name)) return *v;
    }
    return Value::undefined(cat({"'", object_type_repr(obj), "' has no attribute ", py_str_repr(name)}));
}

Expected<Value> get_item(const Value& obj, const Value& key) {
    if (obj.is_undefined()) return undefined_error(obj);
    if (obj.is_dict() || obj.is_namespace()) {
        if (key.is_list() || key.is_dict()) return errorf("unhashable type: '%s'", key.type_name());
        if (const Value* v = obj.as_dict().find(key)) return *v;
    } else if ((obj.is_sequence() || obj.is_string()) && key.is_integral()) {
        int64_t i = key.as_int();
        if (obj.is_string()) {
            const std::string& s = obj.as_string();
            std::u32string u = is_ascii(s) ? std::u32string() : utf8_decode(s);
            int64_t n = is_ascii(s) ? static_cast<int64_t>(s.size()) : static_cast<int64_t>(u.size());
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                std::string one;
                utf8_append(one, is_ascii(s) ? static_cast<char32_t>(static_cast<unsigned char>(s[i])) : u[i]);
                return Value::string(std::move(one));
            }
        } else {
            const ValueList& items = obj.as_list();
            int64_t n = static_cast<int64_t>(items.size());
            if (i < 0) i += n;
            if (i >= 0 && i < n) return items[i];
        }
    }
    if (key.is_string()) return get_attr(obj, key.as_string());
    return Value::undefined(cat({"'", object_type_repr(obj), "' has no element ", key.repr()}));
}

Expected<Value> slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
    if (obj.is_undefined()) return undefined_error(obj);
    auto index = [](const Value& v, const char* what) -> Expected<std::optional<int64_t>> {
        if (v.is_undefined() || v.is_none()) return std::optional<int64_t>();
        if (!v.is_integral()) return errorf("slice %s must be an integer or None", what);
        return std::optional<int64_t>(v.as_int());
    };
    EMBER_ASSIGN(auto start_o, index(start_v, "start"));
    EMBER_ASSIGN(auto stop_o, index(stop_v, "stop"));
    EMBER_ASSIGN(auto step_o, index(step_v, "step"));
    int64_t step = step_o.value_or(1);
    if (step == 0) return errorf("slice step cannot be zero");
    if (!obj.is_string() && !obj.is_sequence())
        return Value::undefined(cat({"'", object_type_repr(obj), "' object is not subscriptable"}));
    std::u32string u;
    if (obj.is_string()) u = utf8_decode(obj.as_string());
    int64_t n = obj.is_string() ? static_cast<int64_t>(u.size()) : static_cast<int64_t>(obj.as_list().size());
    int64_t lower = step < 0 ? -1 : 0, upper = step < 0 ? n - 1 : n;
    auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
        if (!v) return dflt;
        int64_t x = *v;
        if (x < 0) {
            x += n;
            if (x < lower) x = lower;
        } else if (x > upper) {
            x = upper;
        }
        return x;
    };
    int64_t start = clamp(start_o, step < 0 ? upper : lower);
    int64_t stop = clamp(stop_o, step < 0 ? lower : upper);
    if (obj.is_string()) {
        std::u32string out;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out += u[i];
        return Value::string(utf8_encode(out));
    }
    const ValueList& items = obj.as_list();
    ValueList out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(items[i]);
    return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Expected<std::string> percent_format(const std::string& fmt, const Value& args) {
    ValueList list = args.is_tuple() ? args.as_list() : ValueList{args};
    size_t next = 0;
    std::string out;
    for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') { out += fmt[i]; continue; }
        if (++i >= fmt.size()) return errorf("incomplete format");
        Value arg;
        if (fmt[i] == '(') {  // %(key)s
            size_t e = fmt.find(')', i);
            if (e == std::string::npos || !args.is_dict()) return errorf("format requires a mapping");
            const Value* v = args.as_dict().find(fmt.substr(i + 1, e - i - 1));
            if (!v) return errorf("format key %s not found", fmt.substr(i + 1, e - i - 1).c_str());
            arg = *v;
            i = e + 1;
        }
        std::string spec = "%";
        while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos) spec += fmt[i++];
        while (i < fmt.size() && (std::isdigit(static_cast<unsigned char>(fmt[i])) || fmt[i] == '.')) spec += fmt[i++];
        if (i >= fmt.size()) return errorf("incomplete format");
        char conv = fmt[i];
        if (conv == '%') { out += '%'; continue; }
        if (arg.is_undefined() && !args.is_dict()) {
            if (next >= list.size()) return errorf("not enough arguments for format string");
            arg = list[next++];
        }
        char buf[512];
        switch (conv) {
            case 's': case 'r': case 'a': {
                std::string s = conv == 's' ? arg.str() : arg.repr();
                if (spec == "%") { out += s; break; }
                std::string f = spec + "s";
                int n = std::snprintf(nullptr, 0, f.c_str(), s.c_str());
                std::string tmp(n, '\0');
                std::snprintf(tmp.data(), n + 1, f.c_str(), s.c_str());
                out += tmp;
                break;
            }
            case 'd': case 'i': case 'u': case 'x': case 'X': case 'o': case 'c': {
                if (!arg.is_number())
                    return errorf("%%%c format: a real number is required, not %s", conv, arg.type_name());
                long long v = arg.is_float() ? static_cast<long long>(arg.as_float()) : arg.as_int();
                if (conv == 'c') { utf8_append(out, static_cast<char32_t>(v)); break; }
                std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' || conv == 'u' ? 'd' : conv)).c_str(), v);
                out += buf;
                break;
            }
            case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': {
                if (!arg.is_number()) return errorf("must be real number, not %s", arg.type_name());
                std::snprintf(buf, sizeof buf, (spec + conv).c_str(), arg.as_float());
                out += buf;
                break;
            }
            default: return errorf("unsupported format character '%c'", conv);
        }
    }
    if (!args.is_dict() && args.is_tuple() && next < list.size())
        return errorf("not all arguments converted during string formatting");
    if (!args.is_tuple() && !args.is_dict() && next == 0)
        return errorf("not all arguments converted during string formatting");
    return out;
}

}  // namespace ember::jinja
