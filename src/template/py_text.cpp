// py_text.cpp: Python text semantics on UTF-8 strings (see py_text.h).
#include "template/py_text.h"

#include <utf8proc.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace ember::jinja {

namespace {

// Decodes one code point at s[i]; advances i. Invalid bytes decode to U+DC80+byte.
char32_t decode_one(std::string_view s, size_t& i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) { ++i; return c; }
    int n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (n == 0 || i + n > s.size()) { ++i; return 0xDC00 + c; }
    char32_t cp = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
    for (int k = 1; k < n; ++k) {
        unsigned char cc = static_cast<unsigned char>(s[i + k]);
        if ((cc & 0xC0) != 0x80) { ++i; return 0xDC00 + c; }
        cp = (cp << 6) | (cc & 0x3F);
    }
    bool bad = (n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF));
    if (bad) { ++i; return 0xDC00 + c; }
    i += n;
    return cp;
}

int category(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)); }

#include "template/py_unicode_tables.inc"

template <size_t N>
const char* full_mapping(const FullMapping (&table)[N], char32_t c) {
    size_t lo = 0, hi = N;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (table[mid].cp < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < N && table[lo].cp == c ? table[lo].utf8 : nullptr;
}

template <size_t N>
bool in_ranges(const CpRange (&table)[N], char32_t c) {
    size_t lo = 0, hi = N;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (table[mid].hi < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < N && table[lo].lo <= c && c <= table[lo].hi;
}

// Full (multi-character) case mappings Python applies that utf8proc's simple mappings lack.
const char* special_upper(char32_t c) { return c < 0xDF ? nullptr : full_mapping(kUpperFull, c); }
const char* special_title(char32_t c) { return c < 0xDF ? nullptr : full_mapping(kTitleFull, c); }

void append_upper(std::string& out, char32_t c) {
    if (c < 0x80) { out += static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c); return; }
    if (const char* s = special_upper(c)) { out += s; return; }
    utf8_append(out, static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))));
}
void append_title(std::string& out, char32_t c) {
    if (c < 0x80) { out += static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c); return; }
    if (const char* s = special_title(c)) { out += s; return; }
    utf8_append(out, static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))));
}
// Lower-cases u[i]; handles İ and the final-sigma rule.
void append_lower(std::string& out, const std::u32string& u, size_t i) {
    char32_t c = u[i];
    if (c < 0x80) { out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); return; }
    if (c == 0x0130) { out += "i\u0307"; return; }
    if (c == 0x03A3) {
        bool before = i > 0 && py_is_cased(u[i - 1]);
        bool after = i + 1 < u.size() && py_is_cased(u[i + 1]);
        utf8_append(out, before && !after ? 0x03C2 : 0x03C3);
        return;
    }
    utf8_append(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
}

}  // namespace

std::u32string utf8_decode(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) out += decode_one(s, i);
    return out;
}

void utf8_append(std::string& out, char32_t c) {
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c >= 0xDC80 && c <= 0xDCFF) {
        out += static_cast<char>(c - 0xDC00);  // an undecodable byte, restored
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    }
}

std::string utf8_encode(std::u32string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t c : s) utf8_append(out, c);
    return out;
}

size_t utf8_length(std::string_view s) {
    if (is_ascii(s)) return s.size();
    size_t n = 0;
    for (size_t i = 0; i < s.size(); ++n) decode_one(s, i);
    return n;
}

bool is_ascii(std::string_view s) {
    for (char c : s)
        if (static_cast<unsigned char>(c) >= 0x80) return false;
    return true;
}

bool py_isspace(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool py_isprintable(char32_t c) {
    if (c == ' ') return true;
    if (c >= 0xDC80 && c <= 0xDCFF) return false;
    switch (category(c)) {
        case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
        case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
        case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
            return false;
        default:
            return true;
    }
}

bool py_is_upper_char(char32_t c) { return (category(c) == UTF8PROC_CATEGORY_LU) != in_ranges(kUppercaseNotLu, c); }
bool py_is_lower_char(char32_t c) { return (category(c) == UTF8PROC_CATEGORY_LL) != in_ranges(kLowercaseNotLl, c); }
bool py_is_title_char(char32_t c) { return category(c) == UTF8PROC_CATEGORY_LT; }
bool py_is_cased(char32_t c) { return py_is_upper_char(c) || py_is_lower_char(c) || py_is_title_char(c); }

bool py_str_isupper(std::string_view s) {
    bool cased = false;
    for (char32_t c : utf8_decode(s)) {
        if (py_is_lower_char(c) || py_is_title_char(c)) return false;
        cased = cased || py_is_upper_char(c);
    }
    return cased;
}

bool py_str_islower(std::string_view s) {
    bool cased = false;
    for (char32_t c : utf8_decode(s)) {
        if (py_is_upper_char(c) || py_is_title_char(c)) return false;
        cased = cased || py_is_lower_char(c);
    }
    return cased;
}
bool py_is_alpha(char32_t c) {
    int k = category(c);
    return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}
bool py_is_decimal(char32_t c) { return category(c) == UTF8PROC_CATEGORY_ND; }
bool py_is_digit(char32_t c) { return py_is_decimal(c) || in_ranges(kDigitNotNd, c); }
bool py_is_numeric(char32_t c) {
    int k = category(c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO ||
           in_ranges(kNumericNotN, c);
}

std::string py_upper(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) append_upper(out, decode_one(s, i));
    return out;
}

std::string py_lower(std::string_view s) {
    std::u32string u = utf8_decode(s);
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < u.size(); ++i) append_lower(out, u, i);
    return out;
}

