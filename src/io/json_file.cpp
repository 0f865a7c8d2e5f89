// read_json_file implementation.
#include "io/json_file.h"

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
    auto j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return errorf("%s: not valid JSON", path.c_str());
    return j;
}

}  // namespace ember
