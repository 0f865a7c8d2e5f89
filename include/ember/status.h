// ember/status.h: Status / Expected<T>, the error type of the library API and of the engine inside it: anything an
// input can cause (a bad file, a bad request) comes back as one of these; nothing in the API throws.
#pragma once
#include <string>
#include <utility>
#include <variant>

namespace ember {

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

// A value or the Status saying why there is none.
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
    const T* operator->() const { return &std::get<0>(v_); }
    T& operator*() & { return std::get<0>(v_); }
    const T& operator*() const& { return std::get<0>(v_); }
    Status status() const { return is_ok() ? Status::ok() : std::get<1>(v_); }
    const std::string& message() const {
        static const std::string empty;
        return is_ok() ? empty : std::get<1>(v_).message();
    }
private:
    std::variant<T, Status> v_;
};

}  // namespace ember
