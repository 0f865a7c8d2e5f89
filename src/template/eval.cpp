// eval.cpp: statement execution and expression evaluation (see eval.h).
#include "template/eval.h"

#include <algorithm>
#include <iterator>

#include "template/builtins.h"
#include "template/ops.h"
#include "template/py_text.h"

namespace ember::jinja {

namespace {

ScopePtr child_of(const ScopePtr& parent) {
    auto s = std::make_shared<Scope>();
    s->parent = parent;
    return s;
}

// jinja2's LoopContext as a namespace: index, index0, revindex, revindex0, first, last, length,
// depth, depth0, previtem, nextitem, cycle(...), changed(...). One per for-loop, its fields replaced in place each
// iteration (jinja2's is one object too: a `loop` kept in a variable sees the later values); previtem / nextitem
// are undefined where there is none. Building it per iteration cost ~2 µs (13 keys hashed and allocated).
enum LoopField : size_t { kIndex, kIndex0, kRevindex, kRevindex0, kFirst, kLast, kLength, kDepth, kDepth0, kPrev, kNext };
struct LoopState {
    int64_t k = 0;
    std::optional<ValueList> changed;
};

Value make_loop(const std::shared_ptr<LoopState>& state) {
    Dict d;
    for (const char* key : {"index", "index0", "revindex", "revindex0", "first", "last", "length", "depth", "depth0",
                            "previtem", "nextitem"})
        d.set(Value::string(key), Value::none());  // in LoopField order; set_loop fills them
    Callable cycle{"cycle", [state](Renderer&, CallArgs& a) -> Expected<Value> {
                       if (a.pos.empty()) return errorf("no items for cycling given");
                       return a.pos[static_cast<size_t>(state->k) % a.pos.size()];
                   }};
    d.set(Value::string("cycle"), Value::callable(std::move(cycle)));
    Callable changed{"changed", [state](Renderer&, CallArgs& a) -> Expected<Value> {
                         ValueList now = a.pos;
                         const std::optional<ValueList>& was = state->changed;
                         bool same = was.has_value() && was->size() == now.size();
                         for (size_t j = 0; same && j < now.size(); ++j) same = py_equal((*was)[j], now[j]);
                         state->changed = std::move(now);
                         return Value::boolean(!same);
                     }};
    d.set(Value::string("changed"), Value::callable(std::move(changed)));
    d.freeze();  // `loop` is not a namespace() in jinja2: no attribute assignment
    return Value::ns(std::move(d));
}

void set_loop(const Value& loop, LoopState& state, const ValueList& items, size_t i) {
    const int64_t n = static_cast<int64_t>(items.size()), k = static_cast<int64_t>(i);
    state.k = k;
    Dict& d = loop.ns_attrs();
    d.replace_at(kIndex, Value::integer(k + 1));
    d.replace_at(kIndex0, Value::integer(k));
    d.replace_at(kRevindex, Value::integer(n - k));
    d.replace_at(kRevindex0, Value::integer(n - k - 1));
    d.replace_at(kFirst, Value::boolean(k == 0));
    d.replace_at(kLast, Value::boolean(k == n - 1));
    d.replace_at(kLength, Value::integer(n));
    d.replace_at(kDepth, Value::integer(1));
    d.replace_at(kDepth0, Value::integer(0));
    d.replace_at(kPrev, k > 0 ? items[i - 1] : Value::undefined("there is no previous item"));  // jinja2's hints
    d.replace_at(kNext, k + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
}

}  // namespace

Expected<std::string> Renderer::render(const Body& body, const Dict& context) {
    auto root = std::make_shared<Scope>();
    for (const auto& [k, v] : context.items())
        if (k.is_string()) root->vars[k.as_string()] = v;
    std::string out;
    auto r = exec_body(body, child_of(root), out);
    for (Value& ns : namespaces_) ns.ns_attrs() = Dict();  // break reference cycles
    for (auto& w : macro_scopes_)
        if (ScopePtr s = w.lock()) s->vars.clear();
    namespaces_.clear();
    macro_scopes_.clear();
    if (!r) {
        if (err_at_) return errorf("chat template error at %d:%d: %s", err_at_->first, err_at_->second,
                                   r.status().message().c_str());
        return errorf("chat template error: %s", r.status().message().c_str());
    }
    return out;
}

void Renderer::locate(int line, int col) {
    if (!err_at_) err_at_ = std::make_pair(line, col);
}

Status Renderer::check_size(size_t bytes) const {
    if (bytes > limits_.max_output_bytes)
        return errorf("template output or string exceeds the limit of %zu bytes", limits_.max_output_bytes);
    return Status::ok();
}

Status Renderer::produced(size_t bytes) {
    EMBER_TRY(check_size(bytes));
    return step(static_cast<int64_t>(bytes >> 10));
}

Status Renderer::append(std::string& out, const std::string& s) {
    EMBER_TRY(check_size(out.size() + s.size()));
    EMBER_TRY(step(static_cast<int64_t>(s.size() >> 10)));
    out += s;
    return Status::ok();
}

Status Renderer::charge(const Value& v) {
    if (v.is_string()) return step(static_cast<int64_t>(v.as_string().size() >> 10));
    if (v.is_sequence()) return step(static_cast<int64_t>(v.as_list().size() >> 3));
    if (v.is_dict()) return step(static_cast<int64_t>(v.as_dict().size() >> 3));
    return Status::ok();
}

Status Renderer::charge(const CallArgs& a) {
    for (const Value& v : a.pos) EMBER_TRY(charge(v));
    for (const auto& kv : a.kw) EMBER_TRY(charge(kv.second));
    return Status::ok();
}

Status Renderer::charge_result(const Value& r) {
    if (r.is_string()) EMBER_TRY(check_size(r.as_string().size()));
    return charge(r);
}

Status Renderer::step(int64_t n) {
    steps_ += n;
    if (steps_ > limits_.max_steps)
        return errorf("template exceeded its budget of %lld steps (loop iterations, macro calls, size of values "
                      "built or scanned)", static_cast<long long>(limits_.max_steps));
    return Status::ok();
}

Value Renderer::lookup(const std::string& name, const ScopePtr& scope) const {
    for (const Scope* s = scope.get(); s; s = s->parent.get()) {
        auto it = s->vars.find(name);
        if (it != s->vars.end()) return it->second;
    }
    Value g = find_global(name);
    if (!g.is_undefined()) return g;
    return Value::undefined("'" + name + "' is undefined");
}

Expected<Renderer::Flow> Renderer::exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const NodePtr& n : body) {
        EMBER_ASSIGN(Flow f, exec(*n, scope, out));
        if (f != Flow::NORMAL) return f;
    }
    return Flow::NORMAL;
}

