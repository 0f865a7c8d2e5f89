// lexer.h: template source → tokens, with the whitespace rules of transformers' chat-template
// environment (jinja2 with trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False).
//
//  - Line endings are normalized to "\n" and one trailing newline of the source is dropped.
//  - Text is split at "{{", "{%", "{#". A "-" after the opening delimiter strips all whitespace before
//    the tag; a "-" before the closing delimiter strips all whitespace after it; "+" disables the
//    automatic rules below for that side.
//  - lstrip_blocks: spaces/tabs between the start of a line and a {% or {# tag are removed.
//  - trim_blocks: the first newline after a %} or #} is removed.
//  - {% raw %}...{% endraw %} is passed through as text.
// Inside tags: names, strings (Python escapes), integers (0x/0o/0b, underscores), floats, and the
// operators of Jinja. Errors carry line:column (1-based, column in code points).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ember::jinja {

enum class TokType : uint8_t { DATA, VAR_BEGIN, VAR_END, BLOCK_BEGIN, BLOCK_END, NAME, STRING, INT, FLOAT, OP, END };

struct Token {
    TokType type;
    std::string text;  // data, name, decoded string, operator
    int64_t ival = 0;
    double fval = 0;
    int line = 1, col = 1;
};

// The source as jinja2 sees it: newlines normalized, one trailing newline removed.
std::string normalize_source(std::string_view source);

// Tokenizes a normalized source. The last token is END.
Expected<std::vector<Token>> tokenize(std::string_view normalized);

const char* tok_type_name(TokType t);

}  // namespace ember::jinja
