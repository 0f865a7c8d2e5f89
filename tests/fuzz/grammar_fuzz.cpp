// Fuzz target: grammar text from requests and the command line — a JSON Schema (json_schema_grammar: what
// response_format and --json-schema compile), GBNF (parse_gbnf: llama-server's `grammar`, --grammar) or a regular
// expression (regex_grammar: --regex) — compiled (Grammar::create) over the first 8,192 entries of SmolLM2's real vocabulary, then a matcher
// walk: fill the mask, accept tokens it allows, roll back. Input: one byte (bits 0-1: the kind; the rest seeds
// the walk), then the text. Checks: every token the mask allows is accepted; EOS is allowed exactly when the text
// is complete; rolling back restores the first mask bit for bit. Compile limits are a two-hundredth of the
// defaults: under ASan a state costs ~17-25× native time, and a loaded machine triples that; the limits
// themselves are what bounds hostile grammars, and the cost of one input grows with them (regexes of many `.` that
// compile up to the limit: 45 / 34 ms natively at a twentieth, 47 ms for a third one at a fiftieth — 2.2-3.0 s and
// 0.86 s under ASan, over the 1-s-per-input bar on a loaded machine without being slow grammars; ≤ 3 ms at a
// two-hundredth; corpus regress-timeout-*, the long runs of 2026-12-03). The subset-construction budget too: a
// regex with a repeat count of 2,224 (regress-timeout-277ddeb2) builds closures of thousands of NFA states per DFA
// state and stopped only at the DFA-state limit: 96 ms natively, 3 s under ASan, with the default 30 M steps.
// The matcher's work bounds too (CompileLimits::max_match_work, max_stack_nodes): a GBNF root recursing under a
// repeat through a rule that can match nothing (regress-timeout-07ed6732) grows the stack graph with every byte,
// 829 ms natively for the walk before the bound; a mask or token over the bound is a refusal (an error naming the
// limit, mask zero), which ends the walk.
#include <vector>

#include "fuzz_util.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/token_index.h"
#include "io/json_file.h"
#include "tokenizer/gguf_vocab_json.h"
#include "tokenizer/tokenizer.h"

using namespace ember;
using namespace ember::grammar;

namespace {
constexpr int32_t kVocab = 8192;

std::shared_ptr<const TokenIndex> vocab() {
    static const std::shared_ptr<const TokenIndex> v = [] {
        const char* rel = "tests/fixtures/smollm2/vocab.json";
        auto j = parse_json_text(fuzz::read_source_file(rel), rel);
        if (!j) fuzz::fail(j.message());
        auto gv = gguf_vocab_from_json(*j);
        if (!gv) fuzz::fail(gv.message());
        auto t = Tokenizer::from_gguf_vocab(*gv);
        if (!t) fuzz::fail(t.message());
        // The first kVocab entries (+ EOS): under ASan a first mask over all 49k entries takes ~0.5 s, and a walk
        // fills several; the 1-s-per-input bar would then flag the sanitizer's cost, not a slow grammar.
        std::vector<std::string> bytes(static_cast<size_t>(kVocab));
        for (int32_t id = 0; id < kVocab && id < t->vocab_size(); ++id)
            if (!t->is_special(id)) bytes[size_t(id)] = t->token_bytes(id);
        std::vector<int32_t> eos;
        for (int32_t e : t->eos_ids())
            if (e >= 0 && e < kVocab) eos.push_back(e), bytes[size_t(e)].clear();
        return TokenIndex::build(std::move(bytes), std::move(eos));
    }();
    return v;
}

bool bit(const std::vector<uint32_t>& m, int32_t t) { return (m[size_t(t) / 32] >> (t % 32)) & 1u; }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const int kind = data[0] & 3;
    uint32_t seed = data[0] >> 2;
    const std::string_view text = fuzz::text(data + 1, size - 1);
    auto ir = kind == 0 ? json_schema_grammar(text) : kind == 1 ? parse_gbnf(text) : regex_grammar(text);
    if (!ir) return 0;
    CompileLimits lim;
    lim.max_nfa_states /= 200, lim.max_dfa_states /= 200, lim.max_subset_work /= 200;
    lim.max_match_work /= 200, lim.max_stack_nodes /= 200;
    auto g = Grammar::create(*ir, vocab(), lim);
    if (!g) return 0;
    Matcher m(*g);
    const int32_t V = m.vocab_size();
    std::vector<uint32_t> first(size_t(m.mask_words())), mask(first.size());
    if (!m.fill_mask(first.data())) return 0;  // over the matcher's work bound: refused (words zero)
    mask = first;
    int accepted = 0;
    for (int step = 0; step < 6; ++step) {
        bool eos_allowed = false;
        for (int32_t e : vocab()->eos()) eos_allowed = eos_allowed || (e < V && bit(mask, e));
        if (eos_allowed != m.is_complete()) fuzz::fail("EOS allowed != is_complete()");
        // The (seed % 7)-th allowed non-EOS token among the first ones found.
        int32_t pick = -1, seen = 0;
        for (int32_t t = 0; t < V && pick < 0; ++t)
            if (bit(mask, t) && !vocab()->is_eos(t) && seen++ == int32_t(seed % 7)) pick = t;
        if (pick < 0) break;
        const bool allowed = m.allows(pick);
        const Status st = m.accept(pick);
        if (!st && st.message().find("its limit of") != std::string::npos) break;  // the work bound: refused
        if (!allowed) fuzz::fail("mask allows a token allows() refuses");
        if (!st) fuzz::fail("mask allows a token accept() refuses");
        ++accepted;
        seed = seed * 1103515245u + 12345u;
        if (!m.fill_mask(mask.data())) break;
    }
    if (!m.rollback(accepted)) fuzz::fail("rollback of the accepted tokens failed");
    if (!m.fill_mask(mask.data())) fuzz::fail("the first configuration's mask failed after a rollback");
    if (mask != first) fuzz::fail("rollback did not restore the first mask");
    return 0;
}