Expected<Renderer::Flow> Renderer::exec(const Node& n, const ScopePtr& scope, std::string& out) {
    auto fail = [&](const Status& s) -> Expected<Flow> {
        locate(n.line, n.col);
        return s;
    };
    switch (n.kind) {
        case NodeKind::TEXT: {
            Status s = append(out, n.text);
            if (!s) return fail(s);
            return Flow::NORMAL;
        }
        case NodeKind::PRINT: {
            EMBER_ASSIGN(Value v, eval(*n.expr, scope));
            Status s = append(out, v.str());
            if (!s) return fail(s);
            return Flow::NORMAL;
        }
        case NodeKind::IF: {
            for (const auto& [cond, body] : n.branches) {
                EMBER_ASSIGN(Value c, eval(*cond, scope));
                if (c.truthy()) return exec_body(body, scope, out);
            }
            return exec_body(n.else_body, scope, out);
        }
        case NodeKind::FOR: return exec_for(n, scope, out);
        case NodeKind::SET: {
            EMBER_ASSIGN(Value v, eval(*n.expr, scope));
            Status s = assign(*n.target, v, scope);
            if (!s) return fail(s);
            return Flow::NORMAL;
        }
        case NodeKind::SET_BLOCK: case NodeKind::FILTER_BLOCK: {
            std::string buf;
            EMBER_ASSIGN(Flow f, exec_body(n.body, child_of(scope), buf));
            (void)f;
            Value v = Value::string(std::move(buf));
            // Apply the filter chain (innermost first); its operand is the captured text.
            std::vector<const Expr*> chain;
            for (const Expr* e = n.expr.get(); e; e = e->a.get()) chain.push_back(e);
            for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
                EMBER_ASSIGN(CallArgs args, eval_args(**it, scope));
                auto r = apply_filter((*it)->name, v, args);
                if (!r) return fail(r.status());
                v = std::move(r.value());
            }
            Status s = n.kind == NodeKind::SET_BLOCK ? assign(*n.target, v, scope) : append(out, v.str());
            if (!s) return fail(s);
            return Flow::NORMAL;
        }
        case NodeKind::MACRO: {
            Callable c;
            c.name = n.macro->name;
            c.macro = n.macro.get();
            c.closure = scope;
            std::string name = c.name;
            scope->vars[name] = Value::callable(std::move(c));
            macro_scopes_.push_back(scope);
            return Flow::NORMAL;
        }
        case NodeKind::WITH: {
            ScopePtr inner = child_of(scope);
            for (size_t i = 0; i < n.targets.size(); ++i) {
                EMBER_ASSIGN(Value v, eval(*n.values[i], scope));
                Status s = assign(*n.targets[i], v, inner);
                if (!s) return fail(s);
            }
            return exec_body(n.body, inner, out);
        }
        case NodeKind::SCOPE: return exec_body(n.body, child_of(scope), out);
        case NodeKind::BREAK: return Flow::BREAK;
        case NodeKind::CONTINUE: return Flow::CONTINUE;
    }
    return Flow::NORMAL;
}

