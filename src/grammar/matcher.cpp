// Grammar and Matcher (matcher.h): thin wrappers over the runtime, with per-token history for rollback.
#include "grammar/matcher.h"

#include <cstdio>
#include <cstring>

#include "grammar/runtime.h"

namespace ember::grammar {

Expected<std::shared_ptr<Grammar>> Grammar::create(const GrammarIR& ir, std::shared_ptr<const TokenIndex> vocab,
                                                   const CompileLimits& lim) {
    EMBER_ASSIGN(auto cg, compile_grammar(ir, lim));
    return create(std::move(cg), std::move(vocab));
}

std::shared_ptr<Grammar> Grammar::create(std::shared_ptr<const CompiledGrammar> cg,
                                         std::shared_ptr<const TokenIndex> vocab) {
    std::shared_ptr<Grammar> g(new Grammar());
    g->rt_ = std::make_unique<Runtime>(std::move(cg), std::move(vocab));
    return g;
}

Grammar::~Grammar() = default;
const TokenIndex& Grammar::vocab() const { return rt_->tokens(); }
const CompiledGrammar& Grammar::compiled() const { return rt_->grammar(); }

Grammar::CacheStats Grammar::cache_stats() {
    std::lock_guard<std::mutex> lk(rt_->mutex());
    const Runtime::Stats s = rt_->stats();
    return {s.cache_hits, s.cache_misses, s.inner_computed, s.nodes, s.plain_steps, s.edge_sets_built};
}

Matcher::Matcher(std::shared_ptr<Grammar> g) : g_(std::move(g)) { reset(); }
Matcher::~Matcher() = default;
Matcher::Matcher(const Matcher&) = default;
Matcher& Matcher::operator=(const Matcher&) = default;

void Matcher::reset() {
    std::lock_guard<std::mutex> lk(g_->runtime().mutex());
    states_.assign(1, g_->runtime().initial());
    ended_.assign(1, false);
    initial_ = g_->runtime().over() ? Status::error(g_->runtime().over_message()) : Status::ok();
}

int32_t Matcher::vocab_size() const { return g_->vocab().vocab_size(); }
int64_t Matcher::mask_words() const { return g_->vocab().mask_words(); }

bool Matcher::is_complete() const { return !ended_.back() && states_.back().complete; }
bool Matcher::is_terminated() const { return ended_.back() || (states_.back().complete && states_.back().heads.empty()); }

Status Matcher::fill_mask(uint32_t* words) {
    if (ended_.back() || !initial_) {
        std::memset(words, 0, size_t(mask_words()) * 4);
        return initial_;
    }
    Runtime& rt = g_->runtime();
    std::lock_guard<std::mutex> lk(rt.mutex());
    if (!rt.fill_mask(states_.back(), words)) return Status::error(rt.over_message());
    return Status::ok();
}

int64_t Matcher::completion_distance() {
    if (ended_.back()) return 0;
    Runtime& rt = g_->runtime();
    std::lock_guard<std::mutex> lk(rt.mutex());
    return rt.completion_distance(states_.back());
}

int64_t Matcher::completion_tokens() {
    if (ended_.back()) return 0;
    Runtime& rt = g_->runtime();
    std::lock_guard<std::mutex> lk(rt.mutex());
    return rt.completion_tokens(states_.back());
}

std::vector<int32_t> Matcher::completion_plan() {
    if (ended_.back()) return {};
    Runtime& rt = g_->runtime();
    std::lock_guard<std::mutex> lk(rt.mutex());
    bool ok;
    std::vector<int32_t> plan = rt.completion_plan(states_.back(), &ok);
    return ok ? plan : std::vector<int32_t>();
}

void Matcher::fill_closing_mask(uint32_t* words) {
    if (ended_.back()) {
        std::memset(words, 0, size_t(mask_words()) * 4);
        return;
    }
    Runtime& rt = g_->runtime();
    std::lock_guard<std::mutex> lk(rt.mutex());
    rt.fill_closing_mask(states_.back(), words);
}

bool Matcher::allows(int32_t token) {
    if (ended_.back() || token < 0 || token >= vocab_size()) return false;
    const TokenIndex& v = g_->vocab();
    if (v.is_eos(token)) return states_.back().complete;
    const std::string& b = v.bytes(token);
    if (b.empty()) return false;
    Runtime& rt = g_->runtime();
    std::lock_guard<std::mutex> lk(rt.mutex());
    Config c = states_.back();
    return rt.consume(c, b);
}

Status Matcher::accept(int32_t token) {
    EMBER_REQUIRE(!ended_.back(), "grammar: token %d after end of sequence", token);
    EMBER_REQUIRE(token >= 0 && token < vocab_size(), "grammar: token %d outside the vocabulary", token);
    const TokenIndex& v = g_->vocab();
    if (v.is_eos(token)) {
        EMBER_REQUIRE(states_.back().complete, "grammar: end of sequence before the grammar is complete");
        states_.push_back(states_.back());
        ended_.push_back(true);
        return Status::ok();
    }
    const std::string& b = v.bytes(token);
    EMBER_REQUIRE(!b.empty(), "grammar: token %d has no text (special token) and is never allowed", token);
    char rejected[64];
    std::snprintf(rejected, sizeof rejected, "grammar: token %d is not allowed here", token);
    return advance(b, rejected);
}

Status Matcher::accept_bytes(std::string_view bytes) {
    EMBER_REQUIRE(!ended_.back(), "grammar: text after end of sequence");
    return advance(bytes, "grammar: text rejected");
}

Status Matcher::advance(std::string_view bytes, const char* rejected) {
    EMBER_TRY(initial_);
    Runtime& rt = g_->runtime();
    std::lock_guard<std::mutex> lk(rt.mutex());
    Config c = states_.back();
    if (!rt.consume(c, std::string(bytes))) return Status::error(rt.over() ? rt.over_message() : rejected);
    states_.push_back(std::move(c));
    ended_.push_back(false);
    return Status::ok();
}

Status Matcher::rollback(int64_t k) {
    EMBER_REQUIRE(k >= 0 && k <= n_tokens(), "grammar: rollback of %lld tokens, only %lld accepted", (long long)k,
                  (long long)n_tokens());
    states_.resize(states_.size() - size_t(k));
    ended_.resize(ended_.size() - size_t(k));
    return Status::ok();
}

}  // namespace ember::grammar
