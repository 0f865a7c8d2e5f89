// json_fields.h: strict reading of one JSON object's fields for the request parsers — type and range checks,
// null = absent, and a final check that every field present was read (unknown fields are refused).
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "server/openai_types.h"

namespace ember::server {

class Fields {
public:
    // `where` prefixes parameter names in errors ("messages[2]." → "messages[2].role").
    Fields(const ojson& obj, std::string where = "") : obj_(obj), where_(std::move(where)) {}

    // The value of `key` (marked as read), or nullptr when absent or null.
    const ojson* get(const char* key);
    // Each reader leaves `out` unchanged when the field is absent; false (with error() set) on a wrong type or
    // a value outside [lo, hi].
    bool number(const char* key, double lo, double hi, float& out);
    bool integer(const char* key, int64_t lo, int64_t hi, std::optional<int64_t>& out);
    bool boolean(const char* key, bool& out);
    bool string(const char* key, size_t max_bytes, std::string& out);
    // Marks `key` as accepted without reading it (harmless metadata).
    void ignore(const char* key) { seen_.insert(key); }
    // A field that must be absent (or null, or equal to its harmless default `ok`) because it is not supported.
    bool refuse(const char* key, const char* why, const ojson& ok = ojson());
    // Refuses the first field that no reader asked for.
    bool no_unknown(const char* what = "parameter");

    bool fail(std::string message, const std::string& key, std::string code = "");
    bool failed() const { return error_.has_value(); }
    const ApiError& error() const { return *error_; }
    std::string name(const std::string& key) const { return where_ + key; }

private:
    const ojson& obj_;
    std::string where_;
    std::set<std::string> seen_;
    std::optional<ApiError> error_;
};

// A JSON type's name for error messages ("a string", "an array", ...).
const char* json_type_name(const ojson& v);

}  // namespace ember::server