Expected<Renderer::Flow> Renderer::exec_for(const Node& n, const ScopePtr& scope, std::string& out) {
    EMBER_ASSIGN(Value seq, eval(*n.expr, scope));
    auto it = iterate(seq);
    if (!it) {
        locate(n.expr->line, n.expr->col);
        return it.status();
    }
    ValueList items = std::move(it.value());
    if (n.cond) {  // `for x in xs if cond`: filter first, so that loop.length counts what is iterated
        ValueList kept;
        for (const Value& item : items) {
            EMBER_TRY(step());
            ScopePtr s = child_of(scope);
            EMBER_TRY(assign(*n.target, item, s));
            EMBER_ASSIGN(Value c, eval(*n.cond, s));
            if (c.truthy()) kept.push_back(item);
        }
        items = std::move(kept);
    }
    if (items.empty()) return exec_body(n.else_body, child_of(scope), out);
    auto loop_state = std::make_shared<LoopState>();
    const Value loop = n.uses_loop ? make_loop(loop_state) : Value();
    for (size_t i = 0; i < items.size(); ++i) {
        Status st = step();
        if (!st) {
            locate(n.line, n.col);
            return st;
        }
        ScopePtr s = child_of(scope);
        st = assign(*n.target, items[i], s);
        if (!st) {
            locate(n.line, n.col);
            return st;
        }
        if (n.uses_loop) {
            set_loop(loop, *loop_state, items, i);
            s->vars["loop"] = loop;
        }
        EMBER_ASSIGN(Flow f, exec_body(n.body, s, out));
        if (f == Flow::BREAK) break;
    }
    return Flow::NORMAL;
}

