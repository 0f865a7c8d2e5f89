// parser_expr.cpp: the expression half of the parser (jinja2 precedence, see parser.h).
#include "template/parser_impl.h"

namespace ember::jinja {

// ---- expressions ----
bool Parser::is_tuple_end(Names extra_end) const {
    if (cur().type == TokType::VAR_END || cur().type == TokType::BLOCK_END || is_op(")")) return true;
    return is_name_in(extra_end);
}

Expected<ExprPtr> Parser::parse_tuple(bool simplified, bool with_condexpr, Names extra_end, bool explicit_parens,
                                      bool with_namespace) {
    const Token& at = cur();
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
        if (!args.empty()) EMBER_TRY(expect_op(","));
        if (is_tuple_end(extra_end)) break;
        ExprPtr e;
        if (simplified) {
            EMBER_ASSIGN(e, parse_primary(with_namespace));
        } else {
            EMBER_ASSIGN(e, parse_expression(with_condexpr));
        }
        args.push_back(std::move(e));
        if (is_op(",")) is_tuple = true;
        else break;
    }
    if (!is_tuple) {
        if (!args.empty()) return std::move(args[0]);
        if (!explicit_parens) return fail("expected an expression, got " + describe(cur()));
    }
    auto t = make(ExprKind::TUPLE, at);
    t->items = std::move(args);
    return t;
}

Expected<ExprPtr> Parser::parse_expression(bool with_condexpr) {
    DepthGuard g(depth_);
    EMBER_TRY(check_depth());
    return with_condexpr ? parse_condexpr() : parse_or();
}

Expected<ExprPtr> Parser::parse_condexpr() {
    const Token& at = cur();
    EMBER_ASSIGN(ExprPtr e1, parse_or());
    while (skip_name("if")) {
        auto c = make(ExprKind::COND, at);
        EMBER_ASSIGN(c->a, parse_or());
        if (skip_name("else")) {
            EMBER_ASSIGN(c->c, parse_condexpr());
        }
        c->b = std::move(e1);
        e1 = std::move(c);
    }
    return e1;
}

Expected<ExprPtr> Parser::parse_or() {
    EMBER_ASSIGN(ExprPtr left, parse_and());
    while (is_name("or")) {
        auto e = make(ExprKind::OR, cur());
        advance();
        e->a = std::move(left);
        EMBER_ASSIGN(e->b, parse_and());
        left = std::move(e);
    }
    return left;
}

Expected<ExprPtr> Parser::parse_and() {
    EMBER_ASSIGN(ExprPtr left, parse_not());
    while (is_name("and")) {
        auto e = make(ExprKind::AND, cur());
        advance();
        e->a = std::move(left);
        EMBER_ASSIGN(e->b, parse_not());
        left = std::move(e);
    }
    return left;
}

Expected<ExprPtr> Parser::parse_not() {
    if (is_name("not")) {
        DepthGuard g(depth_);
        EMBER_TRY(check_depth());
        auto e = make(ExprKind::NOT, cur());
        advance();
        EMBER_ASSIGN(e->a, parse_not());
        return e;
    }
    return parse_compare();
}

Expected<ExprPtr> Parser::parse_compare() {
    const Token& at = cur();
    EMBER_ASSIGN(ExprPtr first, parse_math1());
    ExprPtr cmp;
    while (true) {
        std::string op;
        if (cur().type == TokType::OP &&
            (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
             cur().text == ">" || cur().text == ">=")) {
            op = cur().text;
            advance();
        } else if (is_name("in")) {
            op = "in";
            advance();
        } else if (is_name("not") && look().type == TokType::NAME && look().text == "in") {
            op = "notin";
            advance();
            advance();
        } else {
            break;
        }
        if (!cmp) {
            cmp = make(ExprKind::COMPARE, at);
            cmp->a = std::move(first);
        }
        cmp->ops.push_back(op);
        EMBER_ASSIGN(ExprPtr rhs, parse_math1());
        cmp->items.push_back(std::move(rhs));
    }
    return cmp ? std::move(cmp) : std::move(first);
}

Expected<ExprPtr> Parser::binary_chain(Names ops, Expected<ExprPtr> (Parser::*next)()) {
    EMBER_ASSIGN(ExprPtr left, (this->*next)());
    while (cur().type == TokType::OP) {
        bool match = false;
        for (const char* op : ops) match = match || cur().text == op;
        if (!match) break;
        auto e = make(ExprKind::BINOP, cur());
        e->name = cur().text;
        advance();
        e->a = std::move(left);
        EMBER_ASSIGN(e->b, (this->*next)());
        left = std::move(e);
    }
    return left;
}

Expected<ExprPtr> Parser::parse_concat() {
    const Token& at = cur();
    EMBER_ASSIGN(ExprPtr first, parse_math2());
    if (!is_op("~")) return first;
    auto e = make(ExprKind::CONCAT, at);
    e->items.push_back(std::move(first));
    while (skip_op("~")) {
        EMBER_ASSIGN(ExprPtr x, parse_math2());
        e->items.push_back(std::move(x));
    }
    return e;
}

