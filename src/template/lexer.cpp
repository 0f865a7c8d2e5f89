// lexer.cpp: see lexer.h for the rules reproduced here.
#include "template/lexer.h"

#include <cmath>
#include <cstdlib>

#include "template/py_text.h"

namespace ember::jinja {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

class Lexer {
public:
    explicit Lexer(std::string_view s) : s_(s) {}

    Expected<std::vector<Token>> run() {
        size_t pos = 0;
        bool line_starting = true;
        while (pos < s_.size()) {
            size_t t = find_tag(pos);
            if (t == std::string_view::npos) {
                push_data(s_.substr(pos), pos);
                break;
            }
            char kind = s_[t + 1];
            size_t p = t + 2;
            char sign = p < s_.size() && (s_[p] == '-' || s_[p] == '+') ? s_[p] : 0;
            size_t raw_end = kind == '%' ? match_raw_begin(t) : 0;
            std::string_view text = s_.substr(pos, t - pos);
            text = strip_before(text, sign, kind != '{', line_starting);
            push_data(text, pos);
            if (raw_end) {
                EMBER_ASSIGN(pos, lex_raw(raw_end, t));
            } else if (kind == '#') {
                EMBER_ASSIGN(pos, lex_comment(sign ? p + 1 : p, t));
            } else {
                EMBER_ASSIGN(pos, lex_tag(kind, sign ? p + 1 : p, t));
            }
            line_starting = pos > 0 && s_[pos - 1] == '\n';
        }
        push(TokType::END, "", s_.size());
        return std::move(toks_);
    }

private:
    size_t find_tag(size_t from) const {
        for (size_t i = s_.find('{', from); i != std::string_view::npos; i = s_.find('{', i + 1))
            if (i + 1 < s_.size() && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
        return std::string_view::npos;
    }

    // Text before a tag: "-" strips trailing whitespace; otherwise lstrip_blocks for block/comment tags.
    std::string_view strip_before(std::string_view text, char sign, bool is_block, bool line_starting) const {
        if (sign == '-') return rstrip_ws(text);
        if (sign == '+' || !is_block) return text;
        size_t l = text.rfind('\n');
        l = l == std::string_view::npos ? 0 : l + 1;
        if (l == 0 && !line_starting) return text;
        std::string_view tail = text.substr(l);
        if (tail.empty() || !all_ws(tail)) return text;
        return text.substr(0, l);
    }

    static bool all_ws(std::string_view s) {
        for (char32_t c : utf8_decode(s))
            if (!py_isspace(c)) return false;
        return true;
    }
    static std::string_view rstrip_ws(std::string_view s) {
        if (is_ascii(s)) {
            size_t e = s.size();
            while (e > 0 && py_isspace(static_cast<unsigned char>(s[e - 1]))) --e;
            return s.substr(0, e);
        }
        std::string stripped = py_strip(s, nullptr, false, true);  // a prefix of s
        return s.substr(0, stripped.size());
    }
    // Length of the whitespace run starting at p.
    size_t ws_run(size_t p) const {
        size_t q = p;
        while (q < s_.size()) {
            unsigned char c = static_cast<unsigned char>(s_[q]);
            if (c < 0x80) {
                if (!py_isspace(c)) break;
                ++q;
                continue;
            }
            size_t len = (c >= 0xF0) ? 4 : (c >= 0xE0) ? 3 : 2;
            std::u32string u = utf8_decode(s_.substr(q, std::min(len, s_.size() - q)));
            if (u.empty() || !py_isspace(u[0])) break;
            q += len;
        }
        return q - p;
    }

    // After a closing delimiter: "-" eats whitespace, "+" nothing, plain eats one newline (trim_blocks).
    size_t after_close(size_t after, char sign, bool trim) const {
        if (sign == '-') return after + ws_run(after);
        if (sign == 0 && trim && after < s_.size() && s_[after] == '\n') return after + 1;
        return after;
    }

    // {%[-+]?\s*raw\s*(-%}\s*|%}) at t; returns the position after it, or 0.
    size_t match_raw_begin(size_t t) const {
        size_t p = t + 2;
        if (p < s_.size() && (s_[p] == '-' || s_[p] == '+')) ++p;
        p += ws_run(p);
        if (s_.substr(p, 3) != "raw") return 0;
        p += 3;
        p += ws_run(p);
        if (s_.substr(p, 3) == "-%}") return p + 3 + ws_run(p + 3);
        if (s_.substr(p, 2) == "%}") return p + 2;
        return 0;
    }

    Expected<size_t> lex_raw(size_t body, size_t tag_pos) {
        for (size_t t = s_.find("{%", body); t != std::string_view::npos; t = s_.find("{%", t + 1)) {
            size_t p = t + 2;
            char sign = p < s_.size() && (s_[p] == '-' || s_[p] == '+') ? s_[p] : 0;
            if (sign) ++p;
            p += ws_run(p);
            if (s_.substr(p, 6) != "endraw") continue;
            p += 6;
            p += ws_run(p);
            char close = 0;
            if (s_.substr(p, 3) == "+%}" || s_.substr(p, 3) == "-%}") close = s_[p++];
            if (s_.substr(p, 2) != "%}") continue;
            // line_starting for the raw body is false: the raw begin tag precedes it on the match.
            push_data(strip_before(s_.substr(body, t - body), sign, true, false), body);
            return after_close(p + 2, close, true);
        }
        return fail(tag_pos, "missing end of raw directive");
    }

    Expected<size_t> lex_comment(size_t body, size_t tag_pos) {
        size_t j = s_.find("#}", body);
        if (j == std::string_view::npos) return fail(tag_pos, "missing end of comment tag");
        char sign = j > body && (s_[j - 1] == '-' || s_[j - 1] == '+') ? s_[j - 1] : 0;
        return after_close(j + 2, sign, true);
    }

    Expected<size_t> lex_tag(char kind, size_t p, size_t tag_pos) {
        bool block = kind == '%';
        push(block ? TokType::BLOCK_BEGIN : TokType::VAR_BEGIN, "", tag_pos);
        std::string balance;  // expected closers
        while (true) {
            if (p >= s_.size())
                return fail(tag_pos, block ? "unexpected end of template inside a block tag '{% ... %}'"
                                           : "unexpected end of template inside '{{ ... }}'");
            if (balance.empty()) {
                size_t end = match_close(block, p);
                if (end) {
                    push(block ? TokType::BLOCK_END : TokType::VAR_END, "", p);
                    return end;
                }
            }
            size_t ws = ws_run(p);
            if (ws) { p += ws; continue; }
            char c = s_[p];
            if (is_digit(c)) {
                EMBER_ASSIGN(p, lex_number(p));
                continue;
            }
            if (is_name_start(c)) {
                size_t q = p;
                while (q < s_.size() && is_name_char(s_[q])) ++q;
                push(TokType::NAME, std::string(s_.substr(p, q - p)), p);
                p = q;
                continue;
            }
            if (c == '\'' || c == '"') {
                EMBER_ASSIGN(p, lex_string(p));
                continue;
            }
            EMBER_ASSIGN(p, lex_operator(p, balance));
        }
    }

    // Closing delimiter at p (only when brackets are balanced): returns the position after it, or 0.
    size_t match_close(bool block, size_t p) const {
        if (block) {
            if (s_.substr(p, 3) == "+%}") return p + 3;
            if (s_.substr(p, 3) == "-%}") return after_close(p + 3, '-', true);
            if (s_.substr(p, 2) == "%}") return after_close(p + 2, 0, true);
        } else {
            if (s_.substr(p, 3) == "-}}") return after_close(p + 3, '-', false);
            if (s_.substr(p, 2) == "}}") return p + 2;
        }
        return 0;
    }

    // digits with single underscores between them: (\d+_)*\d+ ; returns end or p if none.
    size_t digit_run(size_t p) const {
        size_t q = p;
        if (q >= s_.size() || !is_digit(s_[q])) return p;
        while (q < s_.size()) {
            if (is_digit(s_[q])) { ++q; continue; }
            if (s_[q] == '_' && q + 1 < s_.size() && is_digit(s_[q + 1])) { ++q; continue; }
            break;
        }
        return q;
    }

    Expected<size_t> lex_number(size_t p) {
        // float: (?<!\.)(\d+_)*\d+((\.(\d+_)*\d+)?e[+-]?(\d+_)*\d+|\.(\d+_)*\d+)
        bool after_dot = p > 0 && s_[p - 1] == '.';
        size_t q = digit_run(p);
        if (!after_dot) {
            size_t f = q;
            bool frac = false;
            if (f < s_.size() && s_[f] == '.' && digit_run(f + 1) > f + 1) { f = digit_run(f + 1); frac = true; }
            size_t e = f;
            bool expo = false;
            if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
                size_t x = e + 1;
                if (x < s_.size() && (s_[x] == '+' || s_[x] == '-')) ++x;
                if (digit_run(x) > x) { e = digit_run(x); expo = true; }
            }
            if (expo || frac) {
                size_t end = expo ? e : f;
                std::string text;
                for (size_t i = p; i < end; ++i)
                    if (s_[i] != '_') text += s_[i];
                push(TokType::FLOAT, text, p).fval = std::strtod(text.c_str(), nullptr);
                return end;
            }
        }
        // integer: 0b/0o/0x prefixes, [1-9](_?\d)*, 0(_?0)*
        int base = 10;
        size_t start = p;
        if (s_[p] == '0' && p + 1 < s_.size()) {
            char x = static_cast<char>(s_[p + 1] | 0x20);
            base = x == 'b' ? 2 : x == 'o' ? 8 : x == 'x' ? 16 : 10;
        }
        std::string digits;
        size_t r = p;
        auto ok = [&](char ch) {
            int v = is_digit(ch) ? ch - '0' : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f' ? (ch | 0x20) - 'a' + 10 : 99;
            return v < base;
        };
        if (base != 10) {
            r = p + 2;
            while (r < s_.size()) {
                if (s_[r] == '_' && r + 1 < s_.size() && ok(s_[r + 1])) { ++r; continue; }
                if (!ok(s_[r])) break;
                digits += s_[r++];
            }
            if (digits.empty()) { base = 10; r = p; }
        }
        if (base == 10) {
            digits.clear();
            if (s_[p] == '0') {
                r = p + 1;
                while (r < s_.size() && (s_[r] == '0' || (s_[r] == '_' && r + 1 < s_.size() && s_[r + 1] == '0'))) ++r;
                digits.assign(1, '0');
            } else {
                r = q;
                for (size_t i = p; i < q; ++i)
                    if (s_[i] != '_') digits += s_[i];
            }
        }
        errno = 0;
        char* endp = nullptr;
        long long v = std::strtoll(digits.c_str(), &endp, base);
        if (errno == ERANGE) return fail(start, "integer literal too large (64-bit integers only)");
        push(TokType::INT, std::string(s_.substr(start, r - start)), start).ival = v;
        return r;
    }

