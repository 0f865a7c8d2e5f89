// Helpers shared by the fuzz targets: cutting one input into parts, reading fixtures, failing loudly.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace ember::fuzz {

inline std::string_view text(const uint8_t* data, size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

// Input "A<sep>B" → {A, B}; without the separator {whole, ""}.
inline std::pair<std::string_view, std::string_view> split_once(std::string_view s, std::string_view sep) {
    size_t i = s.find(sep);
    if (i == std::string_view::npos) return {s, {}};
    return {s.substr(0, i), s.substr(i + sep.size())};
}

// A finding: prints what broke and aborts, so that libFuzzer records the input.
[[noreturn]] inline void fail(const std::string& what) {
    std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
    std::abort();
}

// The bytes of EMBER_SOURCE_DIR/REL (a committed fixture); a missing fixture is a setup error.
inline std::string read_source_file(const std::string& rel) {
    std::string path = std::string(EMBER_SOURCE_DIR) + "/" + rel;
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace ember::fuzz
