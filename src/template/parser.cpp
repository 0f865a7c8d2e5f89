// parser.cpp: recursive descent over the token stream (see parser.h and jinja2/parser.py).
#include "template/parser.h"

#include "template/parser_impl.h"

namespace ember::jinja {

namespace {

bool mentions(const Body& body, const std::string& name);

bool mentions(const Expr* e, const std::string& name) {
    if (!e) return false;
    if (e->kind == ExprKind::NAME && e->name == name) return true;
    for (const ExprPtr& x : e->items)
        if (mentions(x.get(), name)) return true;
    for (const auto& kv : e->kwargs)
        if (mentions(kv.second.get(), name)) return true;
    for (const Expr* x : {e->a.get(), e->b.get(), e->c.get(), e->dyn_args.get(), e->dyn_kwargs.get()})
        if (mentions(x, name)) return true;
    return false;
}

bool mentions(const Body& body, const std::string& name) {
    for (const NodePtr& n : body) {
        for (const Expr* x : {n->expr.get(), n->target.get(), n->cond.get()})
            if (mentions(x, name)) return true;
        for (const auto& [cond, b] : n->branches)
            if (mentions(cond.get(), name) || mentions(b, name)) return true;
        for (const ExprPtr& x : n->values)
            if (mentions(x.get(), name)) return true;
        if (mentions(n->body, name) || mentions(n->else_body, name)) return true;
        if (n->macro) {
            for (const ExprPtr& d : n->macro->defaults)
                if (mentions(d.get(), name)) return true;
            if (mentions(n->macro->body, name)) return true;
        }
    }
    return false;
}

}  // namespace

// ---- statements ----
Expected<Body> Parser::subparse(std::vector<std::string> end_names) {
    Body body;
    while (cur().type != TokType::END) {
        const Token& t = cur();
        if (t.type == TokType::DATA) {
            auto n = node(NodeKind::TEXT, t);
            n->text = t.text;
            body.push_back(std::move(n));
            advance();
        } else if (t.type == TokType::VAR_BEGIN) {
            advance();
            auto n = node(NodeKind::PRINT, t);
            EMBER_ASSIGN(n->expr, parse_tuple(false, true, {}, false));
            EMBER_TRY(expect_type(TokType::VAR_END));
            body.push_back(std::move(n));
        } else if (t.type == TokType::BLOCK_BEGIN) {
            advance();
            for (const std::string& e : end_names)
                if (cur().type == TokType::NAME && cur().text == e) return body;
            EMBER_ASSIGN(NodePtr n, parse_statement());
            if (n) body.push_back(std::move(n));
            EMBER_TRY(expect_type(TokType::BLOCK_END));
        } else {
            return fail("unexpected " + describe(t));
        }
    }
    if (!end_names.empty()) {
        std::string want;
        for (const std::string& e : end_names) want += (want.empty() ? "'" : " or '") + e + "'";
        return fail("unexpected end of template; expected " + want);
    }
    return body;
}

// Body of a block statement: the opening tag's %} , then statements up to one of end_names.
Expected<Body> Parser::parse_statements(std::vector<std::string> end_names, bool drop_needle) {
    skip_op(":");
    EMBER_TRY(expect_type(TokType::BLOCK_END));
    EMBER_ASSIGN(Body body, subparse(end_names));
    if (drop_needle) advance();
    return body;
}

Expected<NodePtr> Parser::parse_statement() {
    DepthGuard g(depth_);
    EMBER_TRY(check_depth());
    const Token& t = cur();
    if (t.type != TokType::NAME) return fail("tag name expected");
    const std::string& n = t.text;
    if (n == "for") return parse_for();
    if (n == "if") return parse_if();
    if (n == "set") return parse_set();
    if (n == "macro") return parse_macro();
    if (n == "filter") return parse_filter_block();
    if (n == "with") return parse_with();
    if (n == "print") return parse_print();
    if (n == "generation") {
        advance();
        auto s = node(NodeKind::SCOPE, t);
        EMBER_ASSIGN(s->body, parse_statements({"endgeneration"}, true));
        return s;
    }
    if (n == "break" || n == "continue") {
        if (loop_depth_ == 0) return fail("'" + n + "' outside of a loop");
        advance();
        return node(n == "break" ? NodeKind::BREAK : NodeKind::CONTINUE, t);
    }
    static const Names unsupported = {"extends", "include", "import", "from", "block", "call", "autoescape",
                                      "do", "trans", "raw"};
    for (const char* u : unsupported)
        if (n == u) return fail("the '" + n + "' tag is not supported in chat templates");
    return fail("unknown tag '" + n + "'");
}

Expected<NodePtr> Parser::parse_for() {
    auto n = node(NodeKind::FOR, cur());
    advance();
    EMBER_ASSIGN(n->target, parse_assign_target(true, false, {"in"}, false));
    EMBER_TRY(expect_name("in"));
    EMBER_ASSIGN(n->expr, parse_tuple(false, false, {"recursive"}, false));
    if (skip_name("if")) {
        EMBER_ASSIGN(n->cond, parse_expression(true));
    }
    if (is_name("recursive")) return fail("recursive loops are not supported");
    ++loop_depth_;
    auto body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    if (!body) return body.status();
    n->body = std::move(body.value());
    n->uses_loop = mentions(n->body, "loop");
    bool has_else = is_name("else");
    advance();
    if (has_else) {
        EMBER_ASSIGN(n->else_body, parse_statements({"endfor"}, true));
    }
    return n;
}

Expected<NodePtr> Parser::parse_if() {
    auto n = node(NodeKind::IF, cur());
    advance();
    while (true) {
        EMBER_ASSIGN(ExprPtr cond, parse_tuple(false, false, {}, false));
        EMBER_ASSIGN(Body body, parse_statements({"elif", "else", "endif"}, false));
        n->branches.emplace_back(std::move(cond), std::move(body));
        if (skip_name("elif")) continue;
        if (skip_name("else")) {
            EMBER_ASSIGN(n->else_body, parse_statements({"endif"}, true));
        } else {
            advance();  // endif
        }
        break;
    }
    return n;
}

Expected<NodePtr> Parser::parse_set() {
    const Token& t = cur();
    advance();
    EMBER_ASSIGN(ExprPtr target, parse_assign_target(true, false, {}, true));
    if (skip_op("=")) {
        auto n = node(NodeKind::SET, t);
        n->target = std::move(target);
        EMBER_ASSIGN(n->expr, parse_tuple(false, true, {}, false));
        return n;
    }
    auto n = node(NodeKind::SET_BLOCK, t);
    n->target = std::move(target);
    if (is_op("|")) {
        EMBER_ASSIGN(n->expr, parse_filter(nullptr, false));
    }
    EMBER_ASSIGN(n->body, parse_statements({"endset"}, true));
    return n;
}

Expected<NodePtr> Parser::parse_macro() {
    auto n = node(NodeKind::MACRO, cur());
    advance();
    auto m = std::make_unique<MacroNode>();
    EMBER_ASSIGN(m->name, expect_any_name());
    EMBER_TRY(expect_op("("));
    while (!is_op(")")) {
        if (!m->params.empty()) EMBER_TRY(expect_op(","));
        EMBER_ASSIGN(std::string p, expect_any_name());
        ExprPtr def;
        if (skip_op("=")) {
            EMBER_ASSIGN(def, parse_expression(true));
        } else if (!m->defaults.empty() && m->defaults.back()) {
            return fail("non-default argument follows default argument");
        }
        m->params.push_back(p);
        m->defaults.push_back(std::move(def));
    }
    EMBER_TRY(expect_op(")"));
    int saved = loop_depth_;
    loop_depth_ = 0;
    auto body = parse_statements({"endmacro"}, true);
    loop_depth_ = saved;
    if (!body) return body.status();
    m->body = std::move(body.value());
    n->macro = std::move(m);
    return n;
}

Expected<NodePtr> Parser::parse_filter_block() {
    auto n = node(NodeKind::FILTER_BLOCK, cur());
    advance();
    EMBER_ASSIGN(n->expr, parse_filter(nullptr, true));
    EMBER_ASSIGN(n->body, parse_statements({"endfilter"}, true));
    return n;
}

Expected<NodePtr> Parser::parse_with() {
    auto n = node(NodeKind::WITH, cur());
    advance();
    while (cur().type != TokType::BLOCK_END) {
        if (!n->targets.empty()) EMBER_TRY(expect_op(","));
        EMBER_ASSIGN(ExprPtr target, parse_assign_target(true, false, {}, false));
        EMBER_TRY(expect_op("="));
        EMBER_ASSIGN(ExprPtr value, parse_expression(true));
        n->targets.push_back(std::move(target));
        n->values.push_back(std::move(value));
    }
    EMBER_ASSIGN(n->body, parse_statements({"endwith"}, true));
    return n;
}

Expected<NodePtr> Parser::parse_print() {
    auto scope = node(NodeKind::SCOPE, cur());  // a group of PRINT nodes; SCOPE adds no visible scope here
    advance();
    while (cur().type != TokType::BLOCK_END) {
        if (!scope->body.empty()) EMBER_TRY(expect_op(","));
        auto p = node(NodeKind::PRINT, cur());
        EMBER_ASSIGN(p->expr, parse_expression(true));
        scope->body.push_back(std::move(p));
    }
    return scope;
}

// ---- assignment targets ----
Expected<ExprPtr> Parser::parse_assign_target(bool with_tuple, bool name_only, Names extra_end, bool with_namespace) {
    const Token& at = cur();
    ExprPtr target;
    if (name_only || !with_tuple) {
        EMBER_ASSIGN(target, parse_primary(with_namespace));
    } else {
        EMBER_ASSIGN(target, parse_tuple(true, true, extra_end, false, with_namespace));
    }
    if (!assignable(*target)) return fail_at(at, "can't assign to this expression");
    return target;
}

bool Parser::assignable(const Expr& e) {
    if (e.kind == ExprKind::NAME || e.kind == ExprKind::NSREF) return true;
    if (e.kind != ExprKind::TUPLE) return false;
    for (const ExprPtr& x : e.items)
        if (!assignable(*x)) return false;
    return true;
}

Expected<Body> parse_template(const std::vector<Token>& tokens) { return Parser(tokens).parse(); }

}  // namespace ember::jinja
