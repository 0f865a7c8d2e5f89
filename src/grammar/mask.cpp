// Token masks: trie walks, per-state inner sets and edge suffixes, the per-configuration cache (runtime.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/env.h"
#include "grammar/runtime.h"

namespace ember::grammar {

namespace {
constexpr size_t kMaxCacheBytes = size_t(256) << 20;  // cached masks per grammar; cleared when exceeded
// Bit count without a libgcc call (the library is built for baseline x86-64, without POPCNT).
inline int bits32(uint32_t x) {
    x = x - ((x >> 1) & 0x55555555u);
    x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
    return int((((x + (x >> 4)) & 0x0F0F0F0Fu) * 0x01010101u) >> 24);
}
}

namespace {
// Token ids gathered into bit words, with a summary bit per word that received one, so that storing a sparse
// set reads only those words instead of all 7,760 of a 248k mask (most masks outside free strings hold a few
// dozen tokens).
struct IdCollector {
    uint32_t* w;
    int64_t n_words;
    std::vector<uint32_t>& top;  // bit i: word i has bits
    bool many = false;           // a dense set was added: store from the words
    IdCollector(uint32_t* words, int64_t n, std::vector<uint32_t>& scratch) : w(words), n_words(n), top(scratch) {
        top.assign(size_t(n + 31) / 32, 0u);
    }
    void add(int32_t t) {
        const size_t i = size_t(t) >> 5;
        w[i] |= 1u << (t & 31);
        top[i >> 5] |= 1u << (i & 31);
    }
    void add(const TokenSet& s) {
        if (!s.dense.empty()) {
            s.or_into(w);
            many = true;
            return;
        }
        for (int32_t t : s.sparse) add(t);
    }
    void store(TokenSet& ts) {
        if (!many) {
            ts.dense.clear();
            ts.sparse.clear();
            for (size_t j = 0; j < top.size(); ++j)
                for (uint32_t x = top[j]; x; x &= x - 1) {
                    const size_t i = j * 32 + size_t(__builtin_ctz(x));
                    for (uint32_t y = w[i]; y; y &= y - 1) ts.sparse.push_back(int32_t(i * 32 + size_t(__builtin_ctz(y))));
                }
            if (int64_t(ts.sparse.size()) < n_words) return;  // the rule of TokenSet::store
        }
        ts.store(w, n_words);
    }
};
}  // namespace

void TokenSet::or_into(uint32_t* w) const {
    if (!dense.empty()) {
        for (size_t i = 0; i < dense.size(); ++i) w[i] |= dense[i];
    } else {
        for (int32_t t : sparse) w[size_t(t) >> 5] |= 1u << (t & 31);
    }
}

void TokenSet::store(const uint32_t* w, int64_t n_words) {
    // Dense once the set has at least one bit per word on average. Counting stops there, and zero words cost
    // one test: a sparse set is one pass over mostly zero words, a dense one stops early.
    int64_t bits = 0, i = 0;
    for (; i < n_words && bits < n_words; ++i)
        if (w[i]) bits += bits32(w[i]);
    dense.clear();
    sparse.clear();
    if (bits >= n_words) {
        dense.assign(w, w + n_words);
        return;
    }
    sparse.reserve(size_t(bits));
    for (int64_t k = 0; k < n_words; ++k)
        for (uint32_t x = w[k]; x; x &= x - 1) sparse.push_back(int32_t(k * 32 + __builtin_ctz(x)));
}

size_t Runtime::VecHash::operator()(const std::vector<int32_t>& v) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x : v) h = (h ^ uint32_t(x)) * 1099511628211ull;
    return size_t(h ^ (h >> 31));
}

// General walk below trie node `at`, whose prefix left configuration c. Children are visited in order; each
// child's configuration lives in cfg_[depth] (nested walks only write deeper entries).
template <class OnTok, class OnEdge>
void Runtime::walk(const Trie& T, uint32_t at, const Config& c, OnTok& on_tok, OnEdge& on_edge) {
    if (c.heads.size() == 1 && !c.complete && !(g_->flags[size_t(gs_[size_t(c.heads[0])])] & CompiledGrammar::HAS_CALLS)) {
        walk_fast(T, at, c.heads[0], on_tok, on_edge);
        return;
    }
    Config& n = cfg_[size_t(T.depth[at]) + 1];
    for (uint32_t j = at + 1; j < T.end[at] && !over_; j = T.end[j]) {
        bool sp = false;
        ++stats_.visited_general;
        if (!step(c, T.byte[j], n, &sp)) continue;
        for (uint32_t k = T.tok_begin[j]; k < T.tok_begin[j + 1]; ++k) on_tok(T.toks[k]);
        if (!T.has_children(j)) continue;
        if (sp) on_edge(j);
        if (!n.heads.empty()) walk(T, j, n, on_tok, on_edge);
    }
}

