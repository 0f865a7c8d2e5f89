// JSON lexemes as grammar IR: string literals and strings with constraints (length in characters, ECMAScript
// patterns, formats), numbers with bounds and multipleOf. Constraints combine by intersecting byte DFAs
// (byte_dfa.h), so e.g. a pattern and a maxLength are both enforced exactly.
//
// Strings are matched in their JSON encoding. A constrained character class admits the raw UTF-8 of its
// characters and, for `"`, `\`, `/` and control characters, their escapes (\" \\ \/ \b \f \n \r \t \u00XX);
// \uXXXX escapes of other characters only where any character is allowed.
// Numbers: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; with bounds or multipleOf the exponent form is not
// generated (a bounded number is written in plain decimal notation) and integers are digits only.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "grammar/ir.h"
#include "grammar/utf8.h"

namespace ember::grammar::json {

// A finite decimal: sign, integer digits without leading zeros ("0" for none), fraction digits without
// trailing zeros.
struct Decimal {
    bool neg = false;
    std::string int_digits = "0", frac_digits;
    static Expected<Decimal> parse(const std::string& text);  // a JSON number's text (exponents allowed)
    bool is_zero() const { return int_digits == "0" && frac_digits.empty(); }
    bool is_integer() const { return frac_digits.empty(); }
};

// The canonical JSON encoding of a string, with quotes (raw UTF-8; `"`, `\` and controls escaped).
std::string encode_string(const std::string& s);

// One character of `chars`, JSON-encoded (inside the quotes).
int string_char_expr(GrammarIR& g, const CpSet& chars);

struct StringConstraints {
    int64_t min_length = 0, max_length = -1;  // characters; -1 = unbounded
    std::vector<std::string> patterns;        // ECMAScript, unanchored (JSON Schema semantics)
    std::string format;                       // "" or one of known_format()
};
bool known_format(const std::string& f);
// The whole string literal (with quotes). Errors: bad patterns, lengths beyond the limits.
Expected<int> string_expr(GrammarIR& g, const StringConstraints& c);

struct NumberConstraints {
    bool integer = false;
    std::optional<Decimal> min, max;  // bounds, inclusive unless *_exclusive
    bool min_exclusive = false, max_exclusive = false;
    std::optional<Decimal> multiple_of;  // > 0
};
Expected<int> number_expr(GrammarIR& g, const NumberConstraints& c);

}  // namespace ember::grammar::json
