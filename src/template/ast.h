// ast.h: the parsed form of a template (jinja2's node types, reduced to what chat templates use).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace ember::jinja {

struct Expr;
struct Node;
using ExprPtr = std::unique_ptr<Expr>;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

enum class ExprKind {
    CONST,     // value
    NAME,      // name
    LIST,      // items
    TUPLE,     // items
    DICT,      // items: key, value, key, value, ...
    GETATTR,   // a.name
    GETITEM,   // a[b]
    SLICE,     // items: start, stop, step (each may be null); only as a GETITEM index
    CALL,      // a(items..., kwargs..., *dyn_args, **dyn_kwargs)
    FILTER,    // a|name(items..., kwargs...); a is null inside {% filter %} and {% set x | f %}
    TEST,      // a is name(items..., kwargs...)
    NOT,       // not a
    NEG,       // -a
    POS,       // +a
    BINOP,     // a op b; op in + - * / // % **
    AND,       // a and b
    OR,        // a or b
    CONCAT,    // items joined with ~
    COMPARE,   // a (ops[i] items[i])...; ops: == != < <= > >= in notin
    COND,      // b if a else c  (c may be null)
    NSREF,     // name.attr as an assignment target
};

struct Expr {
    ExprKind kind;
    int line = 0, col = 0;
    Value value;
    std::string name;
    std::vector<ExprPtr> items;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
    std::vector<std::string> ops;
    ExprPtr a, b, c;
    ExprPtr dyn_args, dyn_kwargs;
};

struct MacroNode {
    std::string name;
    std::vector<std::string> params;
    std::vector<ExprPtr> defaults;  // one per parameter; null where there is none
    Body body;
};

enum class NodeKind { TEXT, PRINT, IF, FOR, SET, SET_BLOCK, MACRO, FILTER_BLOCK, WITH, BREAK, CONTINUE, SCOPE };

struct Node {
    NodeKind kind;
    int line = 0, col = 0;
    std::string text;                                // TEXT
    ExprPtr expr;                                    // PRINT, SET value, FOR iterable, FILTER_BLOCK/SET_BLOCK filter
    ExprPtr target;                                  // SET, SET_BLOCK, FOR
    ExprPtr cond;                                    // FOR ... if cond
    std::vector<std::pair<ExprPtr, Body>> branches;  // IF / ELIF
    Body body, else_body;                            // FOR, IF else, SET_BLOCK, FILTER_BLOCK, WITH, SCOPE
    std::vector<ExprPtr> targets, values;            // WITH
    std::unique_ptr<MacroNode> macro;                // MACRO
    bool uses_loop = true;                           // FOR: the body mentions `loop` (else it is not built)
};

}  // namespace ember::jinja