Status Renderer::assign(const Expr& target, const Value& v, const ScopePtr& scope) {
    if (target.kind == ExprKind::NAME) {
        scope->vars[target.name] = v;
        return Status::ok();
    }
    if (target.kind == ExprKind::NSREF) {
        Value ns = lookup(target.name, scope);
        if (ns.is_undefined()) return undefined_error(ns);
        if (!ns.is_namespace() || ns.as_dict().frozen()) return errorf("cannot assign attribute on non-namespace object");
        if (v.depth() >= kMaxNesting) return errorf("value nested deeper than %d levels", kMaxNesting);
        ns.ns_attrs().set(target.value, v);
        return Status::ok();
    }
    // Tuple unpacking.
    EMBER_ASSIGN(ValueList parts, iterate(v));
    if (parts.size() != target.items.size()) {
        if (parts.size() > target.items.size())
            return errorf("too many values to unpack (expected %zu)", target.items.size());
        return errorf("not enough values to unpack (expected %zu, got %zu)", target.items.size(), parts.size());
    }
    for (size_t i = 0; i < parts.size(); ++i) EMBER_TRY(assign(*target.items[i], parts[i], scope));
    return Status::ok();
}

Expected<Value> Renderer::eval(const Expr& e, const ScopePtr& scope) {
    auto r = eval_inner(e, scope);
    if (!r) locate(e.line, e.col);
    return r;
}

Expected<CallArgs> Renderer::eval_args(const Expr& e, const ScopePtr& scope) {
    CallArgs args;
    for (const ExprPtr& x : e.items) {
        EMBER_ASSIGN(Value v, eval(*x, scope));
        args.pos.push_back(std::move(v));
    }
    for (const auto& [k, x] : e.kwargs) {
        EMBER_ASSIGN(Value v, eval(*x, scope));
        args.kw.emplace_back(k, std::move(v));
    }
    if (e.dyn_args) {
        EMBER_ASSIGN(Value v, eval(*e.dyn_args, scope));
        EMBER_ASSIGN(ValueList extra, iterate(v));
        args.pos.insert(args.pos.end(), extra.begin(), extra.end());
    }
    if (e.dyn_kwargs) {
        EMBER_ASSIGN(Value v, eval(*e.dyn_kwargs, scope));
        if (!v.is_dict()) return errorf("argument after ** must be a mapping, not %s", v.type_name());
        for (const auto& [k, x] : v.as_dict().items()) {
            if (!k.is_string()) return errorf("keywords must be strings");
            args.kw.emplace_back(k.as_string(), x);
        }
    }
    return args;
}

Expected<Value> Renderer::eval_call(const Expr& e, const ScopePtr& scope) {
    EMBER_ASSIGN(Value fn, eval(*e.a, scope));
    EMBER_ASSIGN(CallArgs args, eval_args(e, scope));
    return call(fn, args);
}

Expected<Value> Renderer::call(const Value& fn, CallArgs& args) {
    if (fn.is_undefined()) return undefined_error(fn);
    if (!fn.is_callable()) return errorf("'%s' object is not callable", fn.type_name());
    const Callable& c = fn.as_callable();
    EMBER_TRY(charge(args));
    if (c.macro) return call_macro(c, args);  // its output is charged as it is built
    EMBER_ASSIGN(Value r, c.fn(*this, args));
    EMBER_TRY(charge_result(r));
    return r;
}

