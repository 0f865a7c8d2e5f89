// byte_level.h: the GPT-2 byte <-> unicode map used by ByteLevel pre-tokenizers and decoders.
// Printable bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) map to the code point of the same value; the other 68
// bytes map to U+0100.. in byte order (so ' ' -> 'Ġ' U+0120, '\n' -> 'Ċ' U+010A).
#pragma once
#include <string>
#include <string_view>

namespace ember::byte_level {

// Appends the mapped form of every byte of `bytes` (each byte becomes one 1-2 byte UTF-8 character).
void encode(std::string_view bytes, std::string& out);

// The bytes a byte-level token string stands for. As in HF's ByteLevel decoder, a token containing any
// character outside the map (e.g. an added token with a space) stands for its own UTF-8 bytes.
std::string decode(std::string_view token);

}  // namespace ember::byte_level
