// The matcher's engine (internal to src/grammar): a graph-structured stack over the compiled grammar's
// DFAs, and the token masks computed from it.
//
// A stack is a chain of interned nodes (gs, parent): the top's DFA state and the node to return to, whose own
// gs is the caller's return state. Interning makes equal stacks equal ids, so a parser configuration — the
// sorted set of stack tops that can read a byte ("heads") plus "complete" (the root can end here) — is a
// canonical key: masks are cached per configuration.
//
// Masks (the split llguidance / XGrammar describe, in our own form): for a head (g, p), the tokens it
// accepts either stay inside g's frame — context-independent, computed once per DFA state g by a trie walk
// from (g, SENTINEL) ("inner") — or pop the frame after k ≥ 1 bytes and continue in p with the rest of the
// token ("edges", kept as a trie of suffixes). A configuration's mask is the union over its heads of the
// inner set and of the edge suffixes accepted from p. Trie walks switch to a plain DFA loop while a single
// call-free head is active (strings, numbers, literals: the bulk of the vocabulary).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/compile.h"
#include "grammar/config.h"
#include "grammar/token_index.h"

namespace ember::grammar {

constexpr int32_t kBottom = -1;    // parent of the root frame
constexpr int32_t kSentinel = -2;  // parent of a frame whose context is unknown (inner-mask walks)

// A set of token ids, dense (bit words) or sparse (ids).
struct TokenSet {
    std::vector<uint32_t> dense;
    std::vector<int32_t> sparse;
    void or_into(uint32_t* w) const;
    void store(const uint32_t* w, int64_t n_words);  // from bit words (picks the smaller form)
    size_t bytes() const { return dense.size() * 4 + sparse.size() * 4; }
};

// The tokens that leave a frame: each token's suffix after the pop, as a trie whose ids index groups of tokens
// with that suffix. Shared by every state with the same edges (edge_set.cpp).
struct EdgeSet {
    Trie suffixes;
    std::vector<uint32_t> group_begin;  // [groups + 1] into group_toks
    std::vector<int32_t> group_toks;
};

// What a DFA state g accepts inside its own frame, and the tokens that leave it (null: none).
struct InnerEntry {
    TokenSet inner;
    std::shared_ptr<const EdgeSet> edges;
};

class Runtime {
public:
    Runtime(std::shared_ptr<const CompiledGrammar> g, std::shared_ptr<const TokenIndex> t);
    const CompiledGrammar& grammar() const { return *g_; }
    const TokenIndex& tokens() const { return *t_; }
    std::mutex& mutex() { return mu_; }

    // ---- the work bound (CompiledGrammar::max_match_work / max_stack_nodes) ----
    // Each public operation below starts a budget; over it, the operation's result is void (no mask, no step)
    // and over() says so. A highly ambiguous grammar would otherwise cost time growing with the text.
    void begin_work() { work_ = 0, over_ = false; }
    bool over() const { return over_; }
    std::string over_message() const;

    // ---- stacks ----
    int32_t intern(int32_t gs, int32_t parent);
    int32_t node_gs(int32_t n) const { return gs_[size_t(n)]; }
    int32_t node_parent(int32_t n) const { return parent_[size_t(n)]; }
    Config initial();
    // Expands calls and pops from the arrived nodes. *sentinel_pop: a frame with parent kSentinel can pop.
    void closure(const int32_t* arrived, size_t n, Config& out, bool* sentinel_pop);
    // One byte from `in`; returns out.alive() (or a sentinel pop).
    bool step(const Config& in, uint8_t b, Config& out, bool* sentinel_pop);
    bool consume(Config& c, const std::string& bytes);  // c ← after bytes; false (c unchanged) if rejected

    // ---- masks ----
    // words[ceil(V/32)] ← tokens allowed from c (EOS ids iff c.complete); false (words zero) over the bound.
    bool fill_mask(const Config& c, uint32_t* words);
    // ---- closing (closing.cpp): the shortest way to complete the text ----
    // Bytes of the shortest completion from c (INT64_MAX: none); the completion itself; the mask of the longest
    // token that starts it (EOS when c is complete): following it ends the text in completion_tokens() steps.
    int64_t completion_distance(const Config& c);
    std::string shortest_completion(const Config& c);
    int64_t completion_tokens(const Config& c);  // tokens to write it, longest tokens first (INT64_MAX: cannot)
    std::vector<int32_t> completion_plan(const Config& c, bool* ok);  // those tokens
    void fill_closing_mask(const Config& c, uint32_t* words);

