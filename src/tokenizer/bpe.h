// bpe.h: the BPE model of tokenizer.json: vocab + ranked merges, applied to one pre-token at a time.
// Merging follows HF tokenizers (models/bpe/word.rs merge_all): repeatedly merge the adjacent pair with the
// lowest merge rank, leftmost first. Results for short words are cached (thread-safe).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace ember {

class Bpe {
public:
    // j is the "model" object of tokenizer.json (type BPE).
    static Expected<std::unique_ptr<Bpe>> from_json(const nlohmann::json& j);
    // GGUF vocabularies (llama.cpp semantics): merges are "a b" split at the first space after the first byte;
    // a repeated pair keeps its first (lowest) rank; no unknown token.
    static Expected<std::unique_ptr<Bpe>> from_vocab(std::unordered_map<std::string, int32_t> vocab,
                                                     const std::vector<std::string>& merges, bool ignore_merges);

    // Appends the ids of one pre-token (already byte-level mapped) to out.
    void encode(std::string_view word, std::vector<int32_t>& out) const;

    const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

private:
    std::vector<int32_t> merge_word(std::string_view word) const;
    // Registers merge (a, b) with `rank`; keep_first: an existing entry for the pair is left alone.
    Status add_merge(const std::string& a, const std::string& b, uint32_t rank, bool keep_first);

    struct Merge {
        uint32_t rank;
        int32_t new_id;
    };
    std::unordered_map<std::string, int32_t> vocab_;
    std::unordered_map<uint64_t, Merge> merges_;  // key: (left id << 32) | right id
    int32_t unk_id_ = -1;
    bool fuse_unk_ = false, ignore_merges_ = false;

    // Cache of merge results for words shorter than kCacheMaxLen bytes (cleared when full).
    static constexpr size_t kCacheCapacity = 10000, kCacheMaxLen = 256;
    mutable std::mutex cache_mu_;
    mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace ember