Expected<Value> Renderer::call_macro(const Callable& c, CallArgs& args) {
    const MacroNode& m = *c.macro;
    if (args.pos.size() > m.params.size())
        return errorf("macro '%s' takes not more than %zu argument(s)", m.name.c_str(), m.params.size());
    if (call_depth_ >= limits_.max_call_depth)
        return errorf("macro calls nested deeper than %d (runaway recursion?)", limits_.max_call_depth);
    EMBER_TRY(step());
    ScopePtr s = child_of(c.closure);
    std::vector<bool> bound(m.params.size(), false);
    for (size_t i = 0; i < args.pos.size(); ++i) {
        s->vars[m.params[i]] = args.pos[i];
        bound[i] = true;
    }
    for (const auto& [k, v] : args.kw) {
        size_t i = 0;
        while (i < m.params.size() && m.params[i] != k) ++i;
        if (i == m.params.size()) return errorf("macro '%s' takes no keyword argument '%s'", m.name.c_str(), k.c_str());
        if (bound[i]) return errorf("macro '%s' got multiple values for argument '%s'", m.name.c_str(), k.c_str());
        s->vars[k] = v;
        bound[i] = true;
    }
    for (size_t i = 0; i < m.params.size(); ++i) {
        if (bound[i]) continue;
        if (m.defaults[i]) {
            EMBER_ASSIGN(Value d, eval(*m.defaults[i], s));
            s->vars[m.params[i]] = std::move(d);
        } else {
            s->vars[m.params[i]] = Value::undefined("parameter '" + m.params[i] + "' was not provided");
        }
    }
    std::string out;
    ++call_depth_;
    auto r = exec_body(m.body, s, out);
    --call_depth_;
    if (!r) return r.status();
    return Value::string(std::move(out));
}

Expected<Value> Renderer::apply_filter(const std::string& name, const Value& v, CallArgs& args) {
    FilterFn f = find_filter(name);
    if (!f) return errorf("no filter named '%s'", name.c_str());
    // Filters that take constant time on a list are free: templates call `messages|length` once per message.
    static const char* const kConstantTime[] = {"length", "count", "first", "last", "default", "d"};
    bool constant = !v.is_string();
    if (constant) constant = std::find(std::begin(kConstantTime), std::end(kConstantTime), name) != std::end(kConstantTime);
    if (!constant) EMBER_TRY(charge(v));
    EMBER_TRY(charge(args));
    EMBER_ASSIGN(Value r, f(*this, v, args));
    EMBER_TRY(charge_result(r));
    return r;
}

Expected<bool> Renderer::apply_test(const std::string& name, const Value& v, CallArgs& args) {
    TestFn t = find_test(name);
    if (!t) return errorf("no test named '%s'", name.c_str());
    if (name == "in") EMBER_TRY(charge(args));  // the other tests look at a type or compare scalars
    return t(*this, v, args);
}

