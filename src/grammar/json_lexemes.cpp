// JSON strings and numbers with constraints (json_lexemes.h).
#include "grammar/json_lexemes.h"

#include <algorithm>

#include "grammar/byte_dfa.h"
#include "grammar/regex.h"

namespace ember::grammar::json {

namespace {

constexpr int64_t kMaxLength = 100000;  // minLength / maxLength beyond this are refused
constexpr int kMaxDigits = 400;         // decimal digits of a bound or multipleOf

// Formats as RFC 3339 / the common validators read them: years 0001-9999, days within their month (Feb 29 in
// leap years only), times without leap seconds, "T" and "Z" upper case.
#define EMBER_YEAR "(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
#define EMBER_LEAP "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
#define EMBER_DATE                                                                                       \
    "(" EMBER_YEAR "-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))" \
    "|" EMBER_LEAP "-02-29)"
#define EMBER_TIME "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
const char* kFormats[][2] = {
    {"date", EMBER_DATE},
    {"time", EMBER_TIME},
    {"date-time", EMBER_DATE "T" EMBER_TIME},
    {"email", R"([^\s@"]+@[^\s@"]+)"},
    {"uuid", R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"},
    {"uri", R"([A-Za-z][A-Za-z0-9+.-]*:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*)"},
    {"ipv4", R"((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3})"},
    {"hostname", R"([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*)"},
};
#undef EMBER_YEAR
#undef EMBER_LEAP
#undef EMBER_DATE
#undef EMBER_TIME

const char* format_regex(const std::string& f) {
    for (auto& e : kFormats)
        if (f == e[0]) return e[1];
    return nullptr;
}

int hex_digit(GrammarIR& g) {
    ByteSet s = ByteSet::range('0', '9') | ByteSet::range('a', 'f') | ByteSet::range('A', 'F');
    return g.bytes(s);
}

// A hex digit equal to v (either case).
int hex_of(GrammarIR& g, int v) {
    const char* d = "0123456789abcdef";
    ByteSet s = ByteSet::of(uint8_t(d[v]));
    if (v >= 10) s.add(uint8_t(d[v] - 32));
    return g.bytes(s);
}

// ---- decimal digit strings ----------------------------------------------------------------------------------

std::string inc(std::string d) {  // d + 1
    int i = int(d.size()) - 1;
    while (i >= 0 && d[size_t(i)] == '9') d[size_t(i--)] = '0';
    if (i < 0) d.insert(d.begin(), '1');
    else d[size_t(i)]++;
    return d;
}

std::string dec(std::string d) {  // d − 1, d > 0
    int i = int(d.size()) - 1;
    while (d[size_t(i)] == '0') d[size_t(i--)] = '9';
    d[size_t(i)]--;
    if (d.size() > 1 && d[0] == '0') d.erase(d.begin());
    return d;
}

bool less(const std::string& a, const std::string& b) {  // integers without leading zeros
    return a.size() != b.size() ? a.size() < b.size() : a < b;
}

int digits(GrammarIR& g, char lo, char hi) { return g.bytes(ByteSet::range(uint8_t(lo), uint8_t(hi))); }
int any_digits(GrammarIR& g, int n) { return g.repeat(digits(g, '0', '9'), n, n); }

// Digit strings of length |s| that are ≥ s (ge) or ≤ s (!ge).
int same_len_bound(GrammarIR& g, const std::string& s, size_t i, bool ge) {
    if (i == s.size()) return g.empty();
    const char c = s[i];
    std::vector<int> alts = {g.seq({g.byte(uint8_t(c)), same_len_bound(g, s, i + 1, ge)})};
    if (ge && c < '9') alts.push_back(g.seq({digits(g, char(c + 1), '9'), any_digits(g, int(s.size() - i - 1))}));
    if (!ge && c > '0') alts.push_back(g.seq({digits(g, '0', char(c - 1)), any_digits(g, int(s.size() - i - 1))}));
    return g.alt(alts);
}

// Digit strings of one length in [lo, hi] (same length, lo ≤ hi).
int same_len_range(GrammarIR& g, const std::string& lo, const std::string& hi, size_t i) {
    if (i == lo.size()) return g.empty();
    if (lo[i] == hi[i]) return g.seq({g.byte(uint8_t(lo[i])), same_len_range(g, lo, hi, i + 1)});
    std::vector<int> alts = {g.seq({g.byte(uint8_t(lo[i])), same_len_bound(g, lo, i + 1, true)}),
                             g.seq({g.byte(uint8_t(hi[i])), same_len_bound(g, hi, i + 1, false)})};
    if (hi[i] - lo[i] > 1)
        alts.push_back(g.seq({digits(g, char(lo[i] + 1), char(hi[i] - 1)), any_digits(g, int(lo.size() - i - 1))}));
    return g.alt(alts);
}

// Integers (no leading zeros) in [lo, hi]; hi empty = unbounded.
int int_range(GrammarIR& g, const std::string& lo, const std::string& hi) {
    if (!hi.empty() && less(hi, lo)) return g.nothing();
    std::vector<int> alts;
    const size_t max_len = hi.empty() ? lo.size() : hi.size();
    for (size_t L = lo.size(); L <= max_len; ++L) {
        std::string a(L, '0');  // smallest L-digit integer (or lo)
        if (L > 1) a[0] = '1';
        if (L == lo.size()) a = lo;
        const std::string b = (!hi.empty() && L == hi.size()) ? hi : std::string(L, '9');
        alts.push_back(same_len_range(g, a, b, 0));
    }
    if (hi.empty())  // every longer integer
        alts.push_back(g.seq({digits(g, '1', '9'), g.repeat(digits(g, '0', '9'), int(lo.size()), -1)}));
    return g.alt(alts);
}

// Non-empty fraction digit strings F with 0.F ≥ 0.D (ge) or ≤ 0.D, strict or not. D has no trailing zeros.
int frac_cmp(GrammarIR& g, const std::string& d, size_t i, bool ge, bool strict) {
    const int any = g.star(digits(g, '0', '9'));
    if (i == d.size()) {
        if (ge) return strict ? g.seq({any, digits(g, '1', '9'), any}) : g.plus(digits(g, '0', '9'));
        return strict ? g.nothing() : g.plus(g.byte('0'));
    }
    const char c = d[i];
    std::vector<int> alts;
    // Here F must have a digit at position i; the remaining digits compare with d[i+1..] — or F ends at i, which
    // is F's digit c followed by implicit zeros (compare 0 with the rest of d: below it, since d has no trailing 0).
    // F[0] == c: either F ends here (0.F[1..] = 0 against d[i+1..]: equal when that is empty, else below it)
    // or the rest of F compares with d[i+1..].
    alts.push_back(g.seq({g.byte(uint8_t(c)), frac_cmp(g, d, i + 1, ge, strict)}));
    const bool ends_ok = i + 1 == d.size() ? !strict : !ge;
    if (ends_ok) alts.push_back(g.byte(uint8_t(c)));
    if (ge && c < '9') alts.push_back(g.seq({digits(g, char(c + 1), '9'), any}));
    if (!ge && c > '0') alts.push_back(g.seq({digits(g, '0', char(c - 1)), any}));
    return g.alt(alts);
}

// Magnitudes M (no sign, plain decimal) with M ≥ A (ge) or M ≤ A, strict or not; integer_only: no fraction.
int magnitude_bound(GrammarIR& g, const Decimal& a, bool ge, bool strict, bool integer_only) {
    const int frac_any = g.opt(g.seq({g.byte('.'), g.plus(digits(g, '0', '9'))}));
    const int fr = integer_only ? g.empty() : frac_any;
    std::vector<int> alts;
    const std::string& I = a.int_digits;
    // Integer part strictly beyond I: any fraction.
    if (ge) alts.push_back(g.seq({int_range(g, inc(I), ""), fr}));
    else if (I != "0") alts.push_back(g.seq({int_range(g, "0", dec(I)), fr}));
    // Integer part equal to I: compare fractions (no fraction = 0).
    const bool empty_ok = ge ? (!strict && a.frac_digits.empty()) : !strict || !a.frac_digits.empty();
    std::vector<int> eq;
    if (empty_ok) eq.push_back(g.empty());
    if (!integer_only) eq.push_back(g.seq({g.byte('.'), frac_cmp(g, a.frac_digits, 0, ge, strict)}));
    alts.push_back(g.seq({g.literal(I), g.alt(eq)}));
    return g.alt(alts);
}

// Numbers (plain decimal, optional '-') with v ≥ b (ge) or v ≤ b.
int signed_bound(GrammarIR& g, const Decimal& b, bool ge, bool strict, bool integer_only) {
    const int frac_any = integer_only ? g.empty() : g.opt(g.seq({g.byte('.'), g.plus(digits(g, '0', '9'))}));
    const int mag_any = g.seq({int_range(g, "0", ""), frac_any});
    const int minus = g.byte('-');
    Decimal m = b;
    m.neg = false;
    const bool b_nonneg = !b.neg || b.is_zero();
    if (ge) {
        if (b_nonneg) {
            if (b.is_zero() && !strict) return g.alt({mag_any, g.seq({minus, g.literal("0"), integer_only ? g.empty() : g.opt(g.seq({g.byte('.'), g.plus(g.byte('0'))}))})});
            return magnitude_bound(g, m, true, strict, integer_only);
        }
        return g.alt({mag_any, g.seq({minus, magnitude_bound(g, m, false, strict, integer_only)})});
    }
    if (b.is_zero() && strict) return g.seq({minus, magnitude_bound(g, m, true, true, integer_only)});  // not "-0"
    if (b_nonneg) return g.alt({g.seq({minus, mag_any}), magnitude_bound(g, m, false, strict, integer_only)});
    return g.seq({minus, magnitude_bound(g, m, true, strict, integer_only)});
}

// Numbers (optional '-', plain decimal) that are multiples of m > 0: with p = m·10^d (d = m's fraction digits),
// x is a multiple iff x·10^d ≡ 0 (mod p). The integer digits and the first d fraction digits are read into a
// remainder modulo p; fraction digits beyond d must be zeros.
Expected<ByteDfa> multiple_dfa(const Decimal& m, bool integer_only) {
    const int64_t d = int64_t(m.frac_digits.size());
    const std::string pd = m.int_digits + m.frac_digits;
    EMBER_REQUIRE(pd.size() <= 7, "multipleOf %s%s%s is too fine or too large (at most 7 significant digits)",
                  m.int_digits.c_str(), d ? "." : "", m.frac_digits.c_str());
    const int64_t p = std::stoll(pd);
    EMBER_REQUIRE(p > 0, "multipleOf must be > 0");
    EMBER_REQUIRE(p * (d + 3) <= 2000000, "multipleOf: automaton too large");
    // States: 0 start, 1 after '-', then phase·p + r: phase 0 = integer digits, phase 1 + k = k fraction digits
    // read (k capped at d + 1 = "more than d").
    auto id = [&](int64_t phase, int64_t r) { return int32_t(2 + phase * p + r); };
    ByteDfa a;
    a.n = int(2 + (d + 3) * p);
    a.next.assign(size_t(a.n) * 256, -1);
    a.accept.assign(size_t(a.n), 0);
    auto set = [&](int32_t s, int b, int32_t t) { a.next[size_t(s) * 256 + size_t(b)] = t; };
    auto pow10 = [&](int64_t e) {
        int64_t x = 1 % p;
        for (int64_t k = 0; k < e; ++k) x = x * 10 % p;
        return x;
    };
    set(0, '-', 1);
    for (int c = '0'; c <= '9'; ++c) {
        set(0, c, id(0, (c - '0') % p));
        set(1, c, id(0, (c - '0') % p));
    }
    for (int64_t r = 0; r < p; ++r) {
        for (int c = '0'; c <= '9'; ++c) set(id(0, r), c, id(0, (r * 10 + c - '0') % p));
        a.accept[size_t(id(0, r))] = r * pow10(d) % p == 0;
        if (integer_only) continue;
        set(id(0, r), '.', id(1, r));
        for (int64_t k = 0; k <= d + 1; ++k) {
            const int32_t s = id(1 + k, r);
            if (k < d) {
                for (int c = '0'; c <= '9'; ++c) set(s, c, id(2 + k, (r * 10 + c - '0') % p));
            } else {
                set(s, '0', id(1 + std::min(k + 1, d + 1), r));
            }
            a.accept[size_t(s)] = k >= 1 && (k <= d ? r * pow10(d - k) % p : r) == 0;
        }
    }
    return dfa_minimize(a);
}

// One JSON-encoded string character (any character), as a DFA; its accepting states have no transitions.
const ByteDfa& char_dfa() {
    static const ByteDfa d = [] {
        GrammarIR lex;
        return dfa_from_expr(lex, string_char_expr(lex, cp_any())).value();
    }();
    return d;
}

// Sequences of min..max JSON-encoded characters (max < 0: unbounded), built directly as the product of the
// character DFA with a counter (no subset construction: maxLength 10000 stays linear).
Expected<ByteDfa> length_dfa(int64_t min, int64_t max) {
    const ByteDfa& c = char_dfa();
    const int64_t K = max >= 0 ? max : min;  // counter states 0..K (saturating at min when unbounded)
    std::vector<int32_t> inner_id(size_t(c.n), -1);
    int32_t m = 0;
    for (int s = 0; s < c.n; ++s)
        if (!c.accept[size_t(s)]) inner_id[size_t(s)] = m++;
    EMBER_REQUIRE((K + 1) * m <= 4000000, "string length bounds too large");
    ByteDfa d;
    d.n = int((K + 1) * m);
    d.next.assign(size_t(d.n) * 256, -1);
    d.accept.assign(size_t(d.n), 0);
    auto id = [&](int64_t k, int32_t s) { return int32_t(k * m + s); };
    for (int64_t k = 0; k <= K; ++k) {
        d.accept[size_t(id(k, 0))] = k >= min;
        for (int s = 0; s < c.n; ++s) {
            if (c.accept[size_t(s)]) continue;
            for (int b = 0; b < 256; ++b) {
                const int32_t t = c.next[size_t(s) * 256 + size_t(b)];
                if (t < 0) continue;
                int32_t to;
                if (c.accept[size_t(t)]) {
                    const int64_t k1 = max >= 0 ? k + 1 : std::min(k + 1, K);
                    if (k1 > K) continue;
                    to = id(k1, 0);
                } else {
                    to = id(k, inner_id[size_t(t)]);
                }
                d.next[size_t(id(k, inner_id[size_t(s)])) * 256 + size_t(b)] = to;
            }
        }
    }
    return d;
}

}  // namespace

Expected<Decimal> Decimal::parse(const std::string& text) {
    size_t i = 0;
    Decimal r;
    if (i < text.size() && text[i] == '-') { r.neg = true; ++i; }
    std::string mant;
    int64_t point = -1;
    for (; i < text.size() && (isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'); ++i) {
        if (text[i] == '.') {
            if (point >= 0) return errorf("bad number '%s'", text.c_str());
            point = int64_t(mant.size());
        } else {
            mant += text[i];
        }
    }
    if (mant.empty()) return errorf("bad number '%s'", text.c_str());
    if (point < 0) point = int64_t(mant.size());
    if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
        ++i;
        const std::string e = text.substr(i);
        if (e.empty() || e.size() > 6) return errorf("bad number '%s'", text.c_str());
        point += std::stoll(e);
        i = text.size();
    }
    if (i != text.size()) return errorf("bad number '%s'", text.c_str());
    if (point > kMaxDigits || point < -kMaxDigits) return errorf("number '%s' is beyond %d digits", text.c_str(), kMaxDigits);
    if (point < 0) {
        mant = std::string(size_t(-point), '0') + mant;
        point = 0;
    }
    while (int64_t(mant.size()) < point) mant += '0';
    r.int_digits = mant.substr(0, size_t(point));
    r.frac_digits = mant.substr(size_t(point));
    while (r.int_digits.size() > 1 && r.int_digits[0] == '0') r.int_digits.erase(r.int_digits.begin());
    if (r.int_digits.empty()) r.int_digits.push_back('0');
    while (!r.frac_digits.empty() && r.frac_digits.back() == '0') r.frac_digits.pop_back();
    if (r.is_zero()) r.neg = false;
    return r;
}

std::string encode_string(const std::string& s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\n': o += "\\n"; break;
            case '\r': o += "\\r"; break;
            case '\t': o += "\\t"; break;
            case '\b': o += "\\b"; break;
            case '\f': o += "\\f"; break;
            default:
                if (c < 0x20) {
                    const char* h = "0123456789abcdef";
                    o += "\\u00";
                    o += h[c >> 4];
                    o += h[c & 15];
                } else {
                    o += char(c);
                }
        }
    }
    return o + "\"";
}

