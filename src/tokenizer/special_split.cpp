// special_split.cpp: llama.cpp-style special-token partition (see special_split.h).
#include "tokenizer/special_split.h"

#include <algorithm>

#include "core/check.h"

namespace ember {

void SpecialTokenSplitter::add(int32_t id, std::string text, bool control) {
    if (text.empty()) return;
    tokens_.push_back({id, std::move(text), control});
    sorted_ = false;
}

void SpecialTokenSplitter::finalize() {
    std::sort(tokens_.begin(), tokens_.end(), [](const Tok& a, const Tok& b) {
        return a.text.size() != b.text.size() ? a.text.size() > b.text.size() : a.id < b.id;
    });
    sorted_ = true;
}

std::vector<Segment> SpecialTokenSplitter::split(std::string_view s, bool parse_special) const {
    EMBER_CHECK(sorted_, "SpecialTokenSplitter::split before finalize()");
    std::vector<Segment> cur, next;
    if (s.empty()) return cur;
    cur.push_back({0, s.size(), -1});
    for (const Tok& t : tokens_) {
        if (t.control && !parse_special) continue;
        next.clear();
        for (const Segment& f : cur) {
            if (f.id >= 0) {
                next.push_back(f);
                continue;
            }
            size_t pos = f.begin;
            while (pos < f.end) {
                size_t m = s.substr(0, f.end).find(t.text, pos);
                if (m == std::string_view::npos) break;
                if (m > pos) next.push_back({pos, m, -1});
                next.push_back({m, m + t.text.size(), t.id});
                pos = m + t.text.size();
            }
            if (pos < f.end) next.push_back({pos, f.end, -1});
        }
        std::swap(cur, next);
    }
    return cur;
}

}  // namespace ember
