// Token trie construction: sort the strings, then one pass keeping the path of the previous string.
#include "grammar/token_index.h"

#include <algorithm>

#include "core/check.h"

namespace ember::grammar {

Trie Trie::build(std::vector<std::pair<std::string, int32_t>> entries) {
    std::sort(entries.begin(), entries.end());
    Trie t;
    t.byte.push_back(0);
    t.end.push_back(0);
    t.depth.push_back(0);
    std::vector<uint32_t> tok_node;  // node of each entry, in entry order
    std::vector<uint32_t> path = {0};
    const std::string* prev = nullptr;
    for (const auto& [s, id] : entries) {
        EMBER_CHECK(!s.empty() && s.size() <= 65535, "trie entry of %zu bytes", s.size());
        size_t lcp = 0;
        if (prev)
            while (lcp < prev->size() && lcp < s.size() && (*prev)[lcp] == s[lcp]) ++lcp;
        while (path.size() > lcp + 1) {
            t.end[path.back()] = uint32_t(t.byte.size());
            path.pop_back();
        }
        for (size_t k = lcp; k < s.size(); ++k) {
            path.push_back(uint32_t(t.byte.size()));
            t.byte.push_back(uint8_t(s[k]));
            t.end.push_back(0);
            t.depth.push_back(uint16_t(k + 1));
        }
        tok_node.push_back(path.back());
        t.max_depth = std::max(t.max_depth, int(s.size()));
        prev = &s;
    }
    while (!path.empty()) {
        t.end[path.back()] = uint32_t(t.byte.size());
        path.pop_back();
    }
    // Entries are sorted, so each node's ids are contiguous in entry order; nodes are in preorder.
    const size_t n = t.byte.size();
    t.tok_begin.assign(n + 1, 0);
    for (uint32_t nd : tok_node) t.tok_begin[nd + 1]++;
    for (size_t i = 0; i < n; ++i) t.tok_begin[i + 1] += t.tok_begin[i];
    t.toks.resize(entries.size());
    std::vector<uint32_t> fill(t.tok_begin.begin(), t.tok_begin.end() - 1);
    for (size_t e = 0; e < entries.size(); ++e) t.toks[fill[tok_node[e]]++] = entries[e].second;
    return t;
}

std::shared_ptr<const TokenIndex> TokenIndex::build(std::vector<std::string> bytes, std::vector<int32_t> eos) {
    auto ti = std::make_shared<TokenIndex>();
    std::vector<std::pair<std::string, int32_t>> entries;
    for (size_t i = 0; i < bytes.size(); ++i)
        if (!bytes[i].empty() && bytes[i].size() <= 65535) entries.push_back({bytes[i], int32_t(i)});
    ti->trie_ = Trie::build(std::move(entries));
    std::sort(eos.begin(), eos.end());
    eos.erase(std::unique(eos.begin(), eos.end()), eos.end());
    std::vector<int32_t> ok;
    for (int32_t e : eos)
        if (e >= 0 && size_t(e) < bytes.size()) ok.push_back(e);
    ti->eos_ = std::move(ok);
    ti->bytes_ = std::move(bytes);
    return ti;
}

bool TokenIndex::is_eos(int32_t id) const { return std::binary_search(eos_.begin(), eos_.end(), id); }

}  // namespace ember::grammar
