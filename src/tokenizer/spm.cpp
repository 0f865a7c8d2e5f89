// spm.cpp: SentencePiece BPE merging as llama.cpp's llm_tokenizer_spm (spec: spm.h).
#include "tokenizer/spm.h"

#include <algorithm>
#include <queue>

namespace ember {
namespace {

constexpr std::string_view kSpace = "\xe2\x96\x81";  // U+2581

// Bytes of the UTF-8 sequence a lead byte starts (by its high nibble, as llama.cpp's unicode_len_utf8).
size_t sequence_length(unsigned char lead) {
    static constexpr size_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kLen[lead >> 4];
}

struct Symbol {
    int prev, next;
    size_t begin, len;  // bytes of the fragment; len 0 once merged into its left neighbour
};

struct Bigram {
    int left, right;
    float score;
    size_t len;  // bytes of the pair when it was queued (stale once either side changed)
};

// Highest score first; equal scores: the leftmost pair first.
struct Lower {
    bool operator()(const Bigram& a, const Bigram& b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};

}  // namespace

Spm::Spm(std::unordered_map<std::string, int32_t> vocab, std::vector<float> scores, std::vector<int32_t> byte_ids,
         int32_t unk_id)
    : vocab_(std::move(vocab)), scores_(std::move(scores)), byte_ids_(std::move(byte_ids)), unk_id_(unk_id) {}

void Spm::encode(std::string_view text, std::vector<int32_t>& out) const {
    std::vector<Symbol> sym;
    for (size_t off = 0; off < text.size();) {
        const size_t n = std::min(sequence_length(static_cast<unsigned char>(text[off])), text.size() - off);
        const int i = static_cast<int>(sym.size());
        sym.push_back({i - 1, off + n == text.size() ? -1 : i + 1, off, n});
        off += n;
    }
    std::priority_queue<Bigram, std::vector<Bigram>, Lower> queue;
    auto try_pair = [&](int l, int r) {
        if (l < 0 || r < 0) return;
        auto it = vocab_.find(std::string(text.substr(sym[l].begin, sym[l].len + sym[r].len)));
        if (it == vocab_.end()) return;
        const float score = it->second < static_cast<int32_t>(scores_.size()) ? scores_[it->second] : 0.f;
        queue.push({l, r, score, sym[l].len + sym[r].len});
    };
    for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_pair(i - 1, i);
    while (!queue.empty()) {
        const Bigram b = queue.top();
        queue.pop();
        Symbol &l = sym[b.left], &r = sym[b.right];
        if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;  // a side was merged since
        l.len += r.len;
        r.len = 0;
        l.next = r.next;
        if (r.next >= 0) sym[r.next].prev = b.left;
        try_pair(l.prev, b.left);
        try_pair(b.left, l.next);
    }
    for (int i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
        const std::string_view piece = text.substr(sym[i].begin, sym[i].len);
        if (auto it = vocab_.find(std::string(piece)); it != vocab_.end()) {
            out.push_back(it->second);
            continue;
        }
        // Merged symbols are tokens by construction: this is one character that is not — its bytes.
        for (unsigned char c : piece) {
            const int32_t id = byte_ids_.empty() ? -1 : byte_ids_[c];
            if (id >= 0) out.push_back(id);
            else if (unk_id_ >= 0) out.push_back(unk_id_);
        }
    }
}

std::string spm_escape_spaces(std::string_view text) {
    std::string s;
    s.reserve(text.size());
    for (char c : text) {
        if (c == ' ') s += kSpace;
        else s += c;
    }
    return s;
}

std::string spm_unescape_spaces(std::string_view text) {
    std::string s;
    s.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        if (text.substr(i, kSpace.size()) == kSpace) {
            s += ' ';
            i += kSpace.size();
        } else {
            s += text[i++];
        }
    }
    return s;
}

}  // namespace ember
