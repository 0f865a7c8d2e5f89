// utf8.cpp: UTF-8 scanning and lossy repair; White_Space / word-character predicates.
#include "tokenizer/utf8.h"

#include <utf8proc.h>

namespace ember::utf8 {

int scan(const unsigned char* s, size_t n, uint32_t* cp) {
    unsigned char b = s[0];
    if (b < 0x80) { *cp = b; return 1; }
    int len;
    uint32_t c;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Unicode Table 3-7)
    if (b >= 0xC2 && b <= 0xDF) { len = 2; c = b & 0x1F; }
    else if (b >= 0xE0 && b <= 0xEF) {
        len = 3; c = b & 0x0F;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;  // no surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4; c = b & 0x07;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else {
        return -1;  // stray continuation byte, C0, C1, F5..FF
    }
    for (int i = 1; i < len; ++i) {
        if (static_cast<size_t>(i) >= n) return 0;  // truncated at end of input
        unsigned char x = s[i];
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (x < l || x > h) return -i;
        c = (c << 6) | (x & 0x3F);
    }
    *cp = c;
    return len;
}

void append(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

bool is_valid(std::string_view s) {
    auto p = reinterpret_cast<const unsigned char*>(s.data());
    for (size_t i = 0; i < s.size();) {
        uint32_t cp;
        int k = scan(p + i, s.size() - i, &cp);
        if (k <= 0) return false;
        i += static_cast<size_t>(k);
    }
    return true;
}

std::string lossy(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    auto p = reinterpret_cast<const unsigned char*>(s.data());
    for (size_t i = 0; i < s.size();) {
        uint32_t cp;
        int k = scan(p + i, s.size() - i, &cp);
        if (k > 0) {
            out.append(s.data() + i, static_cast<size_t>(k));
            i += static_cast<size_t>(k);
        } else {
            out += "\xEF\xBF\xBD";
            i += k < 0 ? static_cast<size_t>(-k) : s.size() - i;  // truncated tail: one U+FFFD
        }
    }
    return out;
}

bool is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

bool is_word_char(uint32_t c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (c == 0x200C || c == 0x200D) return true;                       // Join_Control
    if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F189)) return true;  // So but Alphabetic
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return true;
    default:
        return false;
    }
}

uint32_t last_cp(std::string_view s) {
    size_t i = s.size() - 1;
    while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    return first_cp(s.substr(i));
}

uint32_t first_cp(std::string_view s) {
    uint32_t cp = 0xFFFD;
    scan(reinterpret_cast<const unsigned char*>(s.data()), s.size(), &cp);
    return cp;
}

}  // namespace ember::utf8