Expected<Value> Renderer::eval_inner(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
        case ExprKind::CONST: return e.value;
        case ExprKind::NAME: return lookup(e.name, scope);
        case ExprKind::LIST: case ExprKind::TUPLE: {
            ValueList items;
            for (const ExprPtr& x : e.items) {
                EMBER_ASSIGN(Value v, eval(*x, scope));
                items.push_back(std::move(v));
            }
            Value out = e.kind == ExprKind::LIST ? Value::list(std::move(items)) : Value::tuple(std::move(items));
            if (out.depth() > kMaxNesting) return errorf("value nested deeper than %d levels", kMaxNesting);
            return out;
        }
        case ExprKind::DICT: {
            Dict d;
            for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
                EMBER_ASSIGN(Value k, eval(*e.items[i], scope));
                EMBER_ASSIGN(Value v, eval(*e.items[i + 1], scope));
                if (k.is_list() || k.is_dict()) return errorf("unhashable type: '%s'", k.type_name());
                d.set(k, std::move(v));
            }
            if (d.depth() > kMaxNesting) return errorf("value nested deeper than %d levels", kMaxNesting);
            return Value::dict(std::move(d));
        }
        case ExprKind::GETATTR: {
            EMBER_ASSIGN(Value obj, eval(*e.a, scope));
            return get_attr(obj, e.name);
        }
        case ExprKind::GETITEM: {
            EMBER_ASSIGN(Value obj, eval(*e.a, scope));
            if (e.b->kind == ExprKind::SLICE) {
                Value parts[3];
                for (int i = 0; i < 3; ++i)
                    if (e.b->items[i]) {
                        EMBER_ASSIGN(parts[i], eval(*e.b->items[i], scope));
                    }
                EMBER_ASSIGN(Value r, slice(obj, parts[0], parts[1], parts[2]));
                EMBER_TRY(charge_result(r));  // a copy: messages[::-1] in a loop would be quadratic for free
                return r;
            }
            EMBER_ASSIGN(Value key, eval(*e.b, scope));
            return get_item(obj, key);
        }
        case ExprKind::SLICE: return errorf("slice outside of a subscript");
        case ExprKind::CALL: return eval_call(e, scope);
        case ExprKind::FILTER: {
            EMBER_ASSIGN(Value v, eval(*e.a, scope));
            EMBER_ASSIGN(CallArgs args, eval_args(e, scope));
            return apply_filter(e.name, v, args);
        }
        case ExprKind::TEST: {
            EMBER_ASSIGN(Value v, eval(*e.a, scope));
            EMBER_ASSIGN(CallArgs args, eval_args(e, scope));
            EMBER_ASSIGN(bool b, apply_test(e.name, v, args));
            return Value::boolean(b);
        }
        case ExprKind::NOT: {
            EMBER_ASSIGN(Value v, eval(*e.a, scope));
            return Value::boolean(!v.truthy());
        }
        case ExprKind::NEG: {
            EMBER_ASSIGN(Value v, eval(*e.a, scope));
            return unary_minus(v);
        }
        case ExprKind::POS: {
            EMBER_ASSIGN(Value v, eval(*e.a, scope));
            if (v.is_undefined()) return undefined_error(v);
            if (!v.is_number()) return errorf("bad operand type for unary +: '%s'", v.type_name());
            return v.is_bool() ? Value::integer(v.as_int()) : v;
        }
        case ExprKind::BINOP: {
            EMBER_ASSIGN(Value a, eval(*e.a, scope));
            EMBER_ASSIGN(Value b, eval(*e.b, scope));
            EMBER_ASSIGN(Value r, binary_op(e.name, a, b, limits_.max_output_bytes));  // result charged below
            if (r.is_string()) EMBER_TRY(produced(r.as_string().size()));
            if (r.is_sequence()) EMBER_TRY(produced(r.as_list().size() * sizeof(Value)));
            return r;
        }
        case ExprKind::AND: case ExprKind::OR: {
            EMBER_ASSIGN(Value a, eval(*e.a, scope));
            if (a.truthy() == (e.kind == ExprKind::OR)) return a;
            return eval(*e.b, scope);
        }
        case ExprKind::CONCAT: {
            std::string s;
            for (const ExprPtr& x : e.items) {
                EMBER_ASSIGN(Value v, eval(*x, scope));
                EMBER_TRY(append(s, v.str()));
            }
            return Value::string(std::move(s));
        }
        case ExprKind::COMPARE: {
            EMBER_ASSIGN(Value left, eval(*e.a, scope));
            for (size_t i = 0; i < e.ops.size(); ++i) {
                EMBER_ASSIGN(Value right, eval(*e.items[i], scope));
                EMBER_TRY(charge(left));  // `in`, == on strings and lists scan them
                EMBER_TRY(charge(right));
                EMBER_ASSIGN(bool ok, compare(e.ops[i], left, right));
                if (!ok) return Value::boolean(false);
                left = std::move(right);
            }
            return Value::boolean(true);
        }
        case ExprKind::COND: {
            EMBER_ASSIGN(Value c, eval(*e.a, scope));
            if (c.truthy()) return eval(*e.b, scope);
            if (e.c) return eval(*e.c, scope);
            return Value::undefined(cat({"the inline if-expression on line ", std::to_string(e.line),
                                         " evaluated to false and no else section was defined."}));
        }
        case ExprKind::NSREF: return errorf("namespace attribute reference outside of an assignment");
    }
    return errorf("unsupported expression");
}

}  // namespace ember::jinja