// One head without calls: a plain DFA loop over the subtree. Where the frame may pop with bytes left, the popped
// continuation is walked separately (parent known) or recorded as an edge (parent kSentinel); at a state with
// calls the subtree continues in the general walk.
template <class OnTok, class OnEdge>
void Runtime::walk_fast(const Trie& T, uint32_t at, int32_t head, OnTok& on_tok, OnEdge& on_edge) {
    const CompiledGrammar& g = *g_;
    const int32_t* next = g.next.data();
    const uint8_t* flags = g.flags.data();
    const uint8_t* cls = g.byte_class;
    const size_t nc = size_t(g.n_classes);
    const int32_t p = parent_[size_t(head)];
    int32_t* st = dfa_.data();
    st[T.depth[at]] = gs_[size_t(head)];
    Config popped;
    // The frame's pop, taken once: p's closure may pop on up to the sentinel (the token then leaves the inner frame).
    bool have_popped = false, popped_sentinel = false;
    // The work bound's count in a local (tick() per node stores work_ and tests over_ in this loop): work_ is
    // written back before the nested calls, which count on, and read again after them. The bound stays exact.
    const int64_t max_work = g.max_match_work;
    int64_t work = work_;
    const uint32_t stop = T.end[at];
    uint32_t j = at + 1;
    if (over_) return;
    while (j < stop) {
        const int32_t s = next[size_t(st[T.depth[j] - 1]) * nc + cls[T.byte[j]]];
        if (s < 0) {
            j = T.end[j];
            continue;
        }
        st[T.depth[j]] = s;
        ++stats_.visited;
        if (++work > max_work) {
            over_ = true;
            break;
        }
        for (uint32_t k = T.tok_begin[j]; k < T.tok_begin[j + 1]; ++k) on_tok(T.toks[k]);
        const uint8_t f = flags[s];
        if (T.end[j] > j + 1) {
            if (f & CompiledGrammar::HAS_CALLS) {  // leave the DFA loop: calls (and pops) in the general walk
                Config& c = cfg_[T.depth[j]];
                work_ = work;
                const int32_t nd = intern(s, p);
                bool sp = false;
                closure(&nd, 1, c, &sp);
                if (sp) on_edge(j);
                if (!c.heads.empty()) walk(T, j, c, on_tok, on_edge);
                work = work_;
                if (over_) break;
                st[T.depth[j]] = s;
                j = T.end[j];
                continue;
            }
            if ((f & CompiledGrammar::ACCEPT) && p != kBottom) {
                if (p == kSentinel) {
                    on_edge(j);
                } else {
                    work_ = work;
                    if (!have_popped) {
                        closure(&p, 1, popped, &popped_sentinel);
                        have_popped = true;
                    }
                    if (popped_sentinel) on_edge(j);
                    if (!popped.heads.empty()) {
                        walk(T, j, popped, on_tok, on_edge);
                        st[T.depth[j]] = s;  // the nested walk may start its own DFA loop at this depth
                    }
                    work = work_;
                    if (over_) break;
                }
            }
            if (f & CompiledGrammar::HAS_BYTES) {
                ++j;
                continue;
            }
        }
        j = T.end[j];
    }
    work_ = work;
}

const InnerEntry& Runtime::inner(int32_t gs) {
    static const InnerEntry kNone;
    int32_t& idx = inner_of_[size_t(gs)];
    if (idx < 0) {
        auto e = std::make_unique<InnerEntry>();
        compute_inner(gs, *e);
        if (over_) return kNone;  // cut short: not kept
        idx = int32_t(inner_.size());
        inner_.push_back(std::move(e));
        stats_.inner_computed++;
    }
    return *inner_[size_t(idx)];
}

