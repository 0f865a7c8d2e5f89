// value.cpp: Value construction and its Python semantics (truth, str, repr, ==, hashing).
#include "template/value.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "template/py_text.h"

namespace ember::jinja {

namespace {

struct ListData {
    ValueList items;
    int depth = 1;
    mutable size_t pos = 0;  // generators: items before pos are consumed
};

int nesting_of(const ValueList& items) {
    int d = 0;
    for (const Value& v : items) d = std::max(d, v.depth());
    return d + 1;
}

// Guards the recursive printers against cycles through namespaces (a namespace may hold itself).
thread_local int g_repr_depth = 0;
struct ReprGuard {
    ReprGuard() { ++g_repr_depth; }
    ~ReprGuard() { --g_repr_depth; }
    bool too_deep() const { return g_repr_depth > kMaxNesting + 8; }
};

}  // namespace

Value Value::undefined(std::string hint) {
    Value v;
    if (!hint.empty()) v.p_ = std::make_shared<std::string>(std::move(hint));
    return v;
}
Value Value::none() { Value v; v.kind_ = Kind::NONE; return v; }
Value Value::boolean(bool b) { Value v; v.kind_ = Kind::BOOL; v.b_ = b; return v; }
Value Value::integer(int64_t i) { Value v; v.kind_ = Kind::INT; v.i_ = i; return v; }
Value Value::real(double f) { Value v; v.kind_ = Kind::FLOAT; v.f_ = f; return v; }
Value Value::string(std::string s, bool markup) {
    Value v;
    v.kind_ = Kind::STRING;
    v.b_ = markup;
    v.p_ = std::make_shared<std::string>(std::move(s));
    return v;
}
Value Value::list(ValueList items) {
    Value v;
    v.kind_ = Kind::LIST;
    int d = nesting_of(items);
    v.p_ = std::make_shared<ListData>(ListData{std::move(items), d});
    return v;
}
Value Value::tuple(ValueList items) {
    Value v = list(std::move(items));
    v.kind_ = Kind::TUPLE;
    return v;
}
Value Value::generator(ValueList items) {
    Value v = list(std::move(items));
    v.kind_ = Kind::GENERATOR;
    return v;
}
Value Value::dict(Dict d) {
    Value v;
    v.kind_ = Kind::DICT;
    v.p_ = std::make_shared<Dict>(std::move(d));
    return v;
}
Value Value::ns(Dict attrs) {
    Value v = dict(std::move(attrs));
    v.kind_ = Kind::NAMESPACE;
    return v;
}
Value Value::callable(Callable c) {
    Value v;
    v.kind_ = Kind::CALLABLE;
    v.p_ = std::make_shared<Callable>(std::move(c));
    return v;
}

const std::string& Value::as_string() const {
    static const std::string empty;
    if (!p_) return empty;
    EMBER_CHECK(kind_ == Kind::STRING || kind_ == Kind::UNDEFINED, "not a string");
    return *static_cast<const std::string*>(p_.get());
}
const ValueList& Value::as_list() const {
    EMBER_CHECK(is_sequence(), "not a list");
    return static_cast<const ListData*>(p_.get())->items;
}
const Dict& Value::as_dict() const {
    EMBER_CHECK(kind_ == Kind::DICT || kind_ == Kind::NAMESPACE, "not a dict");
    return *static_cast<const Dict*>(p_.get());
}
Dict& Value::ns_attrs() const {
    EMBER_CHECK(kind_ == Kind::NAMESPACE, "not a namespace");
    return *static_cast<Dict*>(p_.get());
}
const Callable& Value::as_callable() const {
    EMBER_CHECK(kind_ == Kind::CALLABLE, "not callable");
    return *static_cast<const Callable*>(p_.get());
}

ValueList Value::take_all() const {
    EMBER_CHECK(kind_ == Kind::GENERATOR, "not a generator");
    auto* d = static_cast<const ListData*>(p_.get());
    ValueList rest(d->items.begin() + d->pos, d->items.end());
    d->pos = d->items.size();
    return rest;
}

const Value* Value::take_one() const {
    EMBER_CHECK(kind_ == Kind::GENERATOR, "not a generator");
    auto* d = static_cast<const ListData*>(p_.get());
    return d->pos < d->items.size() ? &d->items[d->pos++] : nullptr;
}

int Value::depth() const {
    switch (kind_) {
        case Kind::LIST: case Kind::TUPLE: case Kind::GENERATOR: return static_cast<const ListData*>(p_.get())->depth;
        case Kind::DICT: case Kind::NAMESPACE: return as_dict().depth();
        default: return 0;
    }
}

bool Value::truthy() const {
    switch (kind_) {
        case Kind::UNDEFINED: case Kind::NONE: return false;
        case Kind::BOOL: return b_;
        case Kind::INT: return i_ != 0;
        case Kind::FLOAT: return f_ != 0.0;
        case Kind::STRING: return !as_string().empty();
        case Kind::LIST: case Kind::TUPLE: return !as_list().empty();
        case Kind::DICT: return !as_dict().empty();
        case Kind::NAMESPACE: case Kind::CALLABLE: case Kind::GENERATOR: return true;
    }
    return false;
}

const char* Value::type_name() const {
    switch (kind_) {
        case Kind::UNDEFINED: return "Undefined";
        case Kind::NONE: return "NoneType";
        case Kind::BOOL: return "bool";
        case Kind::INT: return "int";
        case Kind::FLOAT: return "float";
        case Kind::STRING: return "str";
        case Kind::LIST: return "list";
        case Kind::TUPLE: return "tuple";
        case Kind::DICT: return "dict";
        case Kind::NAMESPACE: return "Namespace";
        case Kind::CALLABLE: return "function";
        case Kind::GENERATOR: return "generator";
    }
    return "object";
}

std::string Value::str() const {
    switch (kind_) {
        case Kind::UNDEFINED: return "";
        case Kind::STRING: return as_string();
        default: return repr();
    }
}

std::string Value::repr() const {
    ReprGuard guard;
    if (guard.too_deep()) return "...";
    switch (kind_) {
        case Kind::UNDEFINED: return "Undefined";
        case Kind::NONE: return "None";
        case Kind::BOOL: return b_ ? "True" : "False";
        case Kind::INT: return py_int_str(i_);
        case Kind::FLOAT: return py_float_repr(f_);
        case Kind::STRING: return py_str_repr(as_string());
        case Kind::LIST: case Kind::TUPLE: {
            const ValueList& items = as_list();
            std::string out = kind_ == Kind::LIST ? "[" : "(";
            for (size_t i = 0; i < items.size(); ++i) {
                if (i) out += ", ";
                out += items[i].repr();
            }
            if (kind_ == Kind::TUPLE && items.size() == 1) out += ",";
            out += kind_ == Kind::LIST ? "]" : ")";
            return out;
        }
        case Kind::DICT: case Kind::NAMESPACE: {
            std::string out = kind_ == Kind::NAMESPACE ? "<Namespace {" : "{";
            bool first = true;
            for (const auto& [k, v] : as_dict().items()) {
                if (!first) out += ", ";
                first = false;
                out += k.repr() + ": " + v.repr();
            }
            out += kind_ == Kind::NAMESPACE ? "}>" : "}";
            return out;
        }
        case Kind::GENERATOR: return "<generator object>";
        case Kind::CALLABLE: {
            const Callable& c = as_callable();
            return c.macro ? cat({"<Macro '", c.name, "'>"}) : cat({"<built-in function ", c.name, ">"});
        }
    }
    return "";
}

bool py_equal(const Value& a, const Value& b) {
    ReprGuard guard;
    if (guard.too_deep()) return false;
    if (a.is_number() && b.is_number()) {
        if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
        return a.as_float() == b.as_float();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case Kind::UNDEFINED: case Kind::NONE: return true;
        case Kind::STRING: return a.as_string() == b.as_string();
        case Kind::LIST: case Kind::TUPLE: {
            const ValueList &x = a.as_list(), &y = b.as_list();
            if (x.size() != y.size()) return false;
            for (size_t i = 0; i < x.size(); ++i)
                if (!py_equal(x[i], y[i])) return false;
            return true;
        }
        case Kind::DICT: {
            const Dict &x = a.as_dict(), &y = b.as_dict();
            if (x.size() != y.size()) return false;
            for (const auto& [k, v] : x.items()) {
                const Value* o = y.find(k);
                if (!o || !py_equal(v, *o)) return false;
            }
            return true;
        }
        case Kind::NAMESPACE: return &a.ns_attrs() == &b.ns_attrs();
        case Kind::CALLABLE: return &a.as_callable() == &b.as_callable();
        case Kind::GENERATOR: return a.p_ptr() == b.p_ptr();
        default: return false;
    }
}

std::string hash_key(const Value& v) {
    switch (v.kind()) {
        case Kind::STRING: return cat({"s", v.as_string()});
        case Kind::BOOL: case Kind::INT: return cat({"i", std::to_string(v.as_int())});
        case Kind::FLOAT: {
            double f = v.as_float();
            if (std::isfinite(f) && f == std::floor(f) && std::fabs(f) < 9.2e18)
                return cat({"i", std::to_string(static_cast<int64_t>(f))});
            return cat({"f", py_float_repr(f)});
        }
        case Kind::NONE: return "n";
        case Kind::TUPLE: {
            std::string k = "t";
            for (const Value& x : v.as_list()) {
                std::string e = hash_key(x);
                k += cat({std::to_string(e.size()), ":", e});
            }
            return k;
        }
        default: return cat({"?", v.repr()});
    }
}

const Value* Dict::find(const Value& key) const {
    auto it = index_.find(hash_key(key));
    return it == index_.end() ? nullptr : &items_[it->second].second;
}

const Value* Dict::find(const std::string& key) const {
    auto it = index_.find(cat({"s", key}));
    return it == index_.end() ? nullptr : &items_[it->second].second;
}

void Dict::set(const Value& key, Value v) {
    depth_ = std::max(depth_, v.depth() + 1);
    auto [it, inserted] = index_.emplace(hash_key(key), items_.size());
    if (inserted) items_.emplace_back(key, std::move(v));
    else items_[it->second].second = std::move(v);
}

void Dict::replace_at(size_t i, Value v) {
    depth_ = std::max(depth_, v.depth() + 1);
    items_[i].second = std::move(v);
}

}  // namespace ember::jinja
