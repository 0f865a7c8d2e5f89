// special_split.h: cuts text at special-token strings the way llama.cpp does for GGUF vocabularies
// (llama-vocab.cpp tokenizer_st_partition): the tokens are taken longest first (ties: lower id first), and
// each one splits every still-unmatched text fragment at all of its occurrences, left to right. This differs
// from HF's leftmost-longest scan only when token strings overlap in the text.
// Control/unknown tokens are matched only when parse_special is set; user-defined tokens always are.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_tokens.h"  // Segment

namespace ember {

class SpecialTokenSplitter {
public:
    // control: matched only when split() is called with parse_special. Empty texts are ignored.
    void add(int32_t id, std::string text, bool control);
    // Sorts the tokens into matching order; call after the last add() (split() checks it).
    void finalize();
    bool empty() const { return tokens_.empty(); }
    // Segments covering s in order: token matches (id >= 0) and the non-empty text between them (id < 0).
    // An empty s gives no segments.
    std::vector<Segment> split(std::string_view s, bool parse_special) const;

private:
    struct Tok {
        int32_t id;
        std::string text;
        bool control;
    };
    std::vector<Tok> tokens_;  // after finalize(): longest text first, then lower id
    bool sorted_ = true;
};

}  // namespace ember