    Expected<size_t> lex_string(size_t p) {
        char q = s_[p];
        size_t i = p + 1;
        while (i < s_.size() && s_[i] != q) i += s_[i] == '\\' ? 2 : 1;
        if (i >= s_.size()) return fail(p, "unterminated string literal");
        EMBER_ASSIGN(std::string v, unescape(s_.substr(p + 1, i - p - 1), p));
        push(TokType::STRING, std::move(v), p);
        return i + 1;
    }

    // Python's "unicode-escape" decoding of a string literal's body.
    Expected<std::string> unescape(std::string_view b, size_t at) {
        std::string out;
        for (size_t i = 0; i < b.size(); ++i) {
            char c = b[i];
            if (c != '\\' || i + 1 >= b.size()) { out += c; continue; }
            char e = b[++i];
            auto hex = [&](int n) -> Expected<char32_t> {
                char32_t v = 0;
                for (int k = 1; k <= n; ++k) {
                    char h = i + k < b.size() ? b[i + k] : 0;
                    int d = is_digit(h) ? h - '0' : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10 : -1;
                    if (d < 0) return fail(at, "truncated \\x/\\u escape in string literal");
                    v = v * 16 + d;
                }
                i += n;
                return v;
            };
            switch (e) {
                case '\n': break;
                case '\\': out += '\\'; break;
                case '\'': out += '\''; break;
                case '"': out += '"'; break;
                case 'a': out += '\a'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'v': out += '\v'; break;
                case 'x': case 'u': case 'U': {
                    EMBER_ASSIGN(char32_t v, hex(e == 'x' ? 2 : e == 'u' ? 4 : 8));
                    if (v > 0x10FFFF) return fail(at, "illegal Unicode character in string literal");
                    utf8_append(out, v);
                    break;
                }
                default:
                    if (e >= '0' && e <= '7') {
                        int v = e - '0';
                        for (int k = 0; k < 2 && i + 1 < b.size() && b[i + 1] >= '0' && b[i + 1] <= '7'; ++k)
                            v = v * 8 + (b[++i] - '0');
                        utf8_append(out, static_cast<char32_t>(v));
                    } else {
                        out += '\\';
                        out += e;
                    }
            }
        }
        return out;
    }

