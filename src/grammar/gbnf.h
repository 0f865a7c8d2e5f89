// GBNF, llama.cpp's grammar syntax → grammar IR.
//   name ::= alternatives          (the start rule is `root`; `#` starts a comment)
//   elements: "literal" (escapes \n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH), [char class] / [^...] with ranges,
//   `.` (any character), rule names, ( groups ), postfix * + ? {m} {m,} {m,n} {,n}; `|` separates alternatives.
// A rule ends at a newline unless inside parentheses or continued by `|` (after `::=` / `|` newlines are fine).
// Errors name the line: unknown rules, a missing root, token references (<...>), left recursion (compile).
#pragma once
#include <string_view>

#include "core/status.h"
#include "grammar/ir.h"

namespace ember::grammar {

Expected<GrammarIR> parse_gbnf(std::string_view text);

// The grammar of a regular expression matched in full (regex.h syntax): `--regex`.
Expected<GrammarIR> regex_grammar(std::string_view pattern);

}  // namespace ember::grammar
