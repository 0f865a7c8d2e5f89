// builtins.cpp: argument binding, the `is` tests, and the global functions (see builtins.h).
#include "template/builtins.h"

#include <cstring>
#include <ctime>
#include <unordered_map>

#include "template/eval.h"
#include "template/ops.h"
#include "template/py_text.h"

namespace ember::jinja {

Expected<std::vector<std::optional<Value>>> bind_args(const CallArgs& a, std::initializer_list<const char*> names,
                                                      const char* fn) {
    std::vector<const char*> n(names);
    std::vector<std::optional<Value>> out(n.size());
    if (a.pos.size() > n.size()) return errorf("%s() takes at most %zu argument(s)", fn, n.size());
    for (size_t i = 0; i < a.pos.size(); ++i) out[i] = a.pos[i];
    for (const auto& [k, v] : a.kw) {
        size_t i = 0;
        while (i < n.size() && k != n[i]) ++i;
        if (i == n.size()) return errorf("%s() got an unexpected keyword argument '%s'", fn, k.c_str());
        if (out[i]) return errorf("%s() got multiple values for argument '%s'", fn, k.c_str());
        out[i] = v;
    }
    return out;
}

namespace {

// ---- tests ----

Expected<Value> one_arg(CallArgs& a, const char* test) {
    EMBER_ASSIGN(auto args, bind_args(a, {"other"}, test));
    if (!args[0]) return errorf("test '%s' needs an argument", test);
    return *args[0];
}

Expected<bool> cmp_test(const char* op, const Value& v, CallArgs& a, const char* name) {
    EMBER_ASSIGN(Value other, one_arg(a, name));
    return compare(op, v, other);
}

#define SIMPLE_TEST(fname, expr) \
    Expected<bool> fname(Renderer&, const Value& v, CallArgs&) { return (expr); }

SIMPLE_TEST(t_defined, !v.is_undefined())
SIMPLE_TEST(t_undefined, v.is_undefined())
SIMPLE_TEST(t_none, v.is_none())
SIMPLE_TEST(t_boolean, v.is_bool())
SIMPLE_TEST(t_false, v.is_bool() && !v.as_bool())
SIMPLE_TEST(t_true, v.is_bool() && v.as_bool())
SIMPLE_TEST(t_integer, v.is_int())
SIMPLE_TEST(t_float, v.is_float())
SIMPLE_TEST(t_number, v.is_number())
SIMPLE_TEST(t_string, v.is_string())
SIMPLE_TEST(t_mapping, v.is_dict())
SIMPLE_TEST(t_iterable, v.is_sequence() || v.is_dict() || v.is_string() || v.is_undefined() || v.is_generator())
SIMPLE_TEST(t_sequence, v.is_sequence() || v.is_dict() || v.is_string() || v.is_undefined())
SIMPLE_TEST(t_callable, v.is_callable() || v.is_undefined())
SIMPLE_TEST(t_escaped, v.is_markup())

Expected<bool> t_lower(Renderer&, const Value& v, CallArgs&) { return py_str_islower(v.str()); }
Expected<bool> t_upper(Renderer&, const Value& v, CallArgs&) { return py_str_isupper(v.str()); }

Expected<bool> mod_is_zero(const Value& v, const Value& d) {
    EMBER_ASSIGN(Value r, binary_op("%", v, d, 1 << 20));
    if (!r.is_number()) return errorf("'%%' did not give a number");
    return r.as_float() == 0.0;
}
Expected<bool> t_even(Renderer&, const Value& v, CallArgs&) { return mod_is_zero(v, Value::integer(2)); }
Expected<bool> t_odd(Renderer&, const Value& v, CallArgs&) {
    EMBER_ASSIGN(bool even, mod_is_zero(v, Value::integer(2)));
    return !even;
}
Expected<bool> t_divisibleby(Renderer&, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Value d, one_arg(a, "divisibleby"));
    return mod_is_zero(v, d);
}
Expected<bool> t_eq(Renderer&, const Value& v, CallArgs& a) { return cmp_test("==", v, a, "eq"); }
Expected<bool> t_ne(Renderer&, const Value& v, CallArgs& a) { return cmp_test("!=", v, a, "ne"); }
Expected<bool> t_lt(Renderer&, const Value& v, CallArgs& a) { return cmp_test("<", v, a, "lt"); }
Expected<bool> t_le(Renderer&, const Value& v, CallArgs& a) { return cmp_test("<=", v, a, "le"); }
Expected<bool> t_gt(Renderer&, const Value& v, CallArgs& a) { return cmp_test(">", v, a, "gt"); }
Expected<bool> t_ge(Renderer&, const Value& v, CallArgs& a) { return cmp_test(">=", v, a, "ge"); }
Expected<bool> t_in(Renderer&, const Value& v, CallArgs& a) { return cmp_test("in", v, a, "in"); }
Expected<bool> t_sameas(Renderer&, const Value& v, CallArgs& a) {
    EMBER_ASSIGN(Value o, one_arg(a, "sameas"));
    if (v.kind() != o.kind()) return false;
    switch (v.kind()) {
        case Kind::NONE: case Kind::UNDEFINED: return true;
        case Kind::BOOL: case Kind::INT: case Kind::FLOAT: case Kind::STRING: return py_equal(v, o);
        case Kind::LIST: case Kind::TUPLE: return &v.as_list() == &o.as_list();
        case Kind::DICT: case Kind::NAMESPACE: return &v.as_dict() == &o.as_dict();
        case Kind::CALLABLE: return &v.as_callable() == &o.as_callable();
        case Kind::GENERATOR: return v.p_ptr() == o.p_ptr();
    }
    return false;
}

// ---- globals ----

Expected<Value> g_range(Renderer&, CallArgs& a) {
    if (!a.kw.empty()) return errorf("range() takes no keyword arguments");
    if (a.pos.empty() || a.pos.size() > 3) return errorf("range expected 1 to 3 arguments, got %zu", a.pos.size());
    for (const Value& v : a.pos)
        if (!v.is_integral()) return errorf("'%s' object cannot be interpreted as an integer", v.type_name());
    int64_t start = 0, stop, step = 1;
    if (a.pos.size() == 1) {
        stop = a.pos[0].as_int();
    } else {
        start = a.pos[0].as_int();
        stop = a.pos[1].as_int();
        if (a.pos.size() == 3) step = a.pos[2].as_int();
    }
    if (step == 0) return errorf("range() arg 3 must not be zero");
    long double n = step > 0 ? (static_cast<long double>(stop) - start + step - 1) / step
                             : (static_cast<long double>(start) - stop - step - 1) / -step;
    if (n > 100000) return errorf("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    // start + k·step for k < n: `i += step` past the last item overflowed int64 (range(2**63 - 2, 2**63 - 1, 2)).
    ValueList out;
    const int64_t count = n > 0 ? static_cast<int64_t>(n) : 0;
    out.reserve(static_cast<size_t>(count));
    for (int64_t k = 0; k < count; ++k)  // in uint64 (wraps, the sum is in range): k·step alone may not fit
        out.push_back(Value::integer(static_cast<int64_t>(uint64_t(start) + uint64_t(k) * uint64_t(step))));
    return Value::list(std::move(out));
}

Expected<Dict> dict_from_args(CallArgs& a, const char* fn) {
    Dict d;
    if (a.pos.size() > 1) return errorf("%s expected at most 1 positional argument", fn);
    if (a.pos.size() == 1) {
        const Value& src = a.pos[0];
        if (src.is_dict()) {
            for (const auto& [k, v] : src.as_dict().items()) d.set(k, v);
        } else {
            EMBER_ASSIGN(ValueList pairs, iterate(src));
            for (const Value& p : pairs) {
                EMBER_ASSIGN(ValueList kv, iterate(p));
                if (kv.size() != 2) return errorf("%s: sequence elements must be pairs", fn);
                d.set(kv[0], kv[1]);
            }
        }
    }
    for (const auto& [k, v] : a.kw) d.set(Value::string(k), v);
    if (d.depth() > kMaxNesting) return errorf("value nested deeper than %d levels", kMaxNesting);
    return d;
}

Expected<Value> g_dict(Renderer&, CallArgs& a) {
    EMBER_ASSIGN(Dict d, dict_from_args(a, "dict"));
    return Value::dict(std::move(d));
}

Expected<Value> g_namespace(Renderer& r, CallArgs& a) {
    EMBER_ASSIGN(Dict d, dict_from_args(a, "namespace"));
    for (const auto& [k, v] : d.items())
        if (k.is_string() && !k.as_string().empty() && k.as_string()[0] == '_')
            return errorf("chat templates cannot store underscore-prefixed attributes on a namespace, but got %s",
                          k.repr().c_str());
    Value ns = Value::ns(std::move(d));
    r.track_namespace(ns);
    return ns;
}

Expected<Value> g_raise_exception(Renderer&, CallArgs& a) {
    EMBER_ASSIGN(auto args, bind_args(a, {"message"}, "raise_exception"));
    return Status::error(args[0] ? args[0]->str() : std::string("raise_exception() called"));
}

Expected<Value> g_strftime_now(Renderer& r, CallArgs& a) {
    EMBER_ASSIGN(auto args, bind_args(a, {"format"}, "strftime_now"));
    if (!args[0] || !args[0]->is_string()) return errorf("strftime_now() needs a format string");
    // datetime.now() is naive: %z and %Z are empty, %f is the microseconds (whole seconds here).
    std::string fmt;
    const std::string& f = args[0]->as_string();
    for (size_t i = 0; i < f.size(); ++i) {
        if (f[i] == '%' && i + 1 < f.size()) {
            char c = f[i + 1];
            if (c == 'z' || c == 'Z') { ++i; continue; }
            if (c == 'f') { fmt += "000000"; ++i; continue; }
            fmt += f[i];
            fmt += f[++i];
            continue;
        }
        fmt += f[i];
    }
    if (fmt.empty()) return Value::string("");
    std::string buf(fmt.size() * 8 + 64, '\0');
    size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &r.now());
    buf.resize(n);
    return Value::string(std::move(buf));
}

}  // namespace

