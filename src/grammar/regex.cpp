// ECMAScript regex parser (recursive descent) emitting grammar IR; see regex.h for the accepted syntax.
#include "grammar/regex.h"

#include <string>

namespace ember::grammar {

namespace {

constexpr int kMaxRepeat = 100000;

CpSet digit_set() { return {{'0', '9'}}; }
CpSet word_set() { return cp_normalize({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}); }
CpSet space_set() {
    return cp_normalize({{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
                         {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}});
}
CpSet dot_set() { return cp_complement(cp_normalize({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}})); }

class Parser {
public:
    Parser(GrammarIR& g, std::string_view p, RegexMatch mode, const CharEncoder& enc)
        : g_(g), p_(p), mode_(mode), enc_(enc) {}

    Expected<int> parse() {
        // Top level: alternatives, each with optional leading ^ / trailing $.
        std::vector<int> alts;
        while (true) {
            bool start_anchor = false, end_anchor = false;
            if (peek('^')) { ++i_; start_anchor = true; }
            EMBER_ASSIGN(int body, parse_seq(&end_anchor));
            if (mode_ == RegexMatch::SEARCH) {
                std::vector<int> parts;
                if (!start_anchor) parts.push_back(g_.star(chars(cp_any())));
                parts.push_back(body);
                if (!end_anchor) parts.push_back(g_.star(chars(cp_any())));
                body = g_.seq(std::move(parts));
            }
            alts.push_back(body);
            if (i_ < p_.size() && p_[i_] == '|') { ++i_; continue; }
            break;
        }
        if (i_ < p_.size()) return err(p_[i_] == ')' ? "unbalanced ')'" : "unexpected character");
        return g_.alt(std::move(alts));
    }

private:
    Status err(const std::string& what) const {
        return errorf("regex /%.*s/: %s at offset %zu", int(p_.size()), p_.data(), what.c_str(), i_);
    }
    bool peek(char c) const { return i_ < p_.size() && p_[i_] == c; }
    int chars(const CpSet& s) { return enc_ ? enc_(g_, s) : utf8_expr(g_, s); }

    // A code point of the pattern text (UTF-8).
    Expected<uint32_t> next_cp() {
        std::string s(p_.substr(i_, 4));
        size_t k = 0;
        uint32_t c;
        if (!utf8_next(s, k, c)) return err("invalid UTF-8");
        i_ += k;
        return c;
    }

    // Sequence up to '|' or ')' (or end). *end_anchor (top level only) receives a trailing '$'.
    Expected<int> parse_seq(bool* end_anchor) {
        std::vector<int> items;
        while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
            if (p_[i_] == '$') {
                ++i_;
                const bool at_end = i_ == p_.size() || p_[i_] == '|';
                if (!end_anchor || !at_end) return err("'$' is only supported at the end of a top-level alternative");
                *end_anchor = true;
                break;
            }
            if (p_[i_] == '^') return err("'^' is only supported at the start of a top-level alternative");
            EMBER_ASSIGN(int atom, parse_atom());
            EMBER_ASSIGN(int q, parse_quant(atom));
            items.push_back(q);
        }
        return g_.seq(std::move(items));
    }

    Expected<int> parse_quant(int atom) {
        while (i_ < p_.size()) {
            int lo, hi;
            const char c = p_[i_];
            if (c == '*') { lo = 0; hi = -1; ++i_; }
            else if (c == '+') { lo = 1; hi = -1; ++i_; }
            else if (c == '?') { lo = 0; hi = 1; ++i_; }
            else if (c == '{') {
                size_t j = i_ + 1;
                auto num = [&](int& v) {
                    size_t s = j;
                    long x = 0;
                    while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') {
                        x = x * 10 + (p_[j] - '0');
                        if (x > kMaxRepeat) x = kMaxRepeat + 1;
                        ++j;
                    }
                    v = int(x);
                    return j > s;
                };
                if (!num(lo)) return atom;  // a literal '{' (ECMAScript Annex B)
                hi = lo;
                if (j < p_.size() && p_[j] == ',') {
                    ++j;
                    if (!num(hi)) hi = -1;
                }
                if (j >= p_.size() || p_[j] != '}') return atom;
                if (lo > kMaxRepeat || hi > kMaxRepeat) return err("repetition count too large");
                if (hi >= 0 && hi < lo) return err("repetition {n,m} with m < n");
                i_ = j + 1;
            } else {
                break;
            }
            if (peek('?')) ++i_;  // lazy: same language
            else if (peek('+')) return err("possessive quantifiers are not supported");
            atom = g_.repeat(atom, lo, hi);
        }
        return atom;
    }

    Expected<int> parse_atom() {
        const char c = p_[i_];
        if (c == '(') {
            ++i_;
            if (peek('?')) {
                ++i_;
                if (peek(':')) ++i_;
                else if (peek('<') && i_ + 1 < p_.size() && (p_[i_ + 1] == '=' || p_[i_ + 1] == '!'))
                    return err("lookbehind is not supported");
                else if (peek('=') || peek('!')) return err("lookahead is not supported");
                else if (peek('<') || peek('P')) {
                    if (peek('P')) ++i_;
                    while (i_ < p_.size() && p_[i_] != '>') ++i_;
                    if (!peek('>')) return err("unterminated group name");
                    ++i_;
                } else {
                    return err("unsupported group flag");
                }
            }
            std::vector<int> alts;
            while (true) {
                EMBER_ASSIGN(int s, parse_seq(nullptr));
                alts.push_back(s);
                if (peek('|')) { ++i_; continue; }
                break;
            }
            if (!peek(')')) return err("missing ')'");
            ++i_;
            return g_.alt(std::move(alts));
        }
        if (c == '[') return parse_class();
        if (c == '.') { ++i_; return chars(dot_set()); }
        if (c == '*' || c == '+' || c == '?') return err("nothing to repeat");
        if (c == '\\') {
            CpSet s;
            EMBER_TRY(parse_escape(false, s));
            return chars(s);
        }
        EMBER_ASSIGN(uint32_t cp, next_cp());
        return chars({{cp, cp}});
    }