int string_char_expr(GrammarIR& g, const CpSet& chars) {
    std::vector<int> alts;
    const CpSet special = cp_normalize({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
    alts.push_back(utf8_expr(g, cp_minus(chars, special)));
    static const std::pair<uint32_t, char> kShort[] = {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'\b', 'b'},
                                                       {'\f', 'f'}, {'\n', 'n'}, {'\r', 'r'}, {'\t', 't'}};
    const int bs = g.byte('\\');
    for (auto [cp, e] : kShort)
        if (cp_contains(chars, cp)) alts.push_back(g.seq({bs, g.byte(uint8_t(e))}));
    if (chars == cp_any()) {
        alts.push_back(g.seq({bs, g.byte('u'), g.repeat(hex_digit(g), 4, 4)}));
    } else {
        for (uint32_t c = 0; c < 0x20; ++c)
            if (cp_contains(chars, c))
                alts.push_back(g.seq({bs, g.byte('u'), g.byte('0'), g.byte('0'), hex_of(g, int(c >> 4)), hex_of(g, int(c & 15))}));
    }
    return g.alt(alts);
}

bool known_format(const std::string& f) { return format_regex(f) != nullptr; }

Expected<int> string_expr(GrammarIR& g, const StringConstraints& c) {
    EMBER_REQUIRE(c.max_length <= kMaxLength && c.min_length <= kMaxLength,
                  "string length bounds beyond %lld are not supported", (long long)kMaxLength);
    const int quote = g.byte('"');
    if (c.max_length >= 0 && c.max_length < c.min_length) return g.nothing();
    if (c.patterns.empty() && c.format.empty()) {
        if (c.min_length == 0 && c.max_length < 0) return g.seq({quote, g.star(string_char_expr(g, cp_any())), quote});
        EMBER_ASSIGN(ByteDfa d, length_dfa(c.min_length, c.max_length));
        return g.seq({quote, dfa_expr(g, std::move(d)), quote});
    }
    // Intersect the content DFAs: each pattern (search), the format (full match), the length.
    GrammarIR lex;
    CharEncoder enc = [](GrammarIR& gg, const CpSet& s) { return string_char_expr(gg, s); };
    std::vector<int> parts;
    for (const std::string& p : c.patterns) {
        EMBER_ASSIGN(int e, regex_to_ir(lex, p, RegexMatch::SEARCH, enc));
        parts.push_back(e);
    }
    if (!c.format.empty()) {
        const char* re = format_regex(c.format);
        EMBER_REQUIRE(re != nullptr, "string format '%s' is not supported", c.format.c_str());
        EMBER_ASSIGN(int e, regex_to_ir(lex, re, RegexMatch::FULL, enc));
        parts.push_back(e);
    }
    ByteDfa d;
    for (size_t i = 0; i < parts.size(); ++i) {
        EMBER_ASSIGN(ByteDfa x, dfa_from_expr(lex, parts[i]));
        if (i == 0) {
            d = std::move(x);
        } else {
            EMBER_ASSIGN(d, dfa_intersect(d, x));
        }
    }
    if (c.min_length > 0 || c.max_length >= 0) {
        EMBER_ASSIGN(ByteDfa len, length_dfa(c.min_length, c.max_length));
        EMBER_ASSIGN(d, dfa_intersect(d, len));
    }
    return g.seq({quote, dfa_expr(g, std::move(d)), quote});
}

Expected<int> number_expr(GrammarIR& g, const NumberConstraints& c) {
    const bool plain = !c.min && !c.max && !c.multiple_of;
    const int minus = g.opt(g.byte('-'));
    const int int_part = g.alt({g.byte('0'), g.seq({digits(g, '1', '9'), g.star(digits(g, '0', '9'))})});
    if (plain) {
        if (c.integer) return g.seq({minus, int_part});
        const int frac = g.opt(g.seq({g.byte('.'), g.plus(digits(g, '0', '9'))}));
        const int exp = g.opt(g.seq({g.bytes(ByteSet::of('e') | ByteSet::of('E')), g.opt(g.bytes(ByteSet::of('+') | ByteSet::of('-'))),
                                     g.plus(digits(g, '0', '9'))}));
        return g.seq({minus, int_part, frac, exp});
    }
    GrammarIR lex;
    std::vector<int> parts;
    const int lfrac = c.integer ? lex.empty() : lex.opt(lex.seq({lex.byte('.'), lex.plus(digits(lex, '0', '9'))}));
    parts.push_back(lex.seq({lex.opt(lex.byte('-')), lex.alt({lex.byte('0'), lex.seq({digits(lex, '1', '9'), lex.star(digits(lex, '0', '9'))})}), lfrac}));
    if (c.min) parts.push_back(signed_bound(lex, *c.min, true, c.min_exclusive, c.integer));
    if (c.max) parts.push_back(signed_bound(lex, *c.max, false, c.max_exclusive, c.integer));
    ByteDfa d;
    for (size_t i = 0; i < parts.size(); ++i) {
        EMBER_ASSIGN(ByteDfa x, dfa_from_expr(lex, parts[i]));
        if (i == 0) {
            d = std::move(x);
        } else {
            EMBER_ASSIGN(d, dfa_intersect(d, x));
        }
    }
    if (c.multiple_of) {
        EMBER_ASSIGN(ByteDfa m, multiple_dfa(*c.multiple_of, c.integer));
        EMBER_ASSIGN(d, dfa_intersect(d, m));
    }
    return dfa_expr(g, std::move(d));
}

}  // namespace ember::grammar::json