TestFn find_test(const std::string& name) {
    static const std::unordered_map<std::string, TestFn> tests = {
        {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"boolean", t_boolean},
        {"false", t_false}, {"true", t_true}, {"integer", t_integer}, {"float", t_float}, {"number", t_number},
        {"string", t_string}, {"mapping", t_mapping}, {"iterable", t_iterable}, {"sequence", t_sequence},
        {"callable", t_callable}, {"escaped", t_escaped}, {"lower", t_lower}, {"upper", t_upper},
        {"even", t_even}, {"odd", t_odd}, {"divisibleby", t_divisibleby}, {"eq", t_eq}, {"equalto", t_eq},
        {"==", t_eq}, {"ne", t_ne}, {"!=", t_ne}, {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt}, {"le", t_le},
        {"<=", t_le}, {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt}, {"ge", t_ge}, {">=", t_ge},
        {"in", t_in}, {"sameas", t_sameas},
    };
    auto it = tests.find(name);
    return it == tests.end() ? nullptr : it->second;
}

Value find_global(const std::string& name) {
    static const std::unordered_map<std::string, NativeFn> globals = {
        {"range", g_range}, {"dict", g_dict}, {"namespace", g_namespace},
        {"raise_exception", g_raise_exception}, {"strftime_now", g_strftime_now},
    };
    auto it = globals.find(name);
    if (it == globals.end()) return Value();
    return Value::callable(Callable{name, it->second});
}

}  // namespace ember::jinja
