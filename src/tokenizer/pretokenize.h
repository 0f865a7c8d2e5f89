// pretokenize.h: the tokenizer.json "pre_tokenizer" step: cuts normalized text into words for BPE.
// Supported: ByteLevel (add_prefix_space, use_regex = GPT-2 regex), Split (Regex or String pattern,
// behavior Isolated, invert false) and Sequence of these. Regexes are compiled with PCRE2 (UTF + UCP, JIT),
// standing in for the Oniguruma engine HF tokenizers uses.
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ember {

// A compiled PCRE2 pattern; copies share the code.
class Regex {
public:
    static Expected<Regex> compile(const std::string& pattern, bool literal = false);
    // Byte ranges [begin, end) of successive non-overlapping matches in s (valid UTF-8), searching left to
    // right like onig's find_iter (after an empty match the search resumes one character later).
    std::vector<std::pair<size_t, size_t>> find_all(std::string_view s) const;

private:
    std::shared_ptr<void> code_;  // pcre2_code_8*
};

class PreTokenizer {
public:
    // j is the "pre_tokenizer" value of tokenizer.json.
    static Expected<PreTokenizer> from_json(const nlohmann::json& j);
    // Appends the pre-tokens (byte-level mapped, never empty) of one normalized segment to out.
    void apply(std::string_view s, std::vector<std::string>& out) const;

private:
    struct Step {
        enum Kind { kSplit, kByteLevel } kind;
        Regex regex;                 // Split pattern, or the GPT-2 regex for ByteLevel with use_regex
        bool use_regex = false;      // ByteLevel only
        bool add_prefix_space = false;
    };
    static Status parse(const nlohmann::json& j, std::vector<Step>& steps);
    std::vector<Step> steps_;
};

}  // namespace ember
