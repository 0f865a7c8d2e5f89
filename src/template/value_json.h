// value_json.h: JSON ↔ template values.
//
// value_from_json: JSON as Python's json.loads would give it (objects keep their key order when the
// input is an nlohmann::ordered_json; integers stay ints, 1.0 stays a float).
// json_dumps: Python's json.dumps(x, ensure_ascii, indent, separators, sort_keys), which is what the
// `tojson` filter of transformers' chat-template environment calls (ensure_ascii=False by default).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/status.h"
#include "template/value.h"

namespace ember::jinja {

template <class Json>
Expected<Value> value_from_json(const Json& j);

extern template Expected<Value> value_from_json<nlohmann::json>(const nlohmann::json&);
extern template Expected<Value> value_from_json<nlohmann::ordered_json>(const nlohmann::ordered_json&);

struct JsonDumpOptions {
    std::optional<std::string> indent;    // None, or the string one level of indentation adds
    std::optional<std::string> item_sep;  // default ", " (compact) or "," (with indent)
    std::string key_sep = ": ";
    bool ensure_ascii = false;
    bool sort_keys = false;
};

Expected<std::string> json_dumps(const Value& v, const JsonDumpOptions& opt);

// Back to nlohmann JSON (for callers that want structured data); fails on undefined/callables.
Expected<nlohmann::ordered_json> value_to_json(const Value& v);

}  // namespace ember::jinja
