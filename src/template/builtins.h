// builtins.h: the filters, tests and global functions of transformers' chat-template environment.
//
// Filters (jinja2 built-ins, with transformers' tojson = json.dumps(ensure_ascii=False)):
//   abs attr capitalize center count d default dictsort e escape first float forceescape format
//   indent int items join last length list lower map max min reject rejectattr replace reverse round
//   safe select selectattr sort string sum title tojson trim unique upper wordcount
// Tests: boolean callable defined divisibleby eq equalto escaped even false float ge greaterthan gt
//   in integer iterable le lessthan lower lt mapping ne none number odd sameas sequence string true
//   undefined upper, and the operator aliases == != < <= > >=
// Globals: range, dict, namespace, raise_exception, strftime_now.
#pragma once
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "template/value.h"

namespace ember::jinja {

using FilterFn = Expected<Value> (*)(Renderer&, const Value&, CallArgs&);
using TestFn = Expected<bool> (*)(Renderer&, const Value&, CallArgs&);

FilterFn find_filter(const std::string& name);  // nullptr when unknown
TestFn find_test(const std::string& name);
Value find_global(const std::string& name);  // undefined when unknown

// Binds call arguments to parameter names like a Python signature; absent ones are nullopt.
Expected<std::vector<std::optional<Value>>> bind_args(const CallArgs& a, std::initializer_list<const char*> names,
                                                      const char* fn);

}  // namespace ember::jinja
