// eval.h: executes a parsed template against a context, with jinja2's scoping rules:
//  - `set` binds in the current scope; `if` opens no scope; every iteration of a `for` loop runs in
//    a fresh scope (assignments inside a loop do not survive it, hence namespace());
//  - a macro runs in a new scope whose parent is the scope it was defined in (it sees the
//    template-level variables as they are when it is called, not the caller's locals);
//  - `with`, `{% set %}...{% endset %}` and `{% filter %}` bodies run in child scopes.
// Limits stop runaway templates: total loop iterations + macro calls, macro nesting, output size.
#pragma once
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "template/ast.h"
#include "template/value.h"

namespace ember::jinja {

struct RenderLimits {
    size_t max_output_bytes = size_t{16} << 20;  // also the largest string a template may build
    int64_t max_steps = 200'000;                 // loop iterations + macro calls + KiB / 8 items read or built
    int max_call_depth = 100;                    // nested macro calls
};

struct Scope {
    std::unordered_map<std::string, Value> vars;
    std::shared_ptr<Scope> parent;
};
using ScopePtr = std::shared_ptr<Scope>;

class Renderer {
public:
    Renderer(const RenderLimits& limits, const std::tm& now) : limits_(limits), now_(now) {}

    Expected<std::string> render(const Body& body, const Dict& context);

    // Used by filters, tests and builtins.
    Expected<Value> call(const Value& fn, CallArgs& args);
    Expected<Value> apply_filter(const std::string& name, const Value& v, CallArgs& args);
    Expected<bool> apply_test(const std::string& name, const Value& v, CallArgs& args);
    Status check_size(size_t bytes) const;  // a string/output of this size is within the limit
    Status produced(size_t bytes);          // check_size, and charge building it to the step budget
    // Work proportional to a value's size — a string's KiB, a list's or dict's items / 8 (about a loop step's time each) — charged to the step
    // budget: operands and results of operators, calls, filters, tests and methods. Without it a loop of few
    // steps could build range(100000) or scan a 16 MiB string on every iteration (found by review of the fuzz
    // runs: 2000 iterations of range(100000) took 37 s).
    Status charge(const Value& v);
    Status charge(const CallArgs& a);
    Status charge_result(const Value& r);  // charge + the size limit on strings
    const std::tm& now() const { return now_; }
    // Namespaces and macro-defining scopes can form reference cycles (ns.self = ns; a macro held by
    // the scope it closes over); render() clears them when it ends.
    void track_namespace(const Value& ns) { namespaces_.push_back(ns); }

private:
    enum class Flow { NORMAL, BREAK, CONTINUE };

    Expected<Flow> exec_body(const Body& body, const ScopePtr& scope, std::string& out);
    Expected<Flow> exec(const Node& n, const ScopePtr& scope, std::string& out);
    Expected<Flow> exec_for(const Node& n, const ScopePtr& scope, std::string& out);
    Expected<Value> eval(const Expr& e, const ScopePtr& scope);
    Expected<Value> eval_inner(const Expr& e, const ScopePtr& scope);
    Expected<Value> eval_call(const Expr& e, const ScopePtr& scope);
    Expected<CallArgs> eval_args(const Expr& e, const ScopePtr& scope);
    Expected<Value> call_macro(const Callable& c, CallArgs& args);
    Status assign(const Expr& target, const Value& v, const ScopePtr& scope);
    Value lookup(const std::string& name, const ScopePtr& scope) const;
    Status step(int64_t n = 1);
    Status append(std::string& out, const std::string& s);
    void locate(int line, int col);

    RenderLimits limits_;
    std::tm now_;
    int64_t steps_ = 0;
    int call_depth_ = 0;
    std::optional<std::pair<int, int>> err_at_;
    std::vector<Value> namespaces_;
    std::vector<std::weak_ptr<Scope>> macro_scopes_;
};

}  // namespace ember::jinja
