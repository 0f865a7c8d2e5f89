// runtime/prefix_cache_test_util.h: the prefix-cache checks shared by the CPU tests (tests/runtime/
// prefix_cache_test.cpp) and the GPU tests (backend/cuda/prefix_cache_cuda_test.cpp). The oracle of a cache hit is
// the same prompt computed without the cache (the same chunks of `block` tokens, in another slot of the pool):
// the logits of its last prompt token and of the greedy steps after it must match, and the hit must restore the
// deepest cached block boundary that leaves a token to compute.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "models/batch_test_util.h"
#include "runtime/prefix_cache.h"

namespace ember::prefixtest {

struct Run {
    int64_t restored = 0;
    std::vector<std::vector<float>> logits;  // the last prompt token's, then one per greedy step
};

// The prompt into `slot` (reset first) in chunks of `block` tokens — from the cache's deepest checkpoint when
// `cache` is given, offering a checkpoint after every chunk — then `steps` greedy decode steps.
inline Run run(const CausalLM& m, BatchState& b, int32_t slot, const std::vector<int32_t>& p, int64_t block,
               PrefixCache* cache, int64_t steps) {
    const int64_t V = m.info().vocab_size, n = int64_t(p.size());
    Run r;
    EXPECT_TRUE(m.batch_reset(b, slot).is_ok());
    if (cache) {
        auto got = cache->restore(b, slot, p.data(), n);
        EXPECT_TRUE(got.is_ok()) << got.message();
        r.restored = got.is_ok() ? got.value() : 0;
        EXPECT_EQ(b.pos[size_t(slot)], r.restored);
    }
    std::vector<float> lg(static_cast<size_t>(V));
    for (int64_t off = r.restored; off < n; off += block) {
        const int64_t k = std::min(block, n - off);
        const Status s = m.batch_prefill(b, slot, p.data() + off, k, off + k == n ? lg.data() : nullptr);
        EXPECT_TRUE(s.is_ok()) << s.message();
        if (cache) {
            const Status o = cache->offer(b, slot, p.data());
            EXPECT_TRUE(o.is_ok()) << o.message();
        }
    }
    r.logits.push_back(lg);
    for (int64_t i = 0; i < steps; ++i) {
        const int32_t t = argmax(lg.data(), V);
        const Status s = m.batch_decode(b, &slot, &t, 1, lg.data());
        EXPECT_TRUE(s.is_ok()) << s.message();
        r.logits.push_back(lg);
    }
    return r;
}

// Worst rel_err over the runs' logits (they must have the same length).
inline double worst(const Run& got, const Run& want) {
    EXPECT_EQ(got.logits.size(), want.logits.size());
    double w = 0;
    for (size_t i = 0; i < std::min(got.logits.size(), want.logits.size()); ++i)
        w = std::max(w, batchtest::rel_err(got.logits[i].data(), want.logits[i]));
    return w;
}

// Hits equal misses: a repeated prompt, a prompt sharing part of it, a prompt of exactly k blocks, a prompt that
// shares nothing. Returns the worst error seen.
inline double check_hit_equals_miss(const CausalLM& m, int64_t block, double tol) {
    const int64_t V = m.info().vocab_size;
    PrefixCache cache(m, {block, int64_t(1) << 30});
    EXPECT_TRUE(cache.enabled());
    auto bb = m.new_batch(3);
    EXPECT_TRUE(bb.is_ok()) << bb.message();
    if (!bb.is_ok()) return 1e30;
    BatchState& b = **bb;
    const std::vector<int32_t> a = batchtest::make_prompt(V, 3 * block + 3, 11);
    const Run ref_a = run(m, b, 0, a, block, nullptr, 6);
    const Run miss = run(m, b, 1, a, block, &cache, 6);  // fills the cache
    EXPECT_EQ(miss.restored, 0);
    double w = worst(miss, ref_a);  // offering checkpoints leaves the sequence as it was
    EXPECT_EQ(cache.stats().entries, 3);
    const Run hit = run(m, b, 2, a, block, &cache, 6);
    EXPECT_EQ(hit.restored, 3 * block);
    w = std::max(w, worst(hit, ref_a));

    std::vector<int32_t> shared(a.begin(), a.begin() + 2 * block + 1);  // two whole blocks and a token of the third
    const std::vector<int32_t> tail = batchtest::make_prompt(V, block + 4, 12);
    shared.insert(shared.end(), tail.begin(), tail.end());
    const Run ref_s = run(m, b, 0, shared, block, nullptr, 4);
    const Run hit_s = run(m, b, 1, shared, block, &cache, 4);
    EXPECT_EQ(hit_s.restored, 2 * block);
    w = std::max(w, worst(hit_s, ref_s));

    const std::vector<int32_t> exact(a.begin(), a.begin() + 2 * block);  // a token must be left to compute
    const Run ref_e = run(m, b, 0, exact, block, nullptr, 2);
    const Run hit_e = run(m, b, 1, exact, block, &cache, 2);
    EXPECT_EQ(hit_e.restored, block);
    w = std::max(w, worst(hit_e, ref_e));

    std::vector<int32_t> other = a;
    other[0] = (other[0] + 1) % int32_t(V);  // the first block differs: nothing to reuse
    const Run none = run(m, b, 2, other, block, &cache, 0);
    EXPECT_EQ(none.restored, 0);
    const PrefixCacheStats st = cache.stats();
    EXPECT_EQ(st.hits, 3);
    EXPECT_EQ(st.tokens_reused, 3 * block + 2 * block + block);
    EXPECT_LE(w, tol);
    return w;
}

// A budget of about two checkpoints: a chain stops growing where the next link would not fit beside its own
// links; another prefix's checkpoints push the least recently used out, a chain is never used with a link
// missing, and what is restored is still exact.
inline void check_eviction(const CausalLM& m, int64_t block, double tol) {
    const int64_t V = m.info().vocab_size;
    auto bb = m.new_batch(2);
    ASSERT_TRUE(bb.is_ok()) << bb.message();
    BatchState& b = **bb;
    const std::vector<int32_t> a = batchtest::make_prompt(V, 4 * block + 1, 21);
    std::vector<int32_t> c = batchtest::make_prompt(V, 4 * block + 1, 22);
    if (c[0] == a[0]) c[0] = (c[0] + 1) % int32_t(V);
    int64_t per_entry = 0;
    {
        PrefixCache big(m, {block, int64_t(1) << 30});
        run(m, b, 0, a, block, &big, 0);
        ASSERT_EQ(big.stats().entries, 4);
        per_entry = big.stats().bytes / 4;
    }
    PrefixCache cache(m, {block, per_entry * 5 / 2});
    run(m, b, 1, a, block, &cache, 0);
    PrefixCacheStats st = cache.stats();
    EXPECT_EQ(st.entries, 2);  // the first two blocks of a; the third did not fit beside them
    EXPECT_EQ(st.evicted, 0);
    const Run ref_c = run(m, b, 0, c, block, nullptr, 3);
    run(m, b, 1, c, block, &cache, 0);  // c's checkpoints push a's out
    st = cache.stats();
    EXPECT_EQ(st.entries, 2);
    EXPECT_EQ(st.evicted, 2);
    EXPECT_LE(st.bytes, per_entry * 5 / 2);
    ASSERT_TRUE(m.batch_reset(b, 1).is_ok());  // a lookup only (a run would offer a's blocks again)
    auto hit_a = cache.restore(b, 1, a.data(), int64_t(a.size()));
    ASSERT_TRUE(hit_a.is_ok()) << hit_a.message();
    EXPECT_EQ(hit_a.value(), 0);
    const Run hit_c = run(m, b, 1, c, block, &cache, 3);
    EXPECT_EQ(hit_c.restored, 2 * block);
    EXPECT_LE(worst(hit_c, ref_c), tol);
    const Run ref = run(m, b, 0, a, block, nullptr, 3);
    // A checkpoint larger than the whole budget is not kept, and nothing breaks.
    PrefixCache tiny(m, {block, per_entry / 2});
    const Run t = run(m, b, 1, a, block, &tiny, 3);
    EXPECT_EQ(t.restored, 0);
    EXPECT_EQ(tiny.stats().entries, 0);
    EXPECT_LE(worst(t, ref), tol);
}

}  // namespace ember::prefixtest
