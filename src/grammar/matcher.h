// Grammar-constrained decoding: a compiled grammar bound to a vocabulary (Grammar, shared) and one matcher
// per sequence (Matcher) that fills token masks, accepts tokens, rolls back and reports completion.
//
// Mask layout: ceil(V / 32) uint32 words; bit v % 32 of word v / 32 set = token v allowed. A token is allowed
// when its bytes can continue the text so far towards a string of the grammar; end-of-sequence ids
// (TokenIndex::eos) exactly when the text so far is complete; tokens without bytes (special tokens) never.
// Cost: runtime.h (per-configuration cache, per-state inner sets, edge suffixes).
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/compile.h"
#include "grammar/config.h"
#include "grammar/ir.h"
#include "grammar/token_index.h"

namespace ember::grammar {

class Runtime;

// A compiled grammar and its caches for one vocabulary. Thread-safe (matchers of one Grammar serialise on an
// internal mutex); share one per (grammar text, tokenizer).
class Grammar {
public:
    static Expected<std::shared_ptr<Grammar>> create(const GrammarIR& ir, std::shared_ptr<const TokenIndex> vocab,
                                                     const CompileLimits& lim = {});
    static std::shared_ptr<Grammar> create(std::shared_ptr<const CompiledGrammar> cg,
                                           std::shared_ptr<const TokenIndex> vocab);
    ~Grammar();
    const TokenIndex& vocab() const;
    const CompiledGrammar& compiled() const;
    Runtime& runtime() { return *rt_; }
    struct CacheStats {
        int64_t hits = 0, misses = 0, inner_states = 0, stack_nodes = 0;
        int64_t plain_steps = 0;  // DFA states whose plain-character targets were enumerated
        int64_t edge_sets = 0;    // distinct edge sets built (runtime.h EdgeSet), shared by the inner states
    };
    CacheStats cache_stats();

private:
    Grammar() = default;
    std::unique_ptr<Runtime> rt_;
};

class Matcher {
public:
    explicit Matcher(std::shared_ptr<Grammar> g);
    ~Matcher();
    Matcher(const Matcher&);
    Matcher& operator=(const Matcher&);

    int32_t vocab_size() const;
    int64_t mask_words() const;
    // words[mask_words()] ← the tokens allowed now. After end-of-sequence was accepted: nothing. An error (words
    // zero) when the grammar is too ambiguous for the matcher's work bound (CompileLimits::max_match_work).
    Status fill_mask(uint32_t* words);
    // Advances by one token; an error (state unchanged) when it is not allowed or over the work bound.
    Status accept(int32_t token);
    // Advances by raw bytes (e.g. text forced by the caller); an error (state unchanged) if rejected.
    Status accept_bytes(std::string_view bytes);
    bool allows(int32_t token);
    // Undoes the last k accepted tokens (k ≤ n_tokens()); accept_bytes counts as one.
    Status rollback(int64_t k);
    void reset();
    int64_t n_tokens() const { return int64_t(states_.size()) - 1; }
    // Closing, for a generation about to run out of tokens: the bytes of the shortest completion, the tokens
    // needed to write it, and the mask of the longest token that starts it (EOS once complete).
    int64_t completion_distance();
    int64_t completion_tokens();  // tokens the closing mask needs to end the text
    // The tokens that write the shortest completion (longest first); empty when complete or impossible.
    std::vector<int32_t> completion_plan();
    void fill_closing_mask(uint32_t* words);
    bool is_complete() const;    // the text so far is a complete string of the grammar (EOS allowed)
    bool is_terminated() const;  // EOS was accepted, or the text is complete and nothing may follow

private:
    Status advance(std::string_view bytes, const char* rejected);  // accept / accept_bytes after their checks
    std::shared_ptr<Grammar> g_;
    std::vector<Config> states_;  // states_[0] = initial; one more per accepted token
    std::vector<bool> ended_;     // EOS accepted at that step
    Status initial_ = Status::ok();  // the initial configuration was over the work bound (then every mask is empty)
};

}  // namespace ember::grammar
