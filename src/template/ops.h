// ops.h: Python operator semantics on template values, as Jinja evaluates them.
//
//  - binary_op: + - * / // % ** with Python's numeric tower (bool ⊂ int ⊂ float), str/list/tuple
//    concatenation and repetition, Markup escaping on `+`, printf-style `str % args`; 64-bit ints
//    (overflow is an error, Python would grow the int).
//  - compare: == != < <= > >= (ordering only between numbers, strings, or same-kind sequences).
//  - contains: `x in y` for str (substring), list/tuple, dict (keys); undefined contains nothing.
//  - iterate: list/tuple items, dict keys, str code points, undefined → empty.
//  - get_attr / get_item: jinja2's sandboxed getattr/getitem: dict keys, namespace attributes,
//    Python methods of str/dict/list; a missing key or index gives an undefined that remembers why.
//  - slice: Python slicing (negative indices and steps) of str/list/tuple.
// Operations on an undefined value fail with its hint ("'x' is undefined"), as jinja2's default
// Undefined does.
#pragma once
#include <string>

#include "core/status.h"
#include "template/value.h"

namespace ember::jinja {

Expected<Value> binary_op(const std::string& op, const Value& a, const Value& b, size_t max_size);
Expected<Value> unary_minus(const Value& a);
Expected<bool> compare(const std::string& op, const Value& a, const Value& b);
Expected<bool> contains(const Value& container, const Value& item);
Expected<ValueList> iterate(const Value& v);
Expected<int64_t> length(const Value& v);

Expected<Value> get_attr(const Value& obj, const std::string& name);
Expected<Value> get_item(const Value& obj, const Value& key);
Expected<Value> slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// The error an operation on `v` raises when v is undefined.
Status undefined_error(const Value& v);
// "'dict object'" style description used in jinja2's messages.
std::string object_type_repr(const Value& v);
// markupsafe.escape
std::string html_escape(const std::string& s);
// Python's `fmt % args` (the %-formatting subset: s r d i f g e x o c %, flags, width, precision).
Expected<std::string> percent_format(const std::string& fmt, const Value& args);

// Python methods bound to a receiver (str, dict, list); an undefined value when there is none.
Value bind_method(const Value& obj, const std::string& name);

}  // namespace ember::jinja