Expected<ExprPtr> Parser::parse_unary(bool with_filter) {
    DepthGuard g(depth_);
    EMBER_TRY(check_depth());
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
        e = make(is_op("-") ? ExprKind::NEG : ExprKind::POS, cur());
        advance();
        EMBER_ASSIGN(e->a, parse_unary(false));
    } else {
        EMBER_ASSIGN(e, parse_primary(false));
    }
    EMBER_ASSIGN(e, parse_postfix(std::move(e)));
    if (with_filter) {
        EMBER_ASSIGN(e, parse_filter_expr(std::move(e)));
    }
    return e;
}

Expected<ExprPtr> Parser::parse_primary(bool with_namespace) {
    const Token& t = cur();
    switch (t.type) {
        case TokType::NAME: {
            advance();
            if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
                auto e = make(ExprKind::CONST, t);
                e->value = Value::boolean(t.text[0] == 't' || t.text[0] == 'T');
                return e;
            }
            if (t.text == "none" || t.text == "None") {
                auto e = make(ExprKind::CONST, t);
                e->value = Value::none();
                return e;
            }
            if (with_namespace && is_op(".")) {
                advance();
                auto e = make(ExprKind::NSREF, t);
                e->name = t.text;
                EMBER_ASSIGN(std::string attr, expect_any_name());
                e->value = Value::string(attr);
                return e;
            }
            auto e = make(ExprKind::NAME, t);
            e->name = t.text;
            return e;
        }
        case TokType::STRING: {
            std::string s;
            while (cur().type == TokType::STRING) {
                s += cur().text;
                advance();
            }
            auto e = make(ExprKind::CONST, t);
            e->value = Value::string(std::move(s));
            return e;
        }
        case TokType::INT: case TokType::FLOAT: {
            advance();
            auto e = make(ExprKind::CONST, t);
            e->value = t.type == TokType::INT ? Value::integer(t.ival) : Value::real(t.fval);
            return e;
        }
        case TokType::OP:
            if (t.text == "(") {
                advance();
                EMBER_ASSIGN(ExprPtr e, parse_tuple(false, true, {}, true));
                EMBER_TRY(expect_op(")"));
                return e;
            }
            if (t.text == "[") return parse_list();
            if (t.text == "{") return parse_dict();
            break;
        default: break;
    }
    return fail("unexpected " + describe(t));
}

Expected<ExprPtr> Parser::parse_list() {
    auto e = make(ExprKind::LIST, cur());
    advance();
    while (!is_op("]")) {
        if (!e->items.empty()) EMBER_TRY(expect_op(","));
        if (is_op("]")) break;
        EMBER_ASSIGN(ExprPtr x, parse_expression(true));
        e->items.push_back(std::move(x));
    }
    EMBER_TRY(expect_op("]"));
    return e;
}

Expected<ExprPtr> Parser::parse_dict() {
    auto e = make(ExprKind::DICT, cur());
    advance();
    while (!is_op("}")) {
        if (!e->items.empty()) EMBER_TRY(expect_op(","));
        if (is_op("}")) break;
        EMBER_ASSIGN(ExprPtr k, parse_expression(true));
        EMBER_TRY(expect_op(":"));
        EMBER_ASSIGN(ExprPtr v, parse_expression(true));
        e->items.push_back(std::move(k));
        e->items.push_back(std::move(v));
    }
    EMBER_TRY(expect_op("}"));
    return e;
}

Expected<ExprPtr> Parser::parse_postfix(ExprPtr node) {
    while (true) {
        if (is_op(".") || is_op("[")) {
            EMBER_ASSIGN(node, parse_subscript(std::move(node)));
        } else if (is_op("(")) {
            EMBER_ASSIGN(node, parse_call(std::move(node)));
        } else {
            return node;
        }
    }
}

Expected<ExprPtr> Parser::parse_filter_expr(ExprPtr node) {
    while (true) {
        if (is_op("|")) {
            EMBER_ASSIGN(node, parse_filter(std::move(node), false));
        } else if (is_name("is")) {
            EMBER_ASSIGN(node, parse_test(std::move(node)));
        } else if (is_op("(")) {
            EMBER_ASSIGN(node, parse_call(std::move(node)));
        } else {
            return node;
        }
    }
}

Expected<ExprPtr> Parser::parse_subscript(ExprPtr node) {
    const Token& t = cur();
    advance();
    if (t.text == ".") {
        const Token& a = cur();
        if (a.type == TokType::NAME) {
            advance();
            auto e = make(ExprKind::GETATTR, t);
            e->a = std::move(node);
            e->name = a.text;
            return e;
        }
        if (a.type != TokType::INT) return fail("expected name or number after '.'");
        advance();
        auto e = make(ExprKind::GETITEM, t);
        e->a = std::move(node);
        e->b = make(ExprKind::CONST, a);
        e->b->value = Value::integer(a.ival);
        return e;
    }
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
        if (!args.empty()) EMBER_TRY(expect_op(","));
        EMBER_ASSIGN(ExprPtr x, parse_subscribed());
        args.push_back(std::move(x));
    }
    EMBER_TRY(expect_op("]"));
    if (args.empty()) return fail_at(t, "expected subscript expression");
    auto e = make(ExprKind::GETITEM, t);
    e->a = std::move(node);
    if (args.size() == 1) {
        e->b = std::move(args[0]);
    } else {
        e->b = make(ExprKind::TUPLE, t);
        e->b->items = std::move(args);
    }
    return e;
}

