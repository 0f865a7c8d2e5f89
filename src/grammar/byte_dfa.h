// Byte DFAs (ir.h ByteDfa) for lexemes that need intersection or complement: a JSON string with a pattern and
// a length, property names other than the listed ones, numbers in a range that are multiples of m.
#pragma once
#include <string_view>

#include "core/status.h"
#include "grammar/ir.h"

namespace ember::grammar {

// The DFA of expression `expr` of `lex` (which must not reference rules), minimal.
Expected<ByteDfa> dfa_from_expr(GrammarIR& lex, int expr);
Expected<ByteDfa> dfa_intersect(const ByteDfa& a, const ByteDfa& b);  // minimal; an error beyond the size limit
ByteDfa dfa_complement(const ByteDfa& a);                    // all byte strings a rejects; minimal
ByteDfa dfa_minimize(const ByteDfa& a);                      // trimmed (every state can accept) and minimal
inline bool dfa_empty(const ByteDfa& a) { return a.n == 0; }  // (after minimize)
bool dfa_matches(const ByteDfa& a, std::string_view s);
// The expression of d in g (NOTHING when d is empty).
int dfa_expr(GrammarIR& g, ByteDfa d);

}  // namespace ember::grammar
