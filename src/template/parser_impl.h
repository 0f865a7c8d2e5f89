// parser_impl.h: the Parser class shared by parser.cpp (statements) and parser_expr.cpp
// (expressions); see parser.h. Internal to src/template/.
#pragma once
#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "template/parser.h"

namespace ember::jinja {

class Parser {
public:
    explicit Parser(const std::vector<Token>& t) : t_(t) {}

    Expected<Body> parse() {
        EMBER_ASSIGN(Body body, subparse({}));
        if (cur().type != TokType::END) return fail("unexpected '" + cur().text + "'");
        return body;
    }

private:
    using Names = std::initializer_list<const char*>;

    // ---- token helpers ----
    const Token& cur() const { return t_[i_]; }
    const Token& look(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
    void advance() {
        if (i_ + 1 < t_.size()) ++i_;
    }
    bool is_op(const char* op) const { return cur().type == TokType::OP && cur().text == op; }
    bool is_name(const char* n) const { return cur().type == TokType::NAME && cur().text == n; }
    bool is_name_in(Names names) const {
        for (const char* n : names)
            if (is_name(n)) return true;
        return false;
    }
    bool skip_op(const char* op) {
        if (!is_op(op)) return false;
        advance();
        return true;
    }
    bool skip_name(const char* n) {
        if (!is_name(n)) return false;
        advance();
        return true;
    }
    std::string describe(const Token& t) const {
        if (t.type == TokType::NAME || t.type == TokType::OP) return "'" + t.text + "'";
        return tok_type_name(t.type);
    }
    Status fail(const std::string& msg) const { return fail_at(cur(), msg); }
    Status fail_at(const Token& t, const std::string& msg) const {
        return errorf("template syntax error at %d:%d: %s", t.line, t.col, msg.c_str());
    }
    Status expect_op(const char* op) {
        if (!skip_op(op)) return fail(std::string("expected '") + op + "', got " + describe(cur()));
        return Status::ok();
    }
    Status expect_type(TokType ty) {
        if (cur().type != ty) return fail(std::string("expected ") + tok_type_name(ty) + ", got " + describe(cur()));
        advance();
        return Status::ok();
    }
    Status expect_name(const char* n) {
        if (!skip_name(n)) return fail(std::string("expected '") + n + "', got " + describe(cur()));
        return Status::ok();
    }
    Expected<std::string> expect_any_name() {
        if (cur().type != TokType::NAME) return fail("expected a name, got " + describe(cur()));
        std::string n = cur().text;
        advance();
        return n;
    }

    struct DepthGuard {
        explicit DepthGuard(int& d) : d_(d) { ++d_; }
        ~DepthGuard() { --d_; }
        int& d_;
    };
    Status check_depth() const {
        if (depth_ > kMaxParseDepth) return fail("template nested too deeply");
        return Status::ok();
    }

    ExprPtr make(ExprKind k, const Token& at) {
        auto e = std::make_unique<Expr>();
        e->kind = k;
        e->line = at.line;
        e->col = at.col;
        return e;
    }
    NodePtr node(NodeKind k, const Token& at) {
        auto n = std::make_unique<Node>();
        n->kind = k;
        n->line = at.line;
        n->col = at.col;
        return n;
    }

    // ---- statements ----
    Expected<Body> subparse(std::vector<std::string> end_names);
    // Body of a block statement: the opening tag's %} , then statements up to one of end_names.
    Expected<Body> parse_statements(std::vector<std::string> end_names, bool drop_needle);
    Expected<NodePtr> parse_statement();
    Expected<NodePtr> parse_for();
    Expected<NodePtr> parse_if();
    Expected<NodePtr> parse_set();
    Expected<NodePtr> parse_macro();
    Expected<NodePtr> parse_filter_block();
    Expected<NodePtr> parse_with();
    Expected<NodePtr> parse_print();
    // ---- assignment targets ----
    Expected<ExprPtr> parse_assign_target(bool with_tuple, bool name_only, Names extra_end, bool with_namespace);
    static bool assignable(const Expr& e);

    // ---- expressions ----
    bool is_tuple_end(Names extra_end) const;
    Expected<ExprPtr> parse_tuple(bool simplified, bool with_condexpr, Names extra_end, bool explicit_parens,
                                  bool with_namespace = false);
    Expected<ExprPtr> parse_expression(bool with_condexpr);
    Expected<ExprPtr> parse_condexpr();
    Expected<ExprPtr> parse_or();
    Expected<ExprPtr> parse_and();
    Expected<ExprPtr> parse_not();
    Expected<ExprPtr> parse_compare();
    Expected<ExprPtr> binary_chain(Names ops, Expected<ExprPtr> (Parser::*next)());
    Expected<ExprPtr> parse_math1() { return binary_chain({"+", "-"}, &Parser::parse_concat); }
    Expected<ExprPtr> parse_math2() { return binary_chain({"*", "/", "//", "%"}, &Parser::parse_pow); }
    Expected<ExprPtr> parse_pow() { return binary_chain({"**"}, &Parser::parse_unary_filtered); }
    Expected<ExprPtr> parse_concat();
    Expected<ExprPtr> parse_unary_filtered() { return parse_unary(true); }
    Expected<ExprPtr> parse_unary(bool with_filter);
    Expected<ExprPtr> parse_primary(bool with_namespace);
    Expected<ExprPtr> parse_list();
    Expected<ExprPtr> parse_dict();
    Expected<ExprPtr> parse_postfix(ExprPtr node);
    Expected<ExprPtr> parse_filter_expr(ExprPtr node);
    Expected<ExprPtr> parse_subscript(ExprPtr node);
    Expected<ExprPtr> parse_subscribed();
    // ( args, name=kwarg, *dyn_args, **dyn_kwargs ) into e->items / e->kwargs / e->dyn_*.
    Status parse_call_args(Expr& e);
    Expected<ExprPtr> parse_call(ExprPtr node);
    Expected<std::string> dotted_name();
    Expected<ExprPtr> parse_filter(ExprPtr node, bool start_inline);
    Expected<ExprPtr> parse_test(ExprPtr node);

    const std::vector<Token>& t_;
    size_t i_ = 0;
    int depth_ = 0;
    int loop_depth_ = 0;
};

}  // namespace ember::jinja
