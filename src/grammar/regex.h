// Regular expressions (ECMAScript syntax, as JSON Schema "pattern" and `--regex` use them) → grammar IR.
// Supported: literals, escapes (\d \D \w \W \s \S \n \r \t \f \v \0 \xHH \uHHHH \u{H..} \cX, escaped
// punctuation), classes [..] / [^..] with ranges, `.` (any character but line terminators), groups ( ) (?: )
// (?<name> ), alternation, quantifiers * + ? {n} {n,} {n,m} (lazy forms too: same language), and the anchors
// ^ / $ at the start / end of a top-level alternative. Refused with an error naming the construct: lookaround,
// backreferences, word boundaries, possessive quantifiers, Unicode property escapes, anchors elsewhere.
#pragma once
#include <functional>
#include <string_view>

#include "core/status.h"
#include "grammar/ir.h"
#include "grammar/utf8.h"

namespace ember::grammar {

// How one character of the pattern becomes bytes: a code point set → expression. Default: its UTF-8.
using CharEncoder = std::function<int(GrammarIR&, const CpSet&)>;

enum class RegexMatch {
    FULL,    // the whole text must match (anchors at the edges are no-ops)
    SEARCH,  // JSON Schema "pattern": a match anywhere; an alternative without ^ / $ may have any text around it
};

Expected<int> regex_to_ir(GrammarIR& g, std::string_view pattern, RegexMatch mode, const CharEncoder& enc = nullptr);

}  // namespace ember::grammar
