// read_json_file implementation.
#include "io/json_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ember {

Expected<nlohmann::json> read_json_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return errorf("%s: cannot open: %s", path.c_str(), std::strerror(errno));
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_json_text(ss.str(), path);
}

size_t json_nesting_depth(std::string_view text) {
    size_t depth = 0, deepest = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

Expected<nlohmann::json> parse_json_text(std::string_view text, const std::string& name) {
    if (json_nesting_depth(text) > kMaxJsonDepth)
        return errorf("%s: JSON nested deeper than %zu levels (ember's limit)", name.c_str(), kMaxJsonDepth);
    auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return errorf("%s: not valid JSON", name.c_str());
    return j;
}

}  // namespace ember
