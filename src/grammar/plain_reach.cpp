// Plain characters from a DFA state (runtime.h plain_step / plain_reach): which states one character a JSON
// string holds unescaped leads to, and how many such characters are always viable. Feeds the plain-token
// slice of compute_inner (token_index.h Slice).
#include <algorithm>

#include "grammar/runtime.h"

namespace ember::grammar {

// The states one plain character leads to from gs, computed once per state: the inner sets of many states
// (e.g. the prefixes of a key that must differ from the listed property names) walk the same chains of
// states, and enumerating the multi-byte characters costs ~1,000 DFA steps per state.
const Runtime::PlainStep& Runtime::plain_step(int32_t gs) {
    int32_t& idx = plain_of_[size_t(gs)];
    if (idx >= 0) return plain_[size_t(idx)];
    const CompiledGrammar& g = *g_;
    PlainStep p;
    auto add = [&](int32_t t) {
        if (std::find(p.targets.begin(), p.targets.end(), t) == p.targets.end()) p.targets.push_back(t);
    };
    for (int b = 0x20; b < 0x80; ++b) {
        if (b == '"' || b == '\\') continue;
        const int32_t t = g.step(gs, uint8_t(b));
        if (t < 0) p.all_live = false;
        else add(t);
    }
    // Multi-byte characters as byte-range sequences (surrogates excluded); bytes deduplicated per byte class.
    struct Seq {
        uint8_t lo[4], hi[4];
        int n;
    };
    static const Seq kSeqs[] = {{{0xC2, 0x80}, {0xDF, 0xBF}, 2},
                                {{0xE0, 0xA0, 0x80}, {0xE0, 0xBF, 0xBF}, 3},
                                {{0xE1, 0x80, 0x80}, {0xEC, 0xBF, 0xBF}, 3},
                                {{0xED, 0x80, 0x80}, {0xED, 0x9F, 0xBF}, 3},
                                {{0xEE, 0x80, 0x80}, {0xEF, 0xBF, 0xBF}, 3},
                                {{0xF0, 0x90, 0x80, 0x80}, {0xF0, 0xBF, 0xBF, 0xBF}, 4},
                                {{0xF1, 0x80, 0x80, 0x80}, {0xF3, 0xBF, 0xBF, 0xBF}, 4},
                                {{0xF4, 0x80, 0x80, 0x80}, {0xF4, 0x8F, 0xBF, 0xBF}, 4}};
    std::vector<int32_t> cur, nxt;
    for (const Seq& q : kSeqs) {
        cur.assign(1, gs);
        for (int k = 0; k < q.n; ++k) {
            nxt.clear();
            for (int32_t x : cur) {
                bool seen[256] = {};
                for (int b = q.lo[k]; b <= q.hi[k]; ++b) {
                    const uint8_t c = g.byte_class[b];
                    if (seen[c]) continue;
                    seen[c] = true;
                    const int32_t t = g.step(x, uint8_t(b));
                    if (t < 0) { p.all_live = false; continue; }
                    if (k + 1 == q.n) {
                        add(t);
                    } else {
                        p.clean = p.clean && !(g.flags[size_t(t)] & (CompiledGrammar::ACCEPT | CompiledGrammar::HAS_CALLS));
                        if (std::find(nxt.begin(), nxt.end(), t) == nxt.end()) nxt.push_back(t);
                    }
                }
            }
            cur.swap(nxt);
        }
    }
    idx = int32_t(plain_.size());
    stats_.plain_steps++;
    plain_.push_back(std::move(p));
    return plain_.back();
}

int64_t Runtime::plain_reach(int32_t gs, bool* exact) {
    // Layers of states after i plain characters; K = the first i where some plain character dies.
    const CompiledGrammar& g = *g_;
    const int64_t all = t_->max_plain_chars();
    if (plain_mark_.empty()) plain_mark_.assign(size_t(g.n_states()), 0u);
    std::vector<int32_t> layer = {gs}, next;
    std::vector<std::vector<int32_t>> seen;
    bool clean = true;  // no accepting state or call inside the layers after the first
    for (int64_t i = 0; i < all; ++i) {
        next.clear();
        if (++plain_epoch_ == 0) {
            std::fill(plain_mark_.begin(), plain_mark_.end(), 0u);
            plain_epoch_ = 1;
        }
        bool live = true;
        for (int32_t s : layer) {
            const PlainStep& p = plain_step(s);
            live = live && p.all_live;
            clean = clean && p.clean;
            for (int32_t t : p.targets)
                if (plain_mark_[size_t(t)] != plain_epoch_) {
                    plain_mark_[size_t(t)] = plain_epoch_;
                    next.push_back(t);
                }
        }
        if (!live) {
            if (exact) *exact = clean && next.empty();
            return i;
        }
        std::sort(next.begin(), next.end());
        for (int32_t t : next) clean = clean && !(g.flags[size_t(t)] & (CompiledGrammar::ACCEPT | CompiledGrammar::HAS_CALLS));
        if (std::find(seen.begin(), seen.end(), next) != seen.end()) break;  // layers repeat: any length
        seen.push_back(next);
        layer.swap(next);
    }
    if (exact) *exact = true;
    return all;
}

}  // namespace ember::grammar
