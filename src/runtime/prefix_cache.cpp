// The exact prefix cache of the batched engine (prefix_cache.h).
#include "runtime/prefix_cache.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "models/state_io.h"

namespace ember {

struct PrefixCache::Entry {
    Key key = 0, parent = 0;  // parent 0: the first block
    int64_t depth = 0;        // this entry is the prefix of depth · block tokens
    std::vector<int32_t> tokens;  // its block's tokens
    // The model's checkpoint of the state at depth · block: KV rows of this block only, the recurrent state whole
    // (CausalLM::batch_snapshot).
    std::unique_ptr<SlotSnapshot> snap;
    std::vector<Key> children;
    int64_t bytes = 0;
    std::list<Key>::iterator lru;
};

PrefixCache::PrefixCache(const CausalLM& model, PrefixCacheOptions opt) : model_(model), opt_(opt) {
    enabled_ = opt_.block > 0 && opt_.budget_bytes > 0 && !model_.state_layout(0).empty();
}

PrefixCache::~PrefixCache() = default;

PrefixCache::Key PrefixCache::link_key(Key parent, const int32_t* t, int64_t n) {
    uint64_t h = parent ^ 0x9e3779b97f4a7c15ull;  // FNV-1a over the parent's key and the block's token ids
    auto mix = [&](uint64_t v) {
        for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
    };
    mix(parent);
    for (int64_t i = 0; i < n; ++i) mix(uint64_t(uint32_t(t[i])));
    return h == 0 ? 1 : h;  // 0 names "no parent"
}

PrefixCache::Entry* PrefixCache::find(Key parent, int64_t depth, const int32_t* tokens) {
    const int32_t* blk = tokens + (depth - 1) * opt_.block;
    auto it = entries_.find(link_key(parent, blk, opt_.block));
    if (it == entries_.end()) return nullptr;
    Entry* e = it->second.get();
    if (e->parent != parent || e->depth != depth ||
        !std::equal(e->tokens.begin(), e->tokens.end(), blk))  // a hash collision
        return nullptr;
    return e;
}

void PrefixCache::touch(Entry* e) {
    lru_.erase(e->lru);
    lru_.push_front(e->key);
    e->lru = lru_.begin();
}

Expected<int64_t> PrefixCache::restore(BatchState& b, int64_t slot, const int32_t* tokens, int64_t n) {
    if (!enabled_) return int64_t(0);
    stats_.lookups++;
    std::vector<Entry*> chain;
    Key parent = 0;
    for (int64_t d = 1; d * opt_.block < n; ++d) {
        Entry* e = find(parent, d, tokens);
        if (!e) break;
        chain.push_back(e);
        parent = e->key;
    }
    if (chain.empty()) return int64_t(0);
    const int64_t pos = int64_t(chain.size()) * opt_.block;
    // The state at pos: each KV tensor from the chain's blocks, the recurrent tensors of the last link.
    std::vector<const SlotSnapshot*> links;
    for (const Entry* e : chain) links.push_back(e->snap.get());
    const auto t0 = std::chrono::steady_clock::now();
    EMBER_TRY(model_.batch_restore_links(b, slot, opt_.block, links));
    stats_.restore_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) touch(*it);  // the root ends most recent
    stats_.hits++;
    stats_.tokens_reused += pos;
    return pos;
}

Status PrefixCache::offer(BatchState& b, int64_t slot, const int32_t* tokens) {
    if (!enabled_) return Status::ok();
    const int64_t pos = b.pos[size_t(slot)];
    if (pos == 0 || pos % opt_.block != 0) return Status::ok();
    const int64_t depth = pos / opt_.block;
    std::vector<Entry*> chain;  // the links above it, which must all be there
    Key parent = 0;
    for (int64_t d = 1; d < depth; ++d) {
        Entry* e = find(parent, d, tokens);
        if (!e) return Status::ok();
        chain.push_back(e);
        parent = e->key;
    }
    const Key key = link_key(parent, tokens + (depth - 1) * opt_.block, opt_.block);
    if (entries_.count(key)) return Status::ok();  // cached already (or a collision: keep the one there)
    const auto t0 = std::chrono::steady_clock::now();
    EMBER_ASSIGN(std::unique_ptr<SlotSnapshot> snap, model_.batch_snapshot(b, slot, pos - opt_.block));
    stats_.offer_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    auto e = std::make_unique<Entry>();
    e->key = key;
    e->parent = parent;
    e->depth = depth;
    e->tokens.assign(tokens + (depth - 1) * opt_.block, tokens + depth * opt_.block);
    e->snap = std::move(snap);
    e->bytes = int64_t(sizeof(Entry)) + int64_t(e->tokens.size()) * 4 + e->snap->bytes;
    if (e->bytes > opt_.budget_bytes) return Status::ok();  // one checkpoint would not fit the budget
    // Room for it: the links above it are refreshed first (the most recently used), so what goes is other
    // prefixes' checkpoints; if only its own chain is left and still too much, it is not kept.
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) touch(*it);
    const int64_t room = opt_.budget_bytes - e->bytes;
    while (stats_.bytes > room && lru_.size() > chain.size()) drop(lru_.back());
    if (stats_.bytes > room) return Status::ok();
    lru_.push_front(key);
    e->lru = lru_.begin();
    stats_.bytes += e->bytes;
    stats_.entries++;
    stats_.stored++;
    entries_.emplace(key, std::move(e));
    if (parent) entries_.at(parent)->children.push_back(key);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) touch(*it);  // the links above outlive the new leaf
    return Status::ok();
}

void PrefixCache::drop(Key k) {
    auto it = entries_.find(k);
    if (it == entries_.end()) return;
    std::unique_ptr<Entry> e = std::move(it->second);
    entries_.erase(it);
    lru_.erase(e->lru);
    stats_.bytes -= e->bytes;
    stats_.entries--;
    stats_.evicted++;
    if (e->parent) {
        auto p = entries_.find(e->parent);
        if (p != entries_.end()) {
            auto& ch = p->second->children;
            ch.erase(std::remove(ch.begin(), ch.end(), k), ch.end());
        }
    }
    for (Key c : e->children) drop(c);
}

PrefixCacheStats PrefixCache::stats() const { return stats_; }

}  // namespace ember
