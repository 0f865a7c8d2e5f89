// parser.h: tokens → AST, following jinja2's grammar (jinja2/parser.py) for the supported subset.
//
// Statements: for (tuple targets, `if` filter, else), if/elif/else, set (names, tuples, ns.attr,
// block form with optional filter), macro, filter blocks, with, break/continue, print, and
// transformers' {% generation %} (rendered as its body). Unknown or unsupported tags (extends,
// include, import, block, call, recursive loops, ...) are syntax errors.
// Expression precedence, loosest first: `x if c else y`, or, and, not, comparisons (chained; in,
// not in), + -, ~, * / // %, **, unary - +, then primaries with .attr [index/slice] (call) and the
// |filter / is test chain.
#pragma once
#include <vector>

#include "core/status.h"
#include "template/ast.h"
#include "template/lexer.h"

namespace ember::jinja {

inline constexpr int kMaxParseDepth = 200;  // nesting of expressions and blocks

Expected<Body> parse_template(const std::vector<Token>& tokens);

}  // namespace ember::jinja
