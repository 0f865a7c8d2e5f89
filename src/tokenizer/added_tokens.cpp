// added_tokens.cpp: added-token matching with HF semantics (tokenizers added_vocabulary.rs find_matches).
#include "tokenizer/added_tokens.h"

#include <algorithm>
#include <cstring>

#include "tokenizer/utf8.h"

namespace ember {
namespace {

// Byte length of the whitespace run that ends at s.size() (Rust `\s*$`).
size_t trailing_space(std::string_view s) {
    size_t i = s.size();
    while (i > 0) {
        size_t j = i - 1;
        while (j > 0 && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) --j;
        if (!utf8::is_white_space(utf8::first_cp(s.substr(j)))) break;
        i = j;
    }
    return s.size() - i;
}

// Byte length of the whitespace run that starts s (Rust `^\s*`).
size_t leading_space(std::string_view s) {
    size_t i = 0;
    auto p = reinterpret_cast<const unsigned char*>(s.data());
    while (i < s.size()) {
        uint32_t cp;
        int k = utf8::scan(p + i, s.size() - i, &cp);
        if (k <= 0 || !utf8::is_white_space(cp)) break;
        i += static_cast<size_t>(k);
    }
    return i;
}

}  // namespace

void AddedTokenMatcher::add(AddedToken t) {
    if (t.content.empty()) return;  // HF ignores empty added tokens
    auto& bucket = by_first_byte_[static_cast<unsigned char>(t.content[0])];
    tokens_.push_back(std::move(t));
    bucket.push_back(static_cast<int>(tokens_.size() - 1));
    std::stable_sort(bucket.begin(), bucket.end(),
                     [this](int a, int b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
}

std::vector<Segment> AddedTokenMatcher::split(std::string_view s, bool parse_special) const {
    std::vector<Segment> out;
    size_t start_offset = 0;  // end of the previous accepted match
    size_t pos = 0;           // where the leftmost-longest search continues
    while (pos < s.size()) {
        // Leftmost-longest match at or after pos (the Aho-Corasick iterator HF uses).
        const AddedToken* hit = nullptr;
        for (; pos < s.size() && !hit; ++pos)
            for (int i : by_first_byte_[static_cast<unsigned char>(s[pos])]) {
                const std::string& c = tokens_[i].content;
                if (c.size() <= s.size() - pos && std::memcmp(s.data() + pos, c.data(), c.size()) == 0) {
                    hit = &tokens_[i];
                    break;
                }
            }
        if (!hit) break;
        size_t start = pos - 1, stop = start + hit->content.size();
        pos = stop;  // the iterator resumes after this match even if the rules below discard it
        if (hit->special && !parse_special) continue;
        if (hit->single_word) {
            bool start_ok = start == 0 || !utf8::is_word_char(utf8::last_cp(s.substr(0, start)));
            bool stop_ok = stop == s.size() || !utf8::is_word_char(utf8::first_cp(s.substr(stop)));
            if (!start_ok || !stop_ok) continue;
        }
        if (hit->lstrip) start = std::max(start - trailing_space(s.substr(0, start)), start_offset);
        if (hit->rstrip) stop += leading_space(s.substr(stop));
        if (start_offset < start) out.push_back({start_offset, start, -1});
        out.push_back({start, stop, hit->id});
        start_offset = stop;
    }
    if (start_offset < s.size() || s.empty()) out.push_back({start_offset, s.size(), -1});
    return out;
}

}  // namespace ember
