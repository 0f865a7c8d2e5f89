// Reading JSON files (config.json, index files) into nlohmann::json with a clear error on failure.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace ember {

Expected<nlohmann::json> read_json_file(const std::string& path);

}  // namespace ember
