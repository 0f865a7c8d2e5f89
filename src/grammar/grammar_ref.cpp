// Earley reference recognizer (grammar_ref.h): the IR expanded to plain BNF, unproductive productions
// removed (so a non-empty chart means a viable prefix), nullable nonterminals handled as Aycock & Horspool.
#include "grammar/grammar_ref.h"

#include <unordered_set>

namespace ember::grammar {

int EarleyRef::new_nt() {
    prods_of_.emplace_back();
    return int(prods_of_.size()) - 1;
}

void EarleyRef::add_prod(int nt, std::vector<Sym> rhs) {
    lhs_.push_back(nt);
    rhs_.push_back(std::move(rhs));
    prods_of_[size_t(nt)].push_back(int(rhs_.size()) - 1);
}

int EarleyRef::nt_of_rule(const GrammarIR& g, int r) {
    if (rule_nt_[size_t(r)] >= 0) return rule_nt_[size_t(r)];
    const int nt = new_nt();
    rule_nt_[size_t(r)] = nt;
    add_prod(nt, {{false, nt_of_node(g, g.rule(r).body)}});
    return nt;
}

int EarleyRef::nt_of_node(const GrammarIR& g, int e) {
    if (node_nt_[size_t(e)] >= 0) return node_nt_[size_t(e)];
    const Node& n = g.node(e);
    const int nt = new_nt();
    node_nt_[size_t(e)] = nt;
    switch (n.op) {
        case Op::EMPTY: add_prod(nt, {}); break;
        case Op::NOTHING: break;
        case Op::BYTES:
            terms_.push_back(n.bytes);
            add_prod(nt, {{true, int(terms_.size()) - 1}});
            break;
        case Op::SEQ: {
            std::vector<Sym> r;
            for (int k : n.kids) r.push_back({false, nt_of_node(g, k)});
            add_prod(nt, r);
            break;
        }
        case Op::ALT:
            for (int k : n.kids) add_prod(nt, {{false, nt_of_node(g, k)}});
            break;
        case Op::REPEAT: {
            // N → x^min T, with T → ε | x T (unbounded) or a chain O_j → ε | x O_{j−1}, O_0 → ε (bounded).
            const int x = nt_of_node(g, n.kids[0]);
            int tail = new_nt();
            add_prod(tail, {});
            if (n.max < 0) {
                add_prod(tail, {{false, x}, {false, tail}});
            } else {
                for (int j = 0; j < n.max - n.min; ++j) {
                    const int t = new_nt();
                    add_prod(t, {});
                    add_prod(t, {{false, x}, {false, tail}});
                    tail = t;
                }
            }
            std::vector<Sym> r(size_t(n.min), Sym{false, x});
            r.push_back({false, tail});
            add_prod(nt, r);
            break;
        }
        case Op::REF: add_prod(nt, {{false, nt_of_rule(g, n.rule)}}); break;
        case Op::GRAPH: {  // one nonterminal per graph state: S → expr T | ε (final)
            const Graph& gr = g.graph_of(e);
            std::vector<int> st(size_t(gr.n_states));
            for (auto& x : st) x = new_nt();
            add_prod(nt, {{false, st[size_t(gr.start)]}});
            for (int f : gr.finals) add_prod(st[size_t(f)], {});
            for (const Graph::Edge& ed : gr.edges) {
                if (ed.expr < 0) add_prod(st[size_t(ed.from)], {{false, st[size_t(ed.to)]}});
                else add_prod(st[size_t(ed.from)], {{false, nt_of_node(g, ed.expr)}, {false, st[size_t(ed.to)]}});
            }
            break;
        }
        case Op::DFA: {  // one nonterminal per DFA state: S → byte T | ε (accepting)
            const ByteDfa& d = g.dfa_of(e);
            std::vector<int> st(size_t(d.n));
            for (auto& x : st) x = new_nt();
            add_prod(nt, {{false, st[0]}});
            for (int s = 0; s < d.n; ++s) {
                if (d.accept[size_t(s)]) add_prod(st[size_t(s)], {});
                for (int b = 0; b < 256; ++b) {
                    const int32_t t = d.next[size_t(s) * 256 + size_t(b)];
                    if (t < 0) continue;
                    terms_.push_back(ByteSet::of(uint8_t(b)));
                    add_prod(st[size_t(s)], {{true, int(terms_.size()) - 1}, {false, st[size_t(t)]}});
                }
            }
            break;
        }
    }
    return nt;
}

EarleyRef::EarleyRef(const GrammarIR& g) {
    node_nt_.assign(size_t(g.n_nodes()), -1);
    rule_nt_.assign(size_t(g.n_rules()), -1);
    const int root = nt_of_rule(g, g.root);
    start_ = new_nt();
    add_prod(start_, {{false, root}});
    // Productive nonterminals; drop productions that use an unproductive one.
    const size_t N = prods_of_.size();
    std::vector<bool> prod_ok(N, false);
    for (bool ch = true; ch;) {
        ch = false;
        for (size_t p = 0; p < rhs_.size(); ++p) {
            if (prod_ok[size_t(lhs_[p])]) continue;
            bool ok = true;
            for (const Sym& s : rhs_[p]) ok = ok && (s.term || prod_ok[size_t(s.id)]);
            if (ok) prod_ok[size_t(lhs_[p])] = ch = true;
        }
    }
    for (size_t nt = 0; nt < N; ++nt) {
        std::vector<int> keep;
        for (int p : prods_of_[nt]) {
            bool ok = true;
            for (const Sym& s : rhs_[size_t(p)]) ok = ok && (s.term || prod_ok[size_t(s.id)]);
            if (ok) keep.push_back(p);
        }
        prods_of_[nt] = keep;
    }
    nullable_.assign(N, false);
    for (bool ch = true; ch;) {
        ch = false;
        for (size_t nt = 0; nt < N; ++nt) {
            if (nullable_[nt]) continue;
            for (int p : prods_of_[nt]) {
                bool all = true;
                for (const Sym& s : rhs_[size_t(p)]) all = all && !s.term && nullable_[size_t(s.id)];
                if (all) { nullable_[nt] = ch = true; break; }
            }
        }
    }
}

// Prediction and completion over the items of set k (a worklist; nullable symbols are stepped over when
// predicted, so a completion with origin k never has to revisit earlier items).
void EarleyRef::close(State& s, size_t k, std::vector<Item>& set) const {
    std::unordered_set<uint64_t> seen;
    auto key = [](const Item& i) { return (uint64_t(uint32_t(i.prod)) << 40) ^ (uint64_t(uint32_t(i.dot)) << 24) ^ uint64_t(uint32_t(i.origin)); };
    for (const Item& i : set) seen.insert(key(i));
    auto add = [&](Item i) {
        if (seen.insert(key(i)).second) set.push_back(i);
    };
    for (size_t w = 0; w < set.size(); ++w) {
        const Item it = set[w];
        const auto& r = rhs_[size_t(it.prod)];
        if (size_t(it.dot) < r.size()) {
            const Sym& x = r[size_t(it.dot)];
            if (x.term) continue;
            for (int q : prods_of_[size_t(x.id)]) add({q, 0, int(k)});
            if (nullable_[size_t(x.id)]) add({it.prod, it.dot + 1, it.origin});
        } else if (size_t(it.origin) != k) {
            const int A = lhs_[size_t(it.prod)];
            const auto& from = s.sets[size_t(it.origin)];
            for (size_t j = 0; j < from.size(); ++j) {
                const Item f = from[j];
                const auto& r2 = rhs_[size_t(f.prod)];
                if (size_t(f.dot) < r2.size() && !r2[size_t(f.dot)].term && r2[size_t(f.dot)].id == A)
                    add({f.prod, f.dot + 1, f.origin});
            }
        }
    }
}

EarleyRef::State EarleyRef::start() const {
    State s;
    std::vector<Item> set;
    for (int p : prods_of_[size_t(start_)]) set.push_back({p, 0, 0});
    close(s, 0, set);
    s.sets.push_back(std::move(set));
    return s;
}

bool EarleyRef::feed(State& s, uint8_t b) const {
    const size_t k = s.sets.size() - 1;
    std::vector<Item> next;
    for (const Item& it : s.sets[k]) {
        const auto& r = rhs_[size_t(it.prod)];
        if (size_t(it.dot) < r.size() && r[size_t(it.dot)].term && terms_[size_t(r[size_t(it.dot)].id)].has(b))
            next.push_back({it.prod, it.dot + 1, it.origin});
    }
    if (next.empty()) return false;
    close(s, k + 1, next);
    s.sets.push_back(std::move(next));
    return true;
}

bool EarleyRef::viable(State& s, const std::string& more) const {
    const size_t n = s.sets.size();
    bool ok = true;
    for (unsigned char c : more)
        if (!(ok = feed(s, c))) break;
    s.sets.resize(n);
    return ok;
}

bool EarleyRef::complete(const State& s) const {
    for (const Item& it : s.sets.back())
        if (lhs_[size_t(it.prod)] == start_ && it.origin == 0 && size_t(it.dot) == rhs_[size_t(it.prod)].size())
            return true;
    return false;
}

}  // namespace ember::grammar
