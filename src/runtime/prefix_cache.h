// prefix_cache.h: an exact prefix cache for the batched engine, hybrid (recurrent) models included.
//
// A sequence's state after a prefix of `block` tokens × k (k = 1, 2, …) is kept as a checkpoint: the attention KV
// rows of its last block, and the whole recurrent state (GDN S + conv) at that boundary. Checkpoints form chains
// keyed by a hash of the token prefix (each checkpoint names its parent and holds its block's tokens, so a hit is
// verified token by token, never trusted to the hash). A new sequence whose prompt starts with a cached prefix
// starts from the deepest checkpoint — its KV rows gathered from the chain, the recurrent state of the last link —
// instead of recomputing the prompt. Because the state at a block boundary is what the model computed there, a
// restored sequence continues exactly as the uncached one (bit for bit when the prompt is prefilled in chunks of
// `block` tokens both ways, as the server's queue does).
//
// Memory is bounded (budget_bytes, counted in the memory the model keeps checkpoints in: host memory on the CPU,
// device memory on CUDA — CausalLM::batch_snapshot); past it the least recently used checkpoints go, leaves before
// the links they hang from (a lookup refreshes a chain root last, so roots outlive their leaves).
// Works for every model with saved-session tensors (CausalLM::state_layout; Llama-family models have only KV).
// Not thread-safe: the owner (the engine queue's worker) calls it from one thread.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "models/model.h"

namespace ember {

struct PrefixCacheOptions {
    int64_t block = 256;                    // tokens per checkpoint (the queue's prefill chunk)
    int64_t budget_bytes = int64_t(1) << 30;  // memory for checkpoints (host, or device on CUDA); 0 = off
};

struct PrefixCacheStats {
    int64_t lookups = 0, hits = 0;  // restore() calls, and those that found a checkpoint
    int64_t tokens_reused = 0;      // prompt tokens restored instead of recomputed
    int64_t stored = 0, evicted = 0;
    int64_t entries = 0, bytes = 0;  // now
    int64_t restore_ns = 0, offer_ns = 0;  // time in the model's imports (restore) and exports (checkpoints)
};

class PrefixCache {
public:
    PrefixCache(const CausalLM& model, PrefixCacheOptions opt);
    ~PrefixCache();
    // Whether the cache can work: a budget and a model that can snapshot its state.
    bool enabled() const { return enabled_; }
    const PrefixCacheOptions& options() const { return opt_; }

    // Puts into `slot` the deepest cached prefix of tokens[0, n) that leaves at least one token to compute (the
    // last token's logits come from the model); returns its length (0: none, the slot was not touched).
    Expected<int64_t> restore(BatchState& b, int64_t slot, const int32_t* tokens, int64_t n);
    // Called when `slot` has consumed tokens[0, b.pos[slot]): at a block boundary whose prefix is not cached yet,
    // checkpoints it (the slot's state is read, not changed). Needs the checkpoint of the block before it, so a
    // slot that skipped a boundary (or started from a restore) only adds links where its chain is complete.
    Status offer(BatchState& b, int64_t slot, const int32_t* tokens);

    PrefixCacheStats stats() const;

private:
    struct Entry;
    using Key = uint64_t;
    static Key link_key(Key parent, const int32_t* block_tokens, int64_t n);
    // The entry of prefix tokens[0, (depth)·block) given its parent's key, verified; nullptr if absent.
    Entry* find(Key parent, int64_t depth, const int32_t* tokens);
    void touch(Entry* e);
    void drop(Key k);  // an entry and every link below it

    const CausalLM& model_;
    PrefixCacheOptions opt_;
    bool enabled_ = false;
    std::unordered_map<Key, std::unique_ptr<Entry>> entries_;
    std::list<Key> lru_;  // most recently used first
    PrefixCacheStats stats_;
};

}  // namespace ember
