// Graph-structured stack: node interning, closure (calls and pops), byte steps (runtime.h).
#include "grammar/runtime.h"

#include <algorithm>

#include "core/check.h"

namespace ember::grammar {

namespace {
inline uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
inline uint64_t node_key(int32_t gs, int32_t parent) { return (uint64_t(uint32_t(gs)) << 32) | uint32_t(parent); }
}  // namespace

Runtime::Runtime(std::shared_ptr<const CompiledGrammar> g, std::shared_ptr<const TokenIndex> t)
    : g_(std::move(g)), t_(std::move(t)) {
    slots_.assign(1 << 12, -1);
    inner_of_.assign(size_t(g_->n_states()), -1);
    plain_of_.assign(size_t(g_->n_states()), -1);
    const size_t D = size_t(t_->trie().max_depth) + 2;
    cfg_.resize(D);
    dfa_.assign(D, -1);
}

void Runtime::grow_table() {
    std::vector<int32_t> s(slots_.size() * 2, -1);
    const size_t m = s.size() - 1;
    for (size_t id = 0; id < gs_.size(); ++id) {
        size_t h = mix(node_key(gs_[id], parent_[id])) & m;
        while (s[h] >= 0) h = (h + 1) & m;
        s[h] = int32_t(id);
    }
    slots_.swap(s);
}

int32_t Runtime::intern(int32_t gs, int32_t parent) {
    const size_t m = slots_.size() - 1;
    size_t h = mix(node_key(gs, parent)) & m;
    while (true) {
        const int32_t id = slots_[h];
        if (id < 0) break;
        if (gs_[size_t(id)] == gs && parent_[size_t(id)] == parent) return id;
        h = (h + 1) & m;
    }
    const int32_t id = int32_t(gs_.size());
    if (int64_t(id) >= g_->max_stack_nodes) {  // the operation fails (over_); any valid id keeps the caller defined
        over_ = true;
        return 0;
    }
    EMBER_CHECK(id < INT32_MAX - 1, "grammar stack table full");
    gs_.push_back(gs);
    parent_.push_back(parent);
    slots_[h] = id;
    if (gs_.size() * 2 > slots_.size()) grow_table();
    return id;
}

Config Runtime::initial() {
    begin_work();
    Config c;
    const int32_t n = intern(g_->root_start, kBottom);
    closure(&n, 1, c, nullptr);
    return c;
}

void Runtime::closure(const int32_t* arrived, size_t n, Config& out, bool* sentinel_pop) {
    out.heads.clear();
    out.complete = false;
    if (++epoch_ == 0) {
        std::fill(visit_.begin(), visit_.end(), 0u);
        epoch_ = 1;
    }
    stack_.assign(arrived, arrived + n);
    const CompiledGrammar& g = *g_;
    while (!stack_.empty()) {
        tick();
        if (over_) break;
        const int32_t x = stack_.back();
        stack_.pop_back();
        if (visit_.size() <= size_t(x)) visit_.resize(gs_.size() + gs_.size() / 2 + 64, 0u);
        if (visit_[size_t(x)] == epoch_) continue;
        visit_[size_t(x)] = epoch_;
        const int32_t gs = gs_[size_t(x)], p = parent_[size_t(x)];
        const uint8_t f = g.flags[size_t(gs)];
        if (f & CompiledGrammar::HAS_BYTES) out.heads.push_back(x);
        if (f & CompiledGrammar::HAS_CALLS)
            for (uint32_t k = g.call_begin[size_t(gs)]; k < g.call_begin[size_t(gs) + 1]; ++k) {
                const Call& c = g.calls[k];
                const int32_t r = intern(c.ret, p);
                stack_.push_back(intern(c.start, r));
            }
        if (f & CompiledGrammar::ACCEPT) {
            if (p == kBottom) out.complete = true;
            else if (p == kSentinel) { if (sentinel_pop) *sentinel_pop = true; }
            else stack_.push_back(p);
        }
    }
    std::sort(out.heads.begin(), out.heads.end());
}

bool Runtime::step(const Config& in, uint8_t b, Config& out, bool* sentinel_pop) {
    const CompiledGrammar& g = *g_;
    const size_t nc = size_t(g.n_classes), cls = g.byte_class[b];
    arrivals_.clear();
    tick(int64_t(in.heads.size()));
    for (int32_t h : in.heads) {
        const int32_t t = g.next[size_t(gs_[size_t(h)]) * nc + cls];
        if (t >= 0) arrivals_.push_back(intern(t, parent_[size_t(h)]));
    }
    if (arrivals_.empty()) {
        out.heads.clear();
        out.complete = false;
        return false;
    }
    bool sp = false;
    closure(arrivals_.data(), arrivals_.size(), out, &sp);
    if (sentinel_pop) *sentinel_pop = sp;
    return out.alive() || sp;
}

bool Runtime::consume(Config& c, const std::string& bytes) {
    begin_work();
    Config a = c, b;
    for (unsigned char ch : bytes) {
        if (!step(a, ch, b, nullptr) || !b.alive() || over_) return false;
        std::swap(a, b);
    }
    c = std::move(a);
    return true;
}

std::string Runtime::over_message() const {
    if (int64_t(gs_.size()) >= g_->max_stack_nodes)
        return "grammar: the matcher's stack graph reached its limit of " + std::to_string(g_->max_stack_nodes) +
               " nodes (the grammar is too ambiguous: a rule that can match nothing recursing under a repeat?)";
    return "grammar: one matcher step exceeded its limit of " + std::to_string(g_->max_match_work) +
           " steps (the grammar is too ambiguous: a rule that can match nothing recursing under a repeat?)";
}

Runtime::Stats Runtime::stats() const {
    Stats s = stats_;
    s.nodes = int64_t(gs_.size());
    return s;
}

}  // namespace ember::grammar