    // After '\': fills s with the escaped character or class.
    Status parse_escape(bool in_class, CpSet& s) {
        ++i_;
        if (i_ >= p_.size()) return err("trailing backslash");
        const char c = p_[i_++];
        auto one = [&](uint32_t cp) { s = {{cp, cp}}; return Status::ok(); };
        auto hex = [&](size_t n, uint32_t& v) {
            v = 0;
            for (size_t k = 0; k < n; ++k) {
                if (i_ >= p_.size() || !isxdigit(static_cast<unsigned char>(p_[i_]))) return false;
                const char h = p_[i_++];
                v = v * 16 + uint32_t(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
            }
            return true;
        };
        switch (c) {
            case 'd': s = digit_set(); return Status::ok();
            case 'D': s = cp_complement(digit_set()); return Status::ok();
            case 'w': s = word_set(); return Status::ok();
            case 'W': s = cp_complement(word_set()); return Status::ok();
            case 's': s = space_set(); return Status::ok();
            case 'S': s = cp_complement(space_set()); return Status::ok();
            case 'n': return one('\n');
            case 'r': return one('\r');
            case 't': return one('\t');
            case 'f': return one('\f');
            case 'v': return one('\v');
            case '0': return one(0);
            case 'b':
                if (in_class) return one('\b');
                return err("word boundary \\b is not supported");
            case 'B': return err("\\B is not supported");
            case 'c':
                if (i_ < p_.size() && isalpha(static_cast<unsigned char>(p_[i_]))) return one(uint32_t(p_[i_++]) % 32);
                return err("bad \\c escape");
            case 'x': {
                uint32_t v;
                if (!hex(2, v)) return err("bad \\x escape");
                return one(v);
            }
            case 'u': {
                uint32_t v;
                if (peek('{')) {
                    ++i_;
                    v = 0;
                    size_t n = 0;
                    while (i_ < p_.size() && isxdigit(static_cast<unsigned char>(p_[i_])) && n < 7) {
                        uint32_t d;
                        hex(1, d);
                        v = v * 16 + d;
                        ++n;
                    }
                    if (!peek('}') || n == 0 || v > kMaxCodePoint) return err("bad \\u{...} escape");
                    ++i_;
                    return one(v);
                }
                if (!hex(4, v)) return err("bad \\u escape");
                if (v >= 0xD800 && v <= 0xDBFF && i_ + 1 < p_.size() && p_[i_] == '\\' && p_[i_ + 1] == 'u') {
                    const size_t save = i_;
                    i_ += 2;
                    uint32_t lo;
                    if (hex(4, lo) && lo >= 0xDC00 && lo <= 0xDFFF) return one(0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00));
                    i_ = save;
                }
                return one(v);
            }
            case 'p':
            case 'P': return err("Unicode property escapes are not supported");
            case 'k': return err("named backreferences are not supported");
            default:
                if (c >= '1' && c <= '9') return err("backreferences are not supported");
                --i_;
                {
                    EMBER_ASSIGN(uint32_t cp, next_cp());
                    return one(cp);
                }
        }
    }

    Expected<int> parse_class() {
        ++i_;  // '['
        bool negate = false;
        if (peek('^')) { negate = true; ++i_; }
        CpSet set;
        while (i_ < p_.size() && p_[i_] != ']') {
            CpSet lo_set;
            bool single;
            uint32_t lo = 0;
            if (p_[i_] == '\\') {
                EMBER_TRY(parse_escape(true, lo_set));
                single = lo_set.size() == 1 && lo_set[0].lo == lo_set[0].hi;
                if (single) lo = lo_set[0].lo;
            } else {
                EMBER_ASSIGN(lo, next_cp());
                single = true;
                lo_set = {{lo, lo}};
            }
            if (single && i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
                ++i_;
                uint32_t hi;
                if (p_[i_] == '\\') {
                    CpSet h;
                    EMBER_TRY(parse_escape(true, h));
                    if (h.size() != 1 || h[0].lo != h[0].hi) return err("bad class range");
                    hi = h[0].lo;
                } else {
                    EMBER_ASSIGN(hi, next_cp());
                }
                if (hi < lo) return err("class range out of order");
                set.push_back({lo, hi});
            } else {
                set.insert(set.end(), lo_set.begin(), lo_set.end());
            }
        }
        if (!peek(']')) return err("missing ']'");
        ++i_;
        set = cp_normalize(set);
        if (negate) set = cp_complement(set);
        return chars(set);
    }

    GrammarIR& g_;
    std::string_view p_;
    RegexMatch mode_;
    const CharEncoder& enc_;
    size_t i_ = 0;
};

}  // namespace

Expected<int> regex_to_ir(GrammarIR& g, std::string_view pattern, RegexMatch mode, const CharEncoder& enc) {
    Parser p(g, pattern, mode, enc);
    return p.parse();
}

}  // namespace ember::grammar
