// Unicode code point sets and their UTF-8 encodings as byte-level grammar expressions.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/ir.h"

namespace ember::grammar {

struct CpRange {
    uint32_t lo, hi;  // inclusive
    bool operator==(const CpRange& o) const { return lo == o.lo && hi == o.hi; }
};
// A set of code points: sorted, disjoint, non-adjacent ranges within [0, 0x10FFFF] (surrogates allowed in the
// set but never encoded: UTF-8 has no surrogates).
using CpSet = std::vector<CpRange>;

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

CpSet cp_normalize(CpSet s);                 // sort, merge
CpSet cp_complement(const CpSet& s);         // within [0, 0x10FFFF]
CpSet cp_union(const CpSet& a, const CpSet& b);
CpSet cp_intersect(const CpSet& a, const CpSet& b);
CpSet cp_minus(const CpSet& a, const CpSet& b);
bool cp_contains(const CpSet& s, uint32_t c);
inline CpSet cp_any() { return {{0, kMaxCodePoint}}; }

// The expression matching the UTF-8 encoding of exactly one code point of s (surrogates skipped).
int utf8_expr(GrammarIR& g, const CpSet& s);
// Appends the UTF-8 encoding of code point c (c ≤ 0x10FFFF) to out.
void utf8_append(std::string& out, uint32_t c);
// Decodes one UTF-8 code point at s[i] (advancing i); returns false on invalid UTF-8.
bool utf8_next(const std::string& s, size_t& i, uint32_t& c);

}  // namespace ember::grammar