    struct Stats {
        int64_t cache_hits = 0, cache_misses = 0, inner_computed = 0, nodes = 0, visited = 0, visited_general = 0;
        int64_t plain_steps = 0, edge_sets_built = 0;
    };
    Stats stats() const;

private:
    void tick(int64_t n = 1) {
        if ((work_ += n) > g_->max_match_work) over_ = true;
    }
    const InnerEntry& inner(int32_t gs);
    // plain_reach.cpp. The states one plain character leads to from gs (memoized per state); all_live: every
    // plain character is viable; clean: no state inside a multi-byte character accepts or calls.
    struct PlainStep {
        std::vector<int32_t> targets;
        bool all_live = true, clean = true;
    };
    const PlainStep& plain_step(int32_t gs);
    // K: every string of ≤ K plain characters is viable from gs (K = the vocabulary's longest plain token: all).
    // *exact: the chain of plain steps passes no accepting state or call and ends where no plain character
    // can start, so exactly the plain tokens of ≤ K characters are allowed.
    int64_t plain_reach(int32_t gs, bool* exact = nullptr);
    void compute_inner(int32_t gs, InnerEntry& e);
    // edge_set.cpp. The edge set of (token, offset of the pop) pairs, flattened; built once per distinct list.
    std::shared_ptr<const EdgeSet> edge_set(std::vector<int32_t> pairs);
    template <class OnTok, class OnEdge>
    void walk(const Trie& T, uint32_t at, const Config& c, OnTok& on_tok, OnEdge& on_edge);
    template <class OnTok, class OnEdge>
    void walk_fast(const Trie& T, uint32_t at, int32_t head, OnTok& on_tok, OnEdge& on_edge);
    void grow_table();
    void compute_distances();
    int64_t chain_distance(int32_t node);  // d(gs) + the return states' distances up the stack
    void emit_frame(int32_t gs, std::string& out, int depth) const;
    std::vector<int32_t> plain_of_;  // gs → index into plain_ (-1 = not computed)
    std::vector<PlainStep> plain_;
    std::vector<uint32_t> plain_mark_;  // plain_reach's layer dedup (epoch stamps per gs)
    uint32_t plain_epoch_ = 0;
    std::vector<int64_t> dist_;      // per gs: bytes to the end of its rule (empty until needed)
    std::vector<uint8_t> class_rep_; // a byte of each class, printable where possible

    std::shared_ptr<const CompiledGrammar> g_;
    std::shared_ptr<const TokenIndex> t_;
    std::mutex mu_;
    int64_t work_ = 0;
    bool over_ = false;
    // node table: gs_/parent_ by id; open-addressing hash of ids
    std::vector<int32_t> gs_, parent_;
    std::vector<int32_t> slots_;
    // closure scratch
    std::vector<uint32_t> visit_;
    uint32_t epoch_ = 0;
    std::vector<int32_t> stack_, arrivals_;
    // walk scratch, indexed by trie depth (a nested walk only writes deeper entries)
    std::vector<Config> cfg_;
    std::vector<int32_t> dfa_;
    // caches
    std::vector<int32_t> inner_of_;  // gs → index into inner_ (-1 = not computed)
    std::vector<std::unique_ptr<InnerEntry>> inner_;
    struct VecHash {
        size_t operator()(const std::vector<int32_t>& v) const;
    };
    std::unordered_map<std::vector<int32_t>, TokenSet, VecHash> masks_;
    std::unordered_map<std::vector<int32_t>, std::shared_ptr<const EdgeSet>, VecHash> edge_sets_;
    size_t mask_bytes_ = 0;
    std::vector<uint32_t> scratch_words_;
    std::vector<uint32_t> scratch_top_;  // compute_inner's summary bits (mask.cpp IdCollector)
    Stats stats_;
};

}  // namespace ember::grammar