std::string py_title(std::string_view s) {
    std::u32string u = utf8_decode(s);
    std::string out;
    bool prev_cased = false;
    for (size_t i = 0; i < u.size(); ++i) {
        if (prev_cased) append_lower(out, u, i);
        else append_title(out, u[i]);
        prev_cased = py_is_cased(u[i]);
    }
    return out;
}

std::string py_capitalize(std::string_view s) {
    std::u32string u = utf8_decode(s);
    std::string out;
    for (size_t i = 0; i < u.size(); ++i) {
        if (i == 0) append_title(out, u[i]);
        else append_lower(out, u, i);
    }
    return out;
}

std::string py_swapcase(std::string_view s) {
    std::u32string u = utf8_decode(s);
    std::string out;
    for (size_t i = 0; i < u.size(); ++i) {
        if (py_is_upper_char(u[i])) append_lower(out, u, i);
        else if (py_is_lower_char(u[i])) append_upper(out, u[i]);
        else utf8_append(out, u[i]);
    }
    return out;
}

std::string py_strip(std::string_view s, const std::u32string* chars, bool left, bool right) {
    std::u32string u = utf8_decode(s);
    auto strip_it = [&](char32_t c) { return chars ? chars->find(c) != std::u32string::npos : py_isspace(c); };
    size_t b = 0, e = u.size();
    if (left)
        while (b < e && strip_it(u[b])) ++b;
    if (right)
        while (e > b && strip_it(u[e - 1])) --e;
    return utf8_encode(std::u32string_view(u).substr(b, e - b));
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, long long count) {
    std::string out;
    if (old.empty()) {
        std::u32string u = utf8_decode(s);
        long long done = 0;
        for (size_t i = 0; i <= u.size(); ++i) {
            if (count < 0 || done < count) {
                out += repl;
                ++done;
            }
            if (i < u.size()) utf8_append(out, u[i]);
        }
        return out;
    }
    size_t pos = 0;
    long long done = 0;
    while (count < 0 || done < count) {
        size_t hit = s.find(old, pos);
        if (hit == std::string_view::npos) break;
        out.append(s.data() + pos, hit - pos);
        out += repl;
        pos = hit + old.size();
        ++done;
    }
    out.append(s.data() + pos, s.size() - pos);
    return out;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
    std::vector<std::string> lines;
    std::u32string u = utf8_decode(s);
    size_t start = 0;
    for (size_t i = 0; i < u.size(); ++i) {
        char32_t c = u[i];
        bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                   c == 0x85 || c == 0x2028 || c == 0x2029;
        if (!brk) continue;
        size_t end = i;
        if (c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ++i;
        lines.push_back(utf8_encode(std::u32string_view(u).substr(start, (keepends ? i + 1 : end) - start)));
        start = i + 1;
    }
    if (start < u.size()) lines.push_back(utf8_encode(std::u32string_view(u).substr(start)));
    return lines;
}

size_t cp_index(std::string_view s, size_t byte_offset) {
    size_t n = 0;
    for (size_t i = 0; i < byte_offset && i < s.size(); ++i)
        if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) ++n;
    return n;
}

namespace {
// Removes "_" that sit between two digits (Python numeric literals in strings); false if misplaced.
bool drop_underscores(std::string& s, int base) {
    std::string out;
    auto is_d = [base](char c) {
        int v = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? (c | 0x20) - 'a' + 10 : 99;
        return v < base;
    };
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '_') { out += s[i]; continue; }
        if (i == 0 || i + 1 >= s.size() || !is_d(s[i - 1]) || !is_d(s[i + 1])) return false;
    }
    s = out;
    return true;
}
}  // namespace

std::optional<long long> py_parse_int(std::string_view text, int base) {
    std::string s = py_strip(text, nullptr, true, true);
    if (!is_ascii(s) || s.empty()) return std::nullopt;
    bool neg = false;
    size_t i = 0;
    if (s[0] == '+' || s[0] == '-') { neg = s[0] == '-'; i = 1; }
    std::string body = s.substr(i);
    if (body.size() >= 2 && body[0] == '0') {
        char p = static_cast<char>(body[1] | 0x20);
        int pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
        if (pb && (base == pb || base == 0)) {
            body = body.substr(2);
            base = pb;
            if (!body.empty() && body[0] == '_') body = body.substr(1);
        }
    }
    if (base == 0) base = 10;
    if (body.empty() || !drop_underscores(body, base)) return std::nullopt;
    for (char c : body) {
        int v = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? (c | 0x20) - 'a' + 10 : 99;
        if (v >= base) return std::nullopt;
    }
    errno = 0;
    long long v = std::strtoll(body.c_str(), nullptr, base);
    if (errno == ERANGE) return std::nullopt;
    return neg ? -v : v;
}