Expected<ExprPtr> Parser::parse_subscribed() {
    const Token& at = cur();
    std::vector<ExprPtr> parts;  // start, stop, step
    if (is_op(":")) {
        advance();
        parts.emplace_back();
    } else {
        EMBER_ASSIGN(ExprPtr node, parse_expression(true));
        if (!is_op(":")) return node;
        advance();
        parts.push_back(std::move(node));
    }
    if (is_op(":") || is_op("]") || is_op(",")) {
        parts.emplace_back();
    } else {
        EMBER_ASSIGN(ExprPtr stop, parse_expression(true));
        parts.push_back(std::move(stop));
    }
    if (skip_op(":")) {
        if (is_op("]") || is_op(",")) {
            parts.emplace_back();
        } else {
            EMBER_ASSIGN(ExprPtr step, parse_expression(true));
            parts.push_back(std::move(step));
        }
    } else {
        parts.emplace_back();
    }
    auto s = make(ExprKind::SLICE, at);
    s->items = std::move(parts);
    return s;
}

// ( args, name=kwarg, *dyn_args, **dyn_kwargs ) into e->items / e->kwargs / e->dyn_*.
Status Parser::parse_call_args(Expr& e) {
    const Token& open = cur();
    EMBER_TRY(expect_op("("));
    bool require_comma = false;
    auto bad = [&]() { return fail_at(open, "invalid syntax for function call expression"); };
    while (!is_op(")")) {
        if (require_comma) {
            EMBER_TRY(expect_op(","));
            if (is_op(")")) break;
        }
        if (is_op("*")) {
            if (e.dyn_args || e.dyn_kwargs) return bad();
            advance();
            EMBER_ASSIGN(e.dyn_args, parse_expression(true));
        } else if (is_op("**")) {
            if (e.dyn_kwargs) return bad();
            advance();
            EMBER_ASSIGN(e.dyn_kwargs, parse_expression(true));
        } else if (cur().type == TokType::NAME && look().type == TokType::OP && look().text == "=") {
            if (e.dyn_kwargs) return bad();
            std::string key = cur().text;
            advance();
            advance();
            EMBER_ASSIGN(ExprPtr v, parse_expression(true));
            e.kwargs.emplace_back(key, std::move(v));
        } else {
            if (e.dyn_args || e.dyn_kwargs || !e.kwargs.empty()) return bad();
            EMBER_ASSIGN(ExprPtr v, parse_expression(true));
            e.items.push_back(std::move(v));
        }
        require_comma = true;
    }
    return expect_op(")");
}

Expected<ExprPtr> Parser::parse_call(ExprPtr node) {
    auto e = make(ExprKind::CALL, cur());
    e->line = node->line;  // errors point at the start of the callee
    e->col = node->col;
    e->a = std::move(node);
    EMBER_TRY(parse_call_args(*e));
    return e;
}

Expected<std::string> Parser::dotted_name() {
    EMBER_ASSIGN(std::string name, expect_any_name());
    while (skip_op(".")) {
        EMBER_ASSIGN(std::string part, expect_any_name());
        name += "." + part;
    }
    return name;
}

Expected<ExprPtr> Parser::parse_filter(ExprPtr node, bool start_inline) {
    while (is_op("|") || start_inline) {
        if (!start_inline) advance();
        start_inline = false;
        auto e = make(ExprKind::FILTER, cur());
        EMBER_ASSIGN(e->name, dotted_name());
        if (is_op("(")) EMBER_TRY(parse_call_args(*e));
        e->a = std::move(node);
        node = std::move(e);
    }
    return node;
}

Expected<ExprPtr> Parser::parse_test(ExprPtr node) {
    const Token& is_tok = cur();
    advance();
    bool negated = skip_name("not");
    auto e = make(ExprKind::TEST, is_tok);
    EMBER_ASSIGN(e->name, dotted_name());
    e->a = std::move(node);
    const Token& t = cur();
    if (is_op("(")) {
        EMBER_TRY(parse_call_args(*e));
    } else if ((t.type == TokType::NAME || t.type == TokType::STRING || t.type == TokType::INT ||
                t.type == TokType::FLOAT || is_op("[") || is_op("{")) &&
               !is_name_in({"else", "or", "and"})) {
        if (is_name("is")) return fail("you cannot chain multiple tests with is");
        EMBER_ASSIGN(ExprPtr arg, parse_primary(false));
        EMBER_ASSIGN(arg, parse_postfix(std::move(arg)));
        e->items.push_back(std::move(arg));
    }
    if (!negated) return e;
    auto n = make(ExprKind::NOT, is_tok);
    n->a = std::move(e);
    return n;
}

}  // namespace ember::jinja
