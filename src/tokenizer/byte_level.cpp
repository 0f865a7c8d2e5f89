// byte_level.cpp: GPT-2 byte <-> unicode tables (openai/gpt-2 encoder.py bytes_to_unicode).
#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "tokenizer/utf8.h"

namespace ember::byte_level {
namespace {

struct Tables {
    std::array<std::string, 256> to_utf8;    // byte -> UTF-8 of its mapped character
    std::array<int16_t, 0x144> from_cp{};   // mapped code point -> byte, -1 if unmapped (max code point 0x143)
    Tables() {
        from_cp.fill(-1);
        int next = 0x100;
        for (int b = 0; b < 256; ++b) {
            bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next++);
            utf8::append(to_utf8[b], cp);
            from_cp[cp] = static_cast<int16_t>(b);
        }
    }
};
const Tables& tables() {
    static const Tables t;
    return t;
}

}  // namespace

void encode(std::string_view bytes, std::string& out) {
    const auto& t = tables().to_utf8;
    for (char c : bytes) out += t[static_cast<unsigned char>(c)];
}

std::string decode(std::string_view token) {
    const auto& t = tables().from_cp;
    std::string out;
    auto p = reinterpret_cast<const unsigned char*>(token.data());
    for (size_t i = 0; i < token.size();) {
        uint32_t cp;
        int k = utf8::scan(p + i, token.size() - i, &cp);
        if (k <= 0 || cp >= t.size() || t[cp] < 0) return std::string(token);  // not a byte-level token
        out += static_cast<char>(t[cp]);
        i += static_cast<size_t>(k);
    }
    return out;
}

}  // namespace ember::byte_level
