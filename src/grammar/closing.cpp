// Closing: shortest completions of a configuration (runtime.h), so a generation that runs out of tokens can
// still end with a complete text. d(s) = bytes from DFA state s to its rule's end (a call costs its callee's
// d(start) plus d(return)), iterated to a fixed point; a stack's distance adds the return states' distances.
#include <climits>
#include <cstring>

#include "grammar/runtime.h"

namespace ember::grammar {

namespace {
constexpr int64_t kInf = INT64_MAX / 4;
}

void Runtime::compute_distances() {
    const CompiledGrammar& g = *g_;
    const int64_t n = g.n_states();
    const size_t nc = size_t(g.n_classes);
    dist_.assign(size_t(n), kInf);
    for (int64_t s = 0; s < n; ++s)
        if (g.flags[size_t(s)] & CompiledGrammar::ACCEPT) dist_[size_t(s)] = 0;
    // Sweeps in both directions until nothing improves (non-negative costs: converges).
    for (bool changed = true; changed;) {
        changed = false;
        for (int pass = 0; pass < 2; ++pass)
            for (int64_t k = 0; k < n; ++k) {
                const int64_t s = pass ? k : n - 1 - k;
                int64_t best = dist_[size_t(s)];
                for (size_t c = 0; c < nc; ++c) {
                    const int32_t t = g.next[size_t(s) * nc + c];
                    if (t >= 0 && dist_[size_t(t)] + 1 < best) best = dist_[size_t(t)] + 1;
                }
                for (uint32_t k2 = g.call_begin[size_t(s)]; k2 < g.call_begin[size_t(s) + 1]; ++k2) {
                    const Call& cl = g.calls[k2];
                    const int64_t v = dist_[size_t(cl.start)] + dist_[size_t(cl.ret)];
                    if (v < best) best = v;
                }
                if (best < dist_[size_t(s)]) {
                    dist_[size_t(s)] = best;
                    changed = true;
                }
            }
    }
    class_rep_.assign(nc, 0);
    std::vector<bool> have(nc, false);
    for (int pass = 0; pass < 2; ++pass)  // printable non-quote bytes first, then any
        for (int b = 0; b < 256; ++b) {
            const uint8_t c = g.byte_class[b];
            const bool nice = b >= 0x20 && b < 0x7F && b != '"' && b != '\\';
            if (!have[c] && (pass == 1 || nice)) { class_rep_[c] = uint8_t(b); have[c] = true; }
        }
}

int64_t Runtime::chain_distance(int32_t node) {
    int64_t d = 0;
    for (int32_t x = node; x >= 0; x = parent_[size_t(x)]) {
        tick();
        if (over_) return kInf;
        d += dist_[size_t(gs_[size_t(x)])];
        if (d >= kInf) return kInf;
    }
    return d;
}

int64_t Runtime::completion_distance(const Config& c) {
    begin_work();
    if (dist_.empty()) compute_distances();
    if (c.complete) return 0;
    int64_t best = kInf;
    for (int32_t h : c.heads) best = std::min(best, chain_distance(h));
    return best >= kInf ? INT64_MAX : best;
}

// The bytes of a shortest path from gs to the end of its rule.
void Runtime::emit_frame(int32_t gs, std::string& out, int depth) const {
    const CompiledGrammar& g = *g_;
    const size_t nc = size_t(g.n_classes);
    int32_t s = gs;
    while (dist_[size_t(s)] > 0 && depth < 10000) {
        bool moved = false;
        for (size_t c = 0; c < nc && !moved; ++c) {
            const int32_t t = g.next[size_t(s) * nc + c];
            if (t >= 0 && dist_[size_t(t)] + 1 == dist_[size_t(s)]) {
                out += char(class_rep_[c]);
                s = t;
                moved = true;
            }
        }
        for (uint32_t k = g.call_begin[size_t(s)]; k < g.call_begin[size_t(s) + 1] && !moved; ++k) {
            const Call& cl = g.calls[k];
            if (dist_[size_t(cl.start)] + dist_[size_t(cl.ret)] == dist_[size_t(s)]) {
                emit_frame(cl.start, out, depth + 1);
                s = cl.ret;
                moved = true;
            }
        }
        if (!moved) return;  // unreachable for a live state
    }
}

// Over the work bound: empty (no completion known).
std::string Runtime::shortest_completion(const Config& c) {
    begin_work();
    if (dist_.empty()) compute_distances();
    std::string out;
    if (c.complete || c.heads.empty()) return out;
    int32_t best = -1;
    int64_t bd = kInf;
    for (int32_t h : c.heads) {
        const int64_t d = chain_distance(h);
        if (d < bd) { bd = d; best = h; }
    }
    if (best < 0 || over_) return out;
    for (int32_t x = best; x >= 0; x = parent_[size_t(x)]) emit_frame(gs_[size_t(x)], out, 0);
    return out;
}

namespace {
// The trie node of the longest token that is a prefix of s[from..] (0 = none).
uint32_t longest_token(const Trie& T, const std::string& s, size_t from) {
    uint32_t node = 0, best = 0;
    for (size_t i = from; i < s.size(); ++i) {
        uint32_t found = 0;
        for (uint32_t j = node + 1; j < T.end[node]; j = T.end[j])
            if (T.byte[j] == uint8_t(s[i])) { found = j; break; }
        if (!found) break;
        node = found;
        if (T.tok_begin[node] < T.tok_begin[node + 1]) best = node;
    }
    return best;
}
}  // namespace

std::vector<int32_t> Runtime::completion_plan(const Config& c, bool* ok) {
    std::vector<int32_t> plan;
    *ok = true;
    if (c.complete) return plan;
    const std::string s = shortest_completion(c);
    if (over_) {
        *ok = false;
        return plan;
    }
    const Trie& T = t_->trie();
    for (size_t i = 0; i < s.size();) {
        const uint32_t node = longest_token(T, s, i);
        if (!node) {
            *ok = false;
            return plan;
        }
        plan.push_back(T.toks[T.tok_begin[node]]);
        i += T.depth[node];
    }
    return plan;
}

int64_t Runtime::completion_tokens(const Config& c) {
    bool ok;
    const std::vector<int32_t> plan = completion_plan(c, &ok);
    return ok ? int64_t(plan.size()) : INT64_MAX;
}

void Runtime::fill_closing_mask(const Config& c, uint32_t* words) {
    std::memset(words, 0, size_t(t_->mask_words()) * 4);
    if (c.complete)
        for (int32_t t : t_->eos()) words[size_t(t) >> 5] |= 1u << (t & 31);
    const std::string s = shortest_completion(c);
    const Trie& T = t_->trie();
    const uint32_t node = longest_token(T, s, 0);  // the longest step along the shortest completion
    if (node)
        for (uint32_t k = T.tok_begin[node]; k < T.tok_begin[node + 1]; ++k) words[size_t(T.toks[k]) >> 5] |= 1u << (T.toks[k] & 31);
}

}  // namespace ember::grammar
