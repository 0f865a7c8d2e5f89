// A tokenizer's vocabulary as the grammar matcher sees it: each token's byte string, in a trie.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::grammar {

// A byte trie in preorder: node 0 is the root (empty prefix); node i's subtree is [i, end[i]); its children
// are i + 1, end[i + 1], ... Each node lists the ids whose string ends there (duplicates share a node).
struct Trie {
    std::vector<uint8_t> byte;        // [n] byte on the edge into the node (root: 0)
    std::vector<uint32_t> end;        // [n]
    std::vector<uint16_t> depth;      // [n] prefix length
    std::vector<uint32_t> tok_begin;  // [n + 1] into toks
    std::vector<int32_t> toks;
    int max_depth = 0;
    // entries: (string, id); strings must be non-empty and at most 65535 bytes.
    static Trie build(std::vector<std::pair<std::string, int32_t>> entries);
    // The same from entries already sorted (by string, then id), as views (no copies).
    static Trie build_sorted(const std::vector<std::pair<std::string_view, int32_t>>& entries);
    uint32_t size() const { return uint32_t(byte.size()); }
    bool has_children(uint32_t i) const { return end[i] > i + 1; }
};

class TokenIndex {
public:
    // bytes[id]: the raw bytes token id stands for; "" for tokens a grammar never allows (special/control
    // tokens). eos: ids allowed exactly when the grammar is complete.
    static std::shared_ptr<const TokenIndex> build(std::vector<std::string> bytes, std::vector<int32_t> eos);
    int32_t vocab_size() const { return int32_t(bytes_.size()); }
    int64_t mask_words() const { return (int64_t(bytes_.size()) + 31) / 32; }
    const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
    const std::vector<int32_t>& eos() const { return eos_; }
    bool is_eos(int32_t id) const;
    const Trie& trie() const { return trie_; }

    // The plain-text slice (llguidance's "slicer", in our form): "plain" tokens are complete UTF-8 of characters
    // a JSON string holds unescaped (no control, '"' or '\\'). For a DFA state from which any k ≤ K plain
    // characters lead to a live state, the plain tokens of ≤ τ characters (τ ≤ K) are allowed without a walk and
    // only the other tokens are walked: slice(K) picks the largest such τ (0 = none: walk the whole trie).
    struct Slice {
        int tau;                        // plain tokens of ≤ tau characters are covered (0: none)
        const std::vector<uint32_t>* covered;  // their bit words
        const Trie* rest;               // every other token
    };
    Slice slice(int64_t K) const;
    // Exactly the plain tokens of at most c characters (bit words), and the trie of all non-plain tokens.
    const std::vector<uint32_t>& plain_upto(int64_t c) const { return plain_upto_[size_t(std::min<int64_t>(c, max_plain_))]; }
    const Trie& nonplain_trie() const { return rest_.back(); }
    int max_plain_chars() const { return max_plain_; }

private:
    std::vector<std::string> bytes_;
    std::vector<int32_t> eos_;
    Trie trie_;
    int max_plain_ = 0;
    std::vector<int> taus_;                      // ascending
    std::vector<Trie> rest_;                     // per tau: non-plain tokens and plain ones longer than tau
    std::vector<std::vector<uint32_t>> covered_;  // per tau
    std::vector<std::vector<uint32_t>> plain_upto_;  // [c]: plain tokens of ≤ c characters
};

}  // namespace ember::grammar
