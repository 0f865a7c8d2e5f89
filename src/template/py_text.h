// py_text.h: the pieces of Python's text semantics that Jinja templates observe.
//
// Jinja runs on Python, so a chat template sees Python strings (sequences of code points), Python's
// str()/repr() of numbers and containers, and json.dumps. These helpers reproduce that behaviour on
// UTF-8 std::strings:
//   - code-point decoding/encoding; invalid UTF-8 bytes map to U+DC80+byte (like Python's
//     "surrogateescape") so that any byte string survives a round trip unchanged;
//   - str.isspace() (the Unicode White_Space set Python uses), upper/lower/title/capitalize with
//     utf8proc's simple case mappings plus Python's full mappings (ß → SS, ΐ → Ϊ́, İ → i̇, final
//     sigma) and case/numeric properties from py_unicode_tables.inc (generated from Python's data);
//   - repr(float) (shortest round-trip digits, fixed notation for 1e-4 <= |x| < 1e16) and repr(str);
//   - json.dumps string quoting with ensure_ascii on or off.
#pragma once
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::jinja {

std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t c);
size_t utf8_length(std::string_view s);  // code points
bool is_ascii(std::string_view s);

bool py_isspace(char32_t c);
bool py_isprintable(char32_t c);
bool py_is_upper_char(char32_t c);  // Unicode Uppercase property (Lu + Other_Uppercase)
bool py_is_lower_char(char32_t c);  // Unicode Lowercase property (Ll + Other_Lowercase)
bool py_is_cased(char32_t c);       // uppercase, lowercase or titlecase (Lt)
bool py_is_alpha(char32_t c);       // categories L*
bool py_is_decimal(char32_t c);     // category Nd
bool py_is_digit(char32_t c);       // Numeric_Type Digit or Decimal (², ①, ...)
bool py_is_numeric(char32_t c);     // any Numeric_Type (½, Ⅻ, 一, ...)
bool py_str_isupper(std::string_view s);  // str.isupper()
bool py_str_islower(std::string_view s);  // str.islower()

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);       // str.title()
std::string py_capitalize(std::string_view s);  // str.capitalize(): first char title case, rest lower
std::string py_swapcase(std::string_view s);

// str.strip/lstrip/rstrip. chars == nullptr strips whitespace (py_isspace).
std::string py_strip(std::string_view s, const std::u32string* chars, bool left, bool right);

// str.replace(old, new, count); count < 0 replaces all. An empty `old` inserts between code points.
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, long long count);
// str.splitlines(keepends): \n \r \r\n \v \f \x1c \x1d \x1e \x85 \u2028 \u2029 end lines.
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
// Code-point index of a byte offset.
size_t cp_index(std::string_view s, size_t byte_offset);

// Python's int(text, base) and float(text); nullopt where Python raises ValueError (or the int
// does not fit 64 bits).
std::optional<long long> py_parse_int(std::string_view text, int base);
std::optional<double> py_parse_float(std::string_view text);

std::string py_int_str(long long v);

// Concatenation that avoids GCC 12's false -Wrestrict on `"literal" + std::string&&` (GCC PR 105329).
std::string cat(std::initializer_list<std::string_view> parts);
std::string py_float_repr(double v);        // repr(float): 1.0, 1e-05, 3.3333333333333335, inf, nan
std::string py_str_repr(std::string_view s);  // repr(str): 'it''s' → "it's", escapes like Python

// json.dumps of a string (with the quotes).
std::string json_quote(std::string_view s, bool ensure_ascii);

}  // namespace ember::jinja
