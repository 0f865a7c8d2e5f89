// value.h: the values a Jinja template computes with, modelled on the Python objects Jinja sees.
//
// Kinds: undefined (Jinja's default Undefined: prints as "", is falsy, iterates as empty, fails on
// attribute access and arithmetic), None, bool, int (64-bit), float, str (UTF-8, with a "markup"
// flag for Jinja's Markup/safe strings), list, tuple, dict (insertion-ordered, keys compared like
// Python: 1 == 1.0 == True), namespace (the one mutable object: Jinja's namespace(), also used for
// `loop`), callables (builtins, bound methods, macros), and generator: what jinja2's map, select,
// reject, selectattr, rejectattr, unique, items and reverse filters return — always truthy, no len(),
// not JSON-serializable, and consumed by iteration (a second loop over it sees nothing).
// Containers are immutable and shared (copying a Value is O(1)), as in Jinja's immutable sandbox.
// Containers record their nesting depth so that runaway nesting is caught before it can exhaust
// the stack.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ember::jinja {

class Value;
class Dict;
class Renderer;
struct Scope;
struct MacroNode;
using ValueList = std::vector<Value>;

struct CallArgs {
    std::vector<Value> pos;
    std::vector<std::pair<std::string, Value>> kw;
};

using NativeFn = std::function<Expected<Value>(Renderer&, CallArgs&)>;

struct Callable {
    Callable() = default;
    Callable(std::string n, NativeFn f) : name(std::move(n)), fn(std::move(f)) {}
    std::string name;
    NativeFn fn;                       // builtins and bound methods
    const MacroNode* macro = nullptr;  // template macros: body + parameters
    std::shared_ptr<Scope> closure;    // the scope a macro was defined in
};

enum class Kind : uint8_t { UNDEFINED, NONE, BOOL, INT, FLOAT, STRING, LIST, TUPLE, DICT, NAMESPACE, CALLABLE, GENERATOR };

inline constexpr int kMaxNesting = 256;  // deepest container nesting a template may build or receive

class Value {
public:
    Value() = default;  // undefined
    static Value undefined(std::string hint = {});
    static Value none();
    static Value boolean(bool b);
    static Value integer(int64_t i);
    static Value real(double f);
    static Value string(std::string s, bool markup = false);
    static Value list(ValueList items);
    static Value tuple(ValueList items);
    static Value dict(Dict d);
    static Value ns(Dict attrs);
    static Value callable(Callable c);
    static Value generator(ValueList items);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::UNDEFINED; }
    bool is_none() const { return kind_ == Kind::NONE; }
    bool is_bool() const { return kind_ == Kind::BOOL; }
    bool is_int() const { return kind_ == Kind::INT; }      // excludes bool
    bool is_float() const { return kind_ == Kind::FLOAT; }
    bool is_number() const { return kind_ == Kind::BOOL || kind_ == Kind::INT || kind_ == Kind::FLOAT; }
    bool is_integral() const { return kind_ == Kind::BOOL || kind_ == Kind::INT; }  // Python int incl. bool
    bool is_string() const { return kind_ == Kind::STRING; }
    bool is_list() const { return kind_ == Kind::LIST; }
    bool is_tuple() const { return kind_ == Kind::TUPLE; }
    bool is_sequence() const { return kind_ == Kind::LIST || kind_ == Kind::TUPLE; }
    bool is_dict() const { return kind_ == Kind::DICT; }
    bool is_namespace() const { return kind_ == Kind::NAMESPACE; }
    bool is_callable() const { return kind_ == Kind::CALLABLE; }
    bool is_generator() const { return kind_ == Kind::GENERATOR; }

    bool as_bool() const { return b_; }
    int64_t as_int() const { return kind_ == Kind::BOOL ? (b_ ? 1 : 0) : i_; }  // bool or int
    double as_float() const { return kind_ == Kind::FLOAT ? f_ : static_cast<double>(as_int()); }
    const std::string& as_string() const;  // string, or an undefined's hint
    bool is_markup() const { return kind_ == Kind::STRING && b_; }
    const ValueList& as_list() const;  // list or tuple
    const Dict& as_dict() const;       // dict
    Dict& ns_attrs() const;            // namespace (mutable)
    const Callable& as_callable() const;
    int depth() const;  // container nesting: 0 for scalars
    const void* p_ptr() const { return p_.get(); }  // identity
    // Generators: the items not consumed yet (consuming them), or the next one (nullptr at the end).
    ValueList take_all() const;
    const Value* take_one() const;

    // Python semantics.
    bool truthy() const;
    std::string str() const;   // str(x); "" for undefined
    std::string repr() const;  // repr(x)
    const char* type_name() const;  // 'str', 'int', 'NoneType', ...

private:
    Kind kind_ = Kind::UNDEFINED;
    bool b_ = false;  // bool value; markup flag for strings
    union {
        int64_t i_ = 0;
        double f_;
    };
    std::shared_ptr<void> p_;  // std::string, ListData, Dict or Callable
};

// Python's ==, and the canonical key Python's hashing would put equal values under.
bool py_equal(const Value& a, const Value& b);
std::string hash_key(const Value& v);

class Dict {
public:
    const Value* find(const Value& key) const;
    const Value* find(const std::string& key) const;  // string key
    void set(const Value& key, Value v);             // insert at the end, or replace in place
    void replace_at(size_t i, Value v);              // the value of the i-th item (i < size())
    size_t size() const { return items_.size(); }
    bool empty() const { return items_.empty(); }
    const std::vector<std::pair<Value, Value>>& items() const { return items_; }
    int depth() const { return depth_; }
    bool frozen() const { return frozen_; }
    void freeze() { frozen_ = true; }

private:
    std::vector<std::pair<Value, Value>> items_;
    std::unordered_map<std::string, size_t> index_;  // hash_key(key) → position
    int depth_ = 1;
    bool frozen_ = false;
};

}  // namespace ember::jinja
