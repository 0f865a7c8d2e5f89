// Grammar IR → a recursive transition network of DFAs, the form the matcher runs.
//
// Every rule that is called (the root, and each rule referenced where it cannot be inlined: recursion, or
// Rule::inline_ok = false) becomes one DFA whose edges are byte classes (deterministic) or calls of other rules
// (a call edge: push the return state, continue at the callee's start; an accepting state may pop). Small
// non-recursive rules are inlined into their callers, so that e.g. whitespace never costs a stack frame.
// Construction: Thompson NFA per rule → subset construction over byte classes (the partition of the 256 bytes
// induced by every byte set of the grammar) and call symbols → trimmed (states that cannot complete dropped).
// Refused with an error: undefined rules, left recursion (a rule reaching a call of itself without consuming a
// byte; the matcher's stack would grow forever), an empty language, more than the state limits.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "grammar/ir.h"

namespace ember::grammar {

struct CompileLimits {
    int64_t max_nfa_states = 1'000'000;  // over all rules
    int64_t max_dfa_states = 200'000;    // over all rules
    int64_t max_subset_work = 30'000'000;  // Σ NFA states over all DFA states built (subset construction cost)
    // The matcher's bounds (runtime.h): an ambiguous grammar (a nullable rule recursing under a repeat) makes the
    // stack graph grow with every byte, so one mask, one token or one closing plan may cost this many steps
    // (stack nodes visited, heads stepped, trie nodes walked), and a grammar may hold this many stack nodes;
    // beyond them the matcher refuses with an error.
    int64_t max_match_work = 50'000'000;
    int64_t max_stack_nodes = 1'000'000;
};

struct Call {
    int32_t start;  // global state: the callee's start
    int32_t ret;    // global state: where the caller continues after the callee accepts
    int32_t rule;
};

// All rules' DFA states numbered globally ("gs"). Immutable after compile().
struct CompiledGrammar {
    enum : uint8_t { ACCEPT = 1, HAS_BYTES = 2, HAS_CALLS = 4 };
    int n_classes = 0;
    uint8_t byte_class[256] = {};
    std::vector<int32_t> next;         // [n_states * n_classes]: target gs or -1
    std::vector<uint8_t> flags;        // [n_states]
    std::vector<uint32_t> call_begin;  // [n_states + 1] into calls
    std::vector<Call> calls;
    std::vector<int32_t> state_rule;   // [n_states] rule index (into rule_names)
    std::vector<std::string> rule_names;
    std::vector<int32_t> rule_start;   // [rules] start gs of each called rule (-1: inlined everywhere)
    int32_t root_start = -1;
    int64_t max_match_work = CompileLimits{}.max_match_work;    // from the CompileLimits it was compiled with
    int64_t max_stack_nodes = CompileLimits{}.max_stack_nodes;

    int64_t n_states() const { return int64_t(flags.size()); }
    int32_t step(int32_t gs, uint8_t b) const { return next[size_t(gs) * size_t(n_classes) + byte_class[b]]; }
    bool accepting(int32_t gs) const { return flags[size_t(gs)] & ACCEPT; }
};

Expected<std::shared_ptr<const CompiledGrammar>> compile_grammar(const GrammarIR& g, const CompileLimits& lim = {});

}  // namespace ember::grammar
