// Token trie construction: sort the strings, then one pass keeping the path of the previous string.
#include "grammar/token_index.h"

#include <algorithm>

#include "core/check.h"

namespace ember::grammar {

Trie Trie::build(std::vector<std::pair<std::string, int32_t>> entries) {
    std::sort(entries.begin(), entries.end());
    std::vector<std::pair<std::string_view, int32_t>> views;
    views.reserve(entries.size());
    for (const auto& [s, id] : entries) views.push_back({s, id});
    return build_sorted(views);
}

Trie Trie::build_sorted(const std::vector<std::pair<std::string_view, int32_t>>& entries) {
    Trie t;
    t.byte.push_back(0);
    t.end.push_back(0);
    t.depth.push_back(0);
    std::vector<uint32_t> tok_node;  // node of each entry, in entry order
    std::vector<uint32_t> path = {0};
    const std::string_view* prev = nullptr;
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

namespace {
// Characters of s if it is complete UTF-8 of characters a JSON string holds unescaped, else −1.
int plain_chars(const std::string& s) {
    int n = 0;
    for (size_t i = 0; i < s.size();) {
        const unsigned char b = static_cast<unsigned char>(s[i]);
        if (b < 0x80) {
            if (b < 0x20 || b == '"' || b == '\\') return -1;
            ++i;
        } else {
            const int len = (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
            if (len == 0 || i + size_t(len) > s.size()) return -1;
            uint32_t c = b & (0x7Fu >> len);
            for (int k = 1; k < len; ++k) {
                const unsigned char x = static_cast<unsigned char>(s[i + size_t(k)]);
                if ((x & 0xC0) != 0x80) return -1;
                c = (c << 6) | (x & 0x3F);
            }
            static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
            if (c < kMin[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return -1;
            i += size_t(len);
        }
        ++n;
    }
    return n;
}
}  // namespace

std::shared_ptr<const TokenIndex> TokenIndex::build(std::vector<std::string> bytes, std::vector<int32_t> eos) {
    auto ti = std::make_shared<TokenIndex>();
    std::vector<std::pair<std::string, int32_t>> entries;
    std::vector<int> chars(bytes.size(), -1);
    int max_c = 0;
    for (size_t i = 0; i < bytes.size(); ++i)
        if (!bytes[i].empty() && bytes[i].size() <= 65535) {
            entries.push_back({bytes[i], int32_t(i)});
            chars[i] = std::find(eos.begin(), eos.end(), int32_t(i)) != eos.end() ? -1 : plain_chars(bytes[i]);
            max_c = std::max(max_c, chars[i]);
        }
    ti->trie_ = Trie::build(std::move(entries));
    ti->max_plain_ = max_c;
    const size_t W = (bytes.size() + 31) / 32;
    ti->plain_upto_.assign(size_t(max_c) + 1, std::vector<uint32_t>(W, 0u));
    for (size_t i = 0; i < bytes.size(); ++i)
        if (chars[i] > 0) ti->plain_upto_[size_t(chars[i])][i >> 5] |= 1u << (i & 31);
    for (size_t c = 1; c < ti->plain_upto_.size(); ++c)
        for (size_t w = 0; w < W; ++w) ti->plain_upto_[c][w] |= ti->plain_upto_[c - 1][w];
    for (int tau : {2, 4, 8, 16, 32, max_c}) {
        if (tau > max_c || (!ti->taus_.empty() && tau <= ti->taus_.back())) continue;
        std::vector<std::pair<std::string, int32_t>> rest;
        std::vector<uint32_t> cov(W, 0u);
        for (size_t i = 0; i < bytes.size(); ++i) {
            if (bytes[i].empty() || bytes[i].size() > 65535) continue;
            if (chars[i] >= 1 && chars[i] <= tau) cov[i >> 5] |= 1u << (i & 31);
            else rest.push_back({bytes[i], int32_t(i)});
        }
        ti->taus_.push_back(tau);
        ti->rest_.push_back(Trie::build(std::move(rest)));
        ti->covered_.push_back(std::move(cov));
    }
    std::sort(eos.begin(), eos.end());
    eos.erase(std::unique(eos.begin(), eos.end()), eos.end());
    std::vector<int32_t> ok;
    for (int32_t e : eos)
        if (e >= 0 && size_t(e) < bytes.size()) ok.push_back(e);
    ti->eos_ = std::move(ok);
    ti->bytes_ = std::move(bytes);
    return ti;
}

TokenIndex::Slice TokenIndex::slice(int64_t K) const {
    for (size_t k = taus_.size(); k-- > 0;)
        if (taus_[k] <= K) return {taus_[k], &covered_[k], &rest_[k]};
    return {0, nullptr, &trie_};
}

bool TokenIndex::is_eos(int32_t id) const { return std::binary_search(eos_.begin(), eos_.end(), id); }

}  // namespace ember::grammar
