// Reading JSON files (config.json, index files) into nlohmann::json with a clear error on failure.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ember {

Expected<nlohmann::json> read_json_file(const std::string& path);
// The same from the file's text; `name` stands for the path in messages (read_json_file uses it). Text nested
// deeper than kMaxJsonDepth is refused before parsing: nlohmann::json copies, compares and dumps recursively,
// so a file of 100k '[' would overflow the stack of whoever copies it.
Expected<nlohmann::json> parse_json_text(std::string_view text, const std::string& name);
inline constexpr size_t kMaxJsonDepth = 512;
// The deepest nesting of '[' / '{' in JSON text (brackets inside strings do not count).
size_t json_nesting_depth(std::string_view text);

}  // namespace ember
