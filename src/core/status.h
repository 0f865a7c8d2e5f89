// Status / Expected<T>: the error tier for anything an input can cause (bad files, bad requests).
// Invariants use EMBER_CHECK (check.h); nothing here throws.
#pragma once
#include <cstdarg>
#include <string>
#include <utility>
#include <variant>

namespace ember {

// printf-style formatting into a std::string.
std::string strfmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vstrfmt(const char* fmt, va_list ap);

class [[nodiscard]] Status {
public:
    Status() = default;
    static Status ok() { return Status(); }
    static Status error(std::string msg) { Status s; s.ok_ = false; s.msg_ = std::move(msg); return s; }
    bool is_ok() const { return ok_; }
    explicit operator bool() const { return ok_; }
    const std::string& message() const { return msg_; }
    // Prepend context ("loading X: " + msg).
    Status with_context(const std::string& ctx) const {
        return ok_ ? *this : error(ctx + ": " + msg_);
    }
private:
    bool ok_ = true;
    std::string msg_;
};

Status errorf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

template <class T>
class [[nodiscard]] Expected {
public:
    Expected(T v) : v_(std::move(v)) {}
    Expected(Status s) : v_(std::move(s)) {}
    bool is_ok() const { return v_.index() == 0; }
    explicit operator bool() const { return is_ok(); }
    T& value() & { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    const T& value() const& { return std::get<0>(v_); }
    T* operator->() { return &std::get<0>(v_); }
    T& operator*() & { return std::get<0>(v_); }
    Status status() const { return is_ok() ? Status::ok() : std::get<1>(v_); }
    const std::string& message() const {
        static const std::string empty;
        return is_ok() ? empty : std::get<1>(v_).message();
    }
private:
    std::variant<T, Status> v_;
};

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