void Runtime::compute_inner(int32_t gs, InnerEntry& e) {
    const int64_t W = t_->mask_words();
    std::vector<uint32_t> words(size_t(W), 0u);
    Config c0;
    const int32_t n0 = intern(gs, kSentinel);
    closure(&n0, 1, c0, nullptr);  // a pop before any byte is the caller's head, not an edge
    // A single head without calls that takes plain characters uniformly: the short plain tokens are allowed
    // outright and only the remaining tokens are walked.
    TokenIndex::Slice sl = t_->slice(0);
    if (c0.heads.size() == 1 && !c0.complete && !(g_->flags[size_t(gs_[size_t(c0.heads[0])])] & CompiledGrammar::HAS_CALLS)) {
        bool exact = false;
        const int64_t K = plain_reach(gs_[size_t(c0.heads[0])], &exact);
        sl = exact ? TokenIndex::Slice{int(K), &t_->plain_upto(K), &t_->nonplain_trie()} : t_->slice(K);
    }
    IdCollector acc(words.data(), W, scratch_top_);
    if (sl.covered) {
        for (int64_t i = 0; i < W; ++i) words[size_t(i)] = (*sl.covered)[size_t(i)];
        acc.many = true;
    }
    const Trie& T = *sl.rest;
    std::vector<std::pair<int32_t, uint16_t>> edges;  // (token, offset of the pop)
    auto on_tok = [&](int32_t t) { acc.add(t); };
    auto on_edge = [&](uint32_t j) {
        for (uint32_t k = T.tok_begin[j + 1]; k < T.tok_begin[T.end[j]]; ++k) edges.push_back({T.toks[k], T.depth[j]});
    };
    const int64_t v0 = stats_.visited, g0 = stats_.visited_general;
    if (!c0.heads.empty()) walk(T, 0, c0, on_tok, on_edge);
    static const bool dbg = env_str("EMBER_GRAMMAR_DEBUG") != nullptr;
    if (dbg)
        std::fprintf(stderr, "[grammar] inner gs %d (rule %s, %zu heads%s): reach %lld, slice tau %d, trie of %u nodes, visited %lld fast + %lld general, %zu edges\n", gs,
                     g_->rule_names[size_t(g_->state_rule[size_t(gs)])].c_str(), c0.heads.size(),
                     c0.heads.size() == 1 && (g_->flags[size_t(gs_[size_t(c0.heads[0])])] & CompiledGrammar::HAS_CALLS) ? " calls" : "",
                     c0.heads.size() == 1 ? (long long)plain_reach(gs_[size_t(c0.heads[0])]) : -1LL, sl.tau, T.size(), (long long)(stats_.visited - v0), (long long)(stats_.visited_general - g0), edges.size());
    acc.store(e.inner);
    // Edges: tokens not already accepted inside the frame, leaving it after `off` bytes.
    std::vector<int32_t> pairs;
    for (auto& [t, off] : edges)
        if (!((words[size_t(t) >> 5] >> (t & 31)) & 1)) {
            pairs.push_back(t);
            pairs.push_back(off);
        }
    if (!pairs.empty()) e.edges = edge_set(std::move(pairs));
}

bool Runtime::fill_mask(const Config& c, uint32_t* words) {
    begin_work();
    const int64_t W = t_->mask_words();
    std::vector<int32_t> key = c.heads;
    if (c.complete) key.push_back(-3);
    auto it = masks_.find(key);
    if (it != masks_.end()) {
        stats_.cache_hits++;
        if (!it->second.dense.empty()) {
            std::memcpy(words, it->second.dense.data(), size_t(W) * 4);
        } else {
            std::memset(words, 0, size_t(W) * 4);
            it->second.or_into(words);
        }
        return true;
    }
    stats_.cache_misses++;
    scratch_words_.assign(size_t(W), 0u);
    uint32_t* m = scratch_words_.data();
    std::vector<uint32_t> top;
    IdCollector acc(m, W, top);
    for (int32_t h : c.heads) {
        if (over_) break;
        const InnerEntry& e = inner(gs_[size_t(h)]);
        acc.add(e.inner);
        const int32_t p = parent_[size_t(h)];
        if (p < 0 || !e.edges) continue;
        const EdgeSet& es = *e.edges;
        Config pc;
        closure(&p, 1, pc, nullptr);
        if (pc.heads.empty()) continue;
        auto on_group = [&](int32_t gid) {
            for (uint32_t k = es.group_begin[size_t(gid)]; k < es.group_begin[size_t(gid) + 1]; ++k) acc.add(es.group_toks[k]);
        };
        auto no_edge = [](uint32_t) {};
        walk(es.suffixes, 0, pc, on_group, no_edge);
    }
    if (over_) {
        std::memset(words, 0, size_t(W) * 4);
        return false;
    }
    if (c.complete)
        for (int32_t t : t_->eos()) acc.add(t);
    std::memcpy(words, m, size_t(W) * 4);
    if (mask_bytes_ > kMaxCacheBytes) {
        masks_.clear();
        mask_bytes_ = 0;
    }
    TokenSet& ts = masks_[std::move(key)];
    acc.store(ts);
    mask_bytes_ += ts.bytes() + 64;
    return true;
}

}  // namespace ember::grammar
