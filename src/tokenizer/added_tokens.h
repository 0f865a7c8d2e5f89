// added_tokens.h: finds added/special token strings in text the way HF tokenizers' AddedVocabulary does:
// leftmost-longest non-overlapping matches, then the single_word / lstrip / rstrip rules per token.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember {

struct AddedToken {
    int32_t id = -1;
    std::string content;  // the pattern: content, NFC-normalized for normalized tokens
    bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// A cut of a text: bytes [begin, end) are either added token `id` or plain text (id < 0).
struct Segment {
    size_t begin, end;
    int32_t id;
};

// One matcher per trie HF builds (non-normalized tokens on raw text, normalized ones on normalized text).
class AddedTokenMatcher {
public:
    void add(AddedToken t);
    bool empty() const { return tokens_.empty(); }
    // Segments covering all of s in order (plain segments may be empty only when s is). Without parse_special,
    // matches of special tokens are dropped (HF's split_special_tokens / encode_special_tokens).
    std::vector<Segment> split(std::string_view s, bool parse_special = true) const;

private:
    std::vector<AddedToken> tokens_;
    std::vector<std::vector<int>> by_first_byte_ = std::vector<std::vector<int>>(256);  // longest first
};

}  // namespace ember