    Expected<size_t> lex_operator(size_t p, std::string& balance) {
        static const char* two[] = {"//", "**", "==", "!=", ">=", "<="};
        for (const char* op : two)
            if (s_.substr(p, 2) == op) {
                push(TokType::OP, op, p);
                return p + 2;
            }
        char c = s_[p];
        static const std::string_view singles = "+-/*%~[](){}><=.:|,;";
        if (singles.find(c) == std::string_view::npos) {
            std::string shown = c == '\'' || c == '"' ? std::string(1, c) : std::string(s_.substr(p, 1));
            return fail(p, "unexpected character '" + shown + "' in tag");
        }
        if (c == '(' || c == '[' || c == '{') balance += c == '(' ? ')' : c == '[' ? ']' : '}';
        if (c == ')' || c == ']' || c == '}') {
            if (balance.empty()) return fail(p, std::string("unexpected '") + c + "'");
            if (balance.back() != c)
                return fail(p, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
            balance.pop_back();
        }
        push(TokType::OP, std::string(1, c), p);
        return p + 1;
    }

    void push_data(std::string_view text, size_t pos) {
        if (!text.empty()) push(TokType::DATA, std::string(text), pos);
    }
    Token& push(TokType t, std::string text, size_t pos) {
        Token tok{t, std::move(text)};
        locate(pos, tok.line, tok.col);
        toks_.push_back(std::move(tok));
        return toks_.back();
    }
    void locate(size_t pos, int& line, int& col) {
        while (scan_ < pos && scan_ < s_.size()) {  // positions only move forward (except for errors)
            if (s_[scan_] == '\n') { ++line_; col_ = 1; }
            else if ((static_cast<unsigned char>(s_[scan_]) & 0xC0) != 0x80) ++col_;
            ++scan_;
        }
        if (pos < scan_) {  // recount from the start for an earlier position
            line_ = 1; col_ = 1; scan_ = 0;
            return locate(pos, line, col);
        }
        line = line_;
        col = col_;
    }
    Status fail(size_t pos, const std::string& msg) {
        int line, col;
        locate(pos, line, col);
        return errorf("template syntax error at %d:%d: %s", line, col, msg.c_str());
    }

    std::string_view s_;
    std::vector<Token> toks_;
    size_t scan_ = 0;
    int line_ = 1, col_ = 1;
};

}  // namespace

std::string normalize_source(std::string_view src) {
    std::string out;
    out.reserve(src.size());
    for (size_t i = 0; i < src.size(); ++i) {
        if (src[i] == '\r') {
            out += '\n';
            if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
        } else {
            out += src[i];
        }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

Expected<std::vector<Token>> tokenize(std::string_view normalized) { return Lexer(normalized).run(); }

const char* tok_type_name(TokType t) {
    switch (t) {
        case TokType::DATA: return "template data";
        case TokType::VAR_BEGIN: return "'{{'";
        case TokType::VAR_END: return "end of print statement '}}'";
        case TokType::BLOCK_BEGIN: return "'{%'";
        case TokType::BLOCK_END: return "end of statement block '%}'";
        case TokType::NAME: return "name";
        case TokType::STRING: return "string";
        case TokType::INT: return "integer";
        case TokType::FLOAT: return "float";
        case TokType::OP: return "operator";
        case TokType::END: return "end of template";
    }
    return "token";
}

}  // namespace ember::jinja
