// Code point sets and UTF-8 range splitting: a code point range is cut into pieces whose encodings are the
// same length and share every byte position's range (the classic range-to-UTF-8 construction), each piece
// becoming one sequence of byte ranges.
#include "grammar/utf8.h"

#include <algorithm>

namespace ember::grammar {

CpSet cp_normalize(CpSet s) {
    std::sort(s.begin(), s.end(), [](const CpRange& a, const CpRange& b) { return a.lo < b.lo; });
    CpSet out;
    for (CpRange r : s) {
        if (r.lo > r.hi) continue;
        if (r.hi > kMaxCodePoint) r.hi = kMaxCodePoint;
        if (!out.empty() && r.lo <= out.back().hi + 1) out.back().hi = std::max(out.back().hi, r.hi);
        else out.push_back(r);
    }
    return out;
}

CpSet cp_complement(const CpSet& s) {
    CpSet out;
    uint32_t next = 0;
    for (const CpRange& r : s) {
        if (r.lo > next) out.push_back({next, r.lo - 1});
        next = r.hi + 1;
    }
    if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
    return out;
}

CpSet cp_union(const CpSet& a, const CpSet& b) {
    CpSet u = a;
    u.insert(u.end(), b.begin(), b.end());
    return cp_normalize(std::move(u));
}

CpSet cp_intersect(const CpSet& a, const CpSet& b) { return cp_complement(cp_union(cp_complement(a), cp_complement(b))); }

CpSet cp_minus(const CpSet& a, const CpSet& b) { return cp_intersect(a, cp_complement(b)); }

bool cp_contains(const CpSet& s, uint32_t c) {
    for (const CpRange& r : s)
        if (c >= r.lo && c <= r.hi) return true;
    return false;
}

void utf8_append(std::string& out, uint32_t c) {
    if (c < 0x80) {
        out += char(c);
    } else if (c < 0x800) {
        out += char(0xC0 | (c >> 6));
        out += char(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += char(0xE0 | (c >> 12));
        out += char(0x80 | ((c >> 6) & 0x3F));
        out += char(0x80 | (c & 0x3F));
    } else {
        out += char(0xF0 | (c >> 18));
        out += char(0x80 | ((c >> 12) & 0x3F));
        out += char(0x80 | ((c >> 6) & 0x3F));
        out += char(0x80 | (c & 0x3F));
    }
}

bool utf8_next(const std::string& s, size_t& i, uint32_t& c) {
    if (i >= s.size()) return false;
    const unsigned char b = static_cast<unsigned char>(s[i]);
    const int n = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
    if (n < 0 || i + size_t(n) >= s.size() + (n == 0 ? 1 : 0)) return false;
    if (n > 0 && i + size_t(n) > s.size() - 1) return false;
    c = n == 0 ? b : (b & (0x3Fu >> n));
    for (int k = 1; k <= n; ++k) {
        const unsigned char x = static_cast<unsigned char>(s[i + size_t(k)]);
        if ((x & 0xC0) != 0x80) return false;
        c = (c << 6) | (x & 0x3F);
    }
    static const uint32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
    if (c < kMin[n] || c > kMaxCodePoint || (c >= 0xD800 && c <= 0xDFFF)) return false;
    i += size_t(n) + 1;
    return true;
}

namespace {

int encoded_len(uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

void encode(uint32_t c, uint8_t* b) {
    std::string s;
    utf8_append(s, c);
    for (size_t i = 0; i < s.size(); ++i) b[i] = uint8_t(s[i]);
}

// lo..hi of equal encoded length: split until every byte position is a plain range.
void split_same_len(GrammarIR& g, uint32_t lo, uint32_t hi, std::vector<int>& alts) {
    const int n = encoded_len(lo);
    for (int i = 1; i < n; ++i) {
        const uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                split_same_len(g, lo, lo | m, alts);
                split_same_len(g, (lo | m) + 1, hi, alts);
                return;
            }
            if ((hi & m) != m) {
                split_same_len(g, lo, (hi & ~m) - 1, alts);
                split_same_len(g, hi & ~m, hi, alts);
                return;
            }
        }
    }
    uint8_t a[4], b[4];
    encode(lo, a);
    encode(hi, b);
    std::vector<int> seq;
    for (int k = 0; k < n; ++k) seq.push_back(g.bytes(ByteSet::range(a[k], b[k])));
    alts.push_back(g.seq(std::move(seq)));
}

}  // namespace

int utf8_expr(GrammarIR& g, const CpSet& s) {
    static const uint32_t kBounds[][2] = {{0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF},
                                          {0x10000, kMaxCodePoint}};
    std::vector<int> alts;
    ByteSet ascii;
    for (const CpRange& r : s)
        for (const auto& bd : kBounds) {
            const uint32_t lo = std::max(r.lo, bd[0]), hi = std::min(r.hi, bd[1]);
            if (lo > hi) continue;
            if (hi < 0x80) ascii.add_range(uint8_t(lo), uint8_t(hi));  // one byte set for all ASCII pieces
            else split_same_len(g, lo, hi, alts);
        }
    if (!ascii.empty()) alts.insert(alts.begin(), g.bytes(ascii));
    return g.alt(std::move(alts));
}

}  // namespace ember::grammar