std::optional<double> py_parse_float(std::string_view text) {
    std::string s = py_strip(text, nullptr, true, true);
    if (!is_ascii(s) || s.empty()) return std::nullopt;
    std::string low;
    for (char c : s) low += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    size_t i = low[0] == '+' || low[0] == '-' ? 1 : 0;
    std::string word = low.substr(i);
    if (word == "inf" || word == "infinity") return low[0] == '-' ? -INFINITY : INFINITY;
    if (word == "nan") return NAN;
    if (!drop_underscores(word, 10)) return std::nullopt;
    // [digits][.digits][e[+-]digits], with at least one digit in the mantissa
    size_t p = 0, mant = 0;
    while (p < word.size() && word[p] >= '0' && word[p] <= '9') { ++p; ++mant; }
    if (p < word.size() && word[p] == '.') {
        ++p;
        while (p < word.size() && word[p] >= '0' && word[p] <= '9') { ++p; ++mant; }
    }
    if (mant == 0) return std::nullopt;
    if (p < word.size() && word[p] == 'e') {
        ++p;
        if (p < word.size() && (word[p] == '+' || word[p] == '-')) ++p;
        size_t e0 = p;
        while (p < word.size() && word[p] >= '0' && word[p] <= '9') ++p;
        if (p == e0) return std::nullopt;
    }
    if (p != word.size()) return std::nullopt;
    double v = std::strtod(word.c_str(), nullptr);
    return low[0] == '-' ? -v : v;
}

std::string cat(std::initializer_list<std::string_view> parts) {
    size_t n = 0;
    for (std::string_view p : parts) n += p.size();
    std::string out;
    out.reserve(n);
    for (std::string_view p : parts) out.append(p);
    return out;
}

std::string py_int_str(long long v) { return std::to_string(v); }

std::string py_float_repr(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    std::string sci(buf, r.ptr);  // [-]d[.ddd]e±XX, shortest round-trip digits
    std::string out;
    size_t p = 0;
    if (sci[0] == '-') { out += '-'; p = 1; }
    size_t epos = sci.find('e');
    std::string digits;
    for (size_t i = p; i < epos; ++i)
        if (sci[i] != '.') digits += sci[i];
    int exp10 = std::atoi(sci.c_str() + epos + 1);
    int n = static_cast<int>(digits.size());
    int decpt = exp10 + 1;  // position of the decimal point relative to the digits
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            out += cat({"0.", std::string(-decpt, '0'), digits});
        } else if (decpt >= n) {
            out += digits + std::string(decpt - n, '0') + ".0";
        } else {
            out += cat({digits.substr(0, decpt), ".", digits.substr(decpt)});
        }
    } else {
        out += digits.substr(0, 1);
        if (n > 1) out += cat({".", digits.substr(1)});
        char e[16];
        std::snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
        out += e;
    }
    return out;
}

std::string py_str_repr(std::string_view s) {
    bool has_single = s.find('\'') != std::string_view::npos;
    bool has_double = s.find('"') != std::string_view::npos;
    char q = has_single && !has_double ? '"' : '\'';
    std::string out(1, q);
    for (size_t i = 0; i < s.size();) {
        char32_t c = decode_one(s, i);
        char buf[16];
        if (c == static_cast<char32_t>(q) || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x80 ? (c < 0x20 || c == 0x7F) : !py_isprintable(c)) {
            unsigned v = static_cast<unsigned>(c);
            if (v < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", v);
            else if (v < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", v);
            else std::snprintf(buf, sizeof buf, "\\U%08x", v);
            out += buf;
        } else {
            utf8_append(out, c);
        }
    }
    out += q;
    return out;
}

std::string json_quote(std::string_view s, bool ensure_ascii) {
    std::string out = "\"";
    char buf[16];
    for (size_t i = 0; i < s.size();) {
        size_t start = i;
        char32_t c = decode_one(s, i);
        switch (c) {
            case '"': out += "\\\""; continue;
            case '\\': out += "\\\\"; continue;
            case '\n': out += "\\n"; continue;
            case '\r': out += "\\r"; continue;
            case '\t': out += "\\t"; continue;
            case '\b': out += "\\b"; continue;
            case '\f': out += "\\f"; continue;
            default: break;
        }
        if (c < 0x20 || (ensure_ascii && c > 0x7E)) {
            if (c >= 0x10000) {
                char32_t v = c - 0x10000;
                std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
            } else {
                std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            }
            out += buf;
        } else {
            out.append(s.data() + start, i - start);
        }
    }
    out += '"';
    return out;
}

}  // namespace ember::jinja
