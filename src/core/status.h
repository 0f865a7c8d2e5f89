// Status / Expected<T>: the error tier for anything an input can cause (bad files, bad requests).
// Invariants use EMBER_CHECK (check.h); nothing here throws.
#pragma once
#include <cstdarg>
#include <string>

#include "ember/status.h"  // Status, Expected<T> (the library API uses them too)

namespace ember {

// printf-style formatting into a std::string.
std::string strfmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vstrfmt(const char* fmt, va_list ap);

Status errorf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace ember

// Return the Status if it is an error.
#define EMBER_TRY(expr)                                  \
    do {                                                 \
        ::ember::Status _st = (expr);                    \
        if (!_st.is_ok()) return _st;                    \
    } while (0)

// Assign the value of an Expected<T> or return its error.  Usage: EMBER_ASSIGN(auto x, f());
#define EMBER_CONCAT_(a, b) a##b
#define EMBER_CONCAT(a, b) EMBER_CONCAT_(a, b)
#define EMBER_ASSIGN(lhs, expr) EMBER_ASSIGN_IMPL_(EMBER_CONCAT(_ex_, __LINE__), lhs, expr)
#define EMBER_ASSIGN_IMPL_(tmp, lhs, expr)               \
    auto tmp = (expr);                                   \
    if (!tmp.is_ok()) return tmp.status();               \
    lhs = std::move(tmp).value()

// Return an error Status (printf-style message) unless cond holds.
#define EMBER_REQUIRE(cond, ...)                         \
    do {                                                 \
        if (!(cond)) return ::ember::errorf(__VA_ARGS__); \
    } while (0)
