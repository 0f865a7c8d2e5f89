// normalize.h: the tokenizer.json "normalizer" step. Supported: null, NFC, and Sequence of NFC.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace ember {

class Normalizer {
public:
    // j is the "normalizer" value of tokenizer.json (may be null).
    static Expected<Normalizer> from_json(const nlohmann::json& j);
    // Applies the normalization (input must be valid UTF-8).
    std::string apply(std::string_view s) const;
    bool is_identity() const { return !nfc_; }

private:
    bool nfc_ = false;
};

// Unicode NFC of valid UTF-8 text (utf8proc); ASCII input is returned unchanged without a copy-loop.
std::string nfc(std::string_view s);

}  // namespace ember
