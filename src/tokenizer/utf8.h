// utf8.h: UTF-8 scanning, lossy repair (Rust String::from_utf8_lossy semantics) and the two Unicode
// character predicates the added-token rules need (White_Space, regex word character).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ember::utf8 {

// Looks at the sequence starting at s[0] (n > 0 bytes available):
//   > 0  a complete valid character of that many bytes (code point in *cp),
//   < 0  an invalid sequence: its maximal valid-looking prefix is -result bytes long (replace by one U+FFFD),
//   = 0  a valid but truncated prefix that runs to the end of the input (may be completed by more bytes).
int scan(const unsigned char* s, size_t n, uint32_t* cp);

// Appends the UTF-8 encoding of cp.
void append(std::string& out, uint32_t cp);

// True if every byte of s belongs to a complete, valid UTF-8 character.
bool is_valid(std::string_view s);

// Replaces every invalid or truncated sequence by U+FFFD, exactly like Rust's String::from_utf8_lossy
// (one U+FFFD per maximal invalid subpart), which HF tokenizers uses when decoding byte-level tokens.
std::string lossy(std::string_view s);

// Unicode White_Space property (what Rust regex `\s` matches).
bool is_white_space(uint32_t cp);
// Rust regex `\w` (Alphabetic, marks, decimal digits, connector punctuation, joiners), approximated from the
// general category plus the few Other_Alphabetic symbols.
bool is_word_char(uint32_t cp);

// Code point of the last / first character of a valid UTF-8 string (s must be non-empty).
uint32_t last_cp(std::string_view s);
uint32_t first_cp(std::string_view s);

}  // namespace ember::utf8
