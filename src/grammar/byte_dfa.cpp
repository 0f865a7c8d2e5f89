// Byte DFA construction and algebra: compile the expression, product construction, complement with a sink,
// trimming and Moore partition refinement.
#include "grammar/byte_dfa.h"

#include <algorithm>
#include <unordered_map>

#include "grammar/byte_partition.h"
#include "grammar/compile.h"
#include "grammar/hopcroft.h"

namespace ember::grammar {

namespace {
constexpr size_t kMaxProductStates = 200000;
// Byte classes of a DFA (bytes whose columns are equal): cls[b] and one representative byte per class.
int dfa_classes(const ByteDfa& a, uint8_t* cls, std::vector<uint8_t>& rep) {
    BytePartition p;
    for (int s = 0; s < a.n; ++s) p.refine_by_row(&a.next[size_t(s) * 256]);
    std::copy(p.cls, p.cls + 256, cls);
    rep.assign(p.rep, p.rep + p.n);
    return p.n;
}

}  // namespace

Expected<ByteDfa> dfa_from_expr(GrammarIR& lex, int expr) {
    const int saved = lex.root;
    const int r = lex.add_rule("lexeme");
    lex.define(r, expr);
    lex.root = r;
    auto cg = compile_grammar(lex);
    lex.root = saved;
    if (!cg) {
        if (cg.message().find("matches nothing") != std::string::npos) return ByteDfa{};
        return cg.status();
    }
    const CompiledGrammar& c = *cg.value();
    EMBER_REQUIRE(c.calls.empty(), "internal: a lexeme references a rule");
    ByteDfa d;
    d.n = int(c.n_states());
    d.next.resize(size_t(d.n) * 256);
    d.accept.resize(size_t(d.n));
    for (int s = 0; s < d.n; ++s) {
        d.accept[size_t(s)] = c.accepting(s);
        for (int b = 0; b < 256; ++b) d.next[size_t(s) * 256 + size_t(b)] = c.step(s, uint8_t(b));
    }
    return d;  // compile_grammar trimmed and minimised it (one rule; start state 0)
}

ByteDfa dfa_minimize(const ByteDfa& a) {
    if (a.n == 0) return a;
    const size_t n = size_t(a.n);
    // Everything below runs on byte classes: a compact table ct[s * nb + c].
    BytePartition bp;
    for (size_t s = 0; s < n; ++s) bp.refine_by_row(&a.next[s * 256]);
    const size_t nb = size_t(bp.n);
    std::vector<int32_t> ct(n * nb);
    for (size_t s = 0; s < n; ++s)
        for (size_t c = 0; c < nb; ++c) ct[s * nb + c] = a.next[s * 256 + bp.rep[c]];
    // Trim: reachable from 0 and co-reachable to an accepting state.
    std::vector<bool> reach(n, false), co(n, false);
    std::vector<int32_t> st = {0};
    reach[0] = true;
    while (!st.empty()) {
        const int32_t s = st.back();
        st.pop_back();
        for (size_t c = 0; c < nb; ++c) {
            const int32_t t = ct[size_t(s) * nb + c];
            if (t >= 0 && !reach[size_t(t)]) { reach[size_t(t)] = true; st.push_back(t); }
        }
    }
    std::vector<uint32_t> rev_begin(n + 1, 0), rev;
    for (size_t i = 0; i < ct.size(); ++i)
        if (ct[i] >= 0) rev_begin[size_t(ct[i]) + 1]++;
    for (size_t s = 0; s < n; ++s) rev_begin[s + 1] += rev_begin[s];
    rev.resize(rev_begin[n]);
    {
        std::vector<uint32_t> fill(rev_begin.begin(), rev_begin.end() - 1);
        for (size_t i = 0; i < ct.size(); ++i)
            if (ct[i] >= 0) rev[fill[size_t(ct[i])]++] = uint32_t(i / nb);
    }
    for (size_t s = 0; s < n; ++s)
        if (a.accept[s] && reach[s]) { co[s] = true; st.push_back(int32_t(s)); }
    while (!st.empty()) {
        const int32_t s = st.back();
        st.pop_back();
        for (uint32_t k = rev_begin[size_t(s)]; k < rev_begin[size_t(s) + 1]; ++k)
            if (!co[rev[k]]) { co[rev[k]] = true; st.push_back(int32_t(rev[k])); }
    }
    if (!co[0]) return ByteDfa{};
    // Minimisation over the live states (dead targets are −1).
    std::vector<int32_t> live_id(n, -1), live;
    for (size_t s = 0; s < n; ++s)
        if (reach[s] && co[s]) { live_id[s] = int32_t(live.size()); live.push_back(int32_t(s)); }
    std::vector<int32_t> delta(live.size() * nb), label(live.size());
    for (size_t i = 0; i < live.size(); ++i) {
        label[i] = a.accept[size_t(live[i])];
        for (size_t c = 0; c < nb; ++c) {
            const int32_t t = ct[size_t(live[i]) * nb + c];
            delta[i * nb + c] = t >= 0 ? live_id[size_t(t)] : -1;
        }
    }
    const std::vector<int32_t> lc = hopcroft_classes(int32_t(live.size()), int32_t(nb), delta, label);
    int n_cls = 0;
    for (int32_t c : lc) n_cls = std::max(n_cls, c + 1);
    // Renumber with the start state's class as 0 (live[0] == 0: state 0 is live here), the rest by first state.
    std::vector<int32_t> order(size_t(n_cls), -1), first(size_t(n_cls), -1);
    int32_t k = 0;
    for (size_t i = 0; i < live.size(); ++i)
        if (order[size_t(lc[i])] < 0) { order[size_t(lc[i])] = k++; first[size_t(lc[i])] = int32_t(i); }
    ByteDfa d;
    d.n = n_cls;
    d.next.assign(size_t(n_cls) * 256, -1);
    d.accept.assign(size_t(n_cls), 0);
    for (int32_t c = 0; c < n_cls; ++c) {
        const int32_t i = first[size_t(c)], o = order[size_t(c)];
        d.accept[size_t(o)] = uint8_t(label[size_t(i)]);
        int32_t row[256];
        for (size_t x = 0; x < nb; ++x) {
            const int32_t t = delta[size_t(i) * nb + x];
            row[x] = t >= 0 ? order[size_t(lc[size_t(t)])] : -1;
        }
        for (int b = 0; b < 256; ++b) d.next[size_t(o) * 256 + size_t(b)] = row[bp.cls[b]];
    }
    return d;
}

Expected<ByteDfa> dfa_intersect(const ByteDfa& a, const ByteDfa& b) {
    if (a.n == 0 || b.n == 0) return ByteDfa{};
    // Joint byte classes: (class in a, class in b).
    uint8_t ca[256], cb[256];
    std::vector<uint8_t> ra, rb;
    dfa_classes(a, ca, ra);
    dfa_classes(b, cb, rb);
    std::unordered_map<int, int> joint;
    std::vector<uint8_t> rep;
    uint8_t jc[256];
    for (int c = 0; c < 256; ++c) {
        auto it = joint.emplace(int(ca[c]) * 256 + cb[c], int(joint.size()));
        if (it.second) rep.push_back(uint8_t(c));
        jc[c] = uint8_t(it.first->second);
    }
    std::unordered_map<int64_t, int32_t> ids;
    std::vector<std::pair<int32_t, int32_t>> pairs = {{0, 0}};
    ids.emplace(0, 0);
    ByteDfa d;
    std::vector<int32_t> row(rep.size());
    for (size_t k = 0; k < pairs.size(); ++k) {
        if (pairs.size() > kMaxProductStates)
            return errorf("intersection of two automata beyond %zu states (patterns / lengths too complex)", kMaxProductStates);
        const auto [x, y] = pairs[k];
        d.accept.push_back(a.accept[size_t(x)] && b.accept[size_t(y)]);
        for (size_t r = 0; r < rep.size(); ++r) {
            const int c = rep[r];
            const int32_t tx = a.next[size_t(x) * 256 + size_t(c)], ty = b.next[size_t(y) * 256 + size_t(c)];
            row[r] = -1;
            if (tx < 0 || ty < 0) continue;
            const int64_t key = int64_t(tx) * b.n + ty;
            auto it = ids.find(key);
            if (it == ids.end()) {
                row[r] = int32_t(pairs.size());
                ids.emplace(key, row[r]);
                pairs.push_back({tx, ty});
            } else {
                row[r] = it->second;
            }
        }
        d.next.resize(d.next.size() + 256);
        for (int c = 0; c < 256; ++c) d.next[k * 256 + size_t(c)] = row[jc[c]];
    }
    d.n = int(pairs.size());
    return dfa_minimize(d);
}

ByteDfa dfa_complement(const ByteDfa& a) {
    ByteDfa d;
    const int sink = a.n;  // a.n == 0: everything is accepted (sink = start)
    d.n = a.n + 1;
    d.next.assign(size_t(d.n) * 256, sink);
    d.accept.assign(size_t(d.n), 1);
    for (int s = 0; s < a.n; ++s) {
        d.accept[size_t(s)] = !a.accept[size_t(s)];
        for (int b = 0; b < 256; ++b) {
            const int32_t t = a.next[size_t(s) * 256 + size_t(b)];
            d.next[size_t(s) * 256 + size_t(b)] = t >= 0 ? t : sink;
        }
    }
    return dfa_minimize(d);
}

bool dfa_matches(const ByteDfa& a, std::string_view s) {
    if (a.n == 0) return false;
    int32_t st = 0;
    for (unsigned char c : s) {
        st = a.next[size_t(st) * 256 + c];
        if (st < 0) return false;
    }
    return a.accept[size_t(st)];
}

int dfa_expr(GrammarIR& g, ByteDfa d) { return d.n == 0 ? g.nothing() : g.dfa(std::move(d)); }

}  // namespace ember::grammar
