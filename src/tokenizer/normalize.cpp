// normalize.cpp: NFC normalization through utf8proc and the normalizer JSON parser.
#include "tokenizer/normalize.h"

#include <utf8proc.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

namespace ember {

std::string nfc(std::string_view s) {
    bool ascii = true;
    for (char c : s) ascii &= static_cast<unsigned char>(c) < 0x80;
    if (ascii) return std::string(s);  // ASCII is always NFC
    utf8proc_uint8_t* out = nullptr;
    // Length-delimited (no UTF8PROC_NULLTERM), so embedded NULs are kept; same flags as utf8proc_NFC.
    utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                      static_cast<utf8proc_ssize_t>(s.size()), &out,
                                      static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n < 0) return std::string(s);  // only on invalid UTF-8, which callers have already repaired
    std::string r(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
    return r;
}

Expected<Normalizer> Normalizer::from_json(const nlohmann::json& j) {
    Normalizer n;
    if (j.is_null()) return n;
    EMBER_REQUIRE(j.is_object() && j.contains("type") && j["type"].is_string(), "normalizer: missing \"type\"");
    const std::string type = j["type"].get<std::string>();
    if (type == "NFC") {
        n.nfc_ = true;
        return n;
    }
    if (type == "Sequence") {
        EMBER_REQUIRE(j.contains("normalizers") && j["normalizers"].is_array(),
                      "normalizer Sequence: missing \"normalizers\" array");
        for (const auto& sub : j["normalizers"]) {
            EMBER_ASSIGN(Normalizer s, from_json(sub));
            n.nfc_ |= s.nfc_;
        }
        return n;
    }
    return errorf("unsupported normalizer type '%s' (supported: NFC, Sequence of NFC)", type.c_str());
}

std::string Normalizer::apply(std::string_view s) const {
    return nfc_ ? nfc(s) : std::string(s);
}

}  // namespace ember
