// Grammar IR → recursive transition network of DFAs (compile.h).
#include "grammar/compile.h"
#include "grammar/byte_partition.h"
#include "grammar/hopcroft.h"

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace ember::grammar {

namespace {

constexpr int64_t kInlineMaxStates = 3000;  // NFA size up to which a non-recursive rule is inlined

struct VecHash {
    size_t operator()(const std::vector<int32_t>& v) const {
        uint64_t h = 1469598103934665603ull;
        for (int32_t x : v) h = (h ^ uint32_t(x)) * 1099511628211ull;
        return size_t(h ^ (h >> 29));
    }
};

struct NState {
    std::vector<int32_t> eps;
    std::vector<std::pair<int32_t, int32_t>> bytes;  // (byte-set id, target)
    std::vector<std::pair<int32_t, int32_t>> calls;  // (rule, target)
};

struct DState {
    std::vector<int32_t> next;                       // [n_classes]
    std::vector<std::pair<int32_t, int32_t>> calls;  // (rule, target), sorted by rule
    bool accept = false;
};

class Compiler {
public:
    Compiler(const GrammarIR& g, const CompileLimits& lim) : g_(g), lim_(lim) {}

    Expected<std::shared_ptr<const CompiledGrammar>> run() {
        EMBER_REQUIRE(g_.root >= 0 && g_.root < g_.n_rules(), "grammar: no root rule");
        for (int r = 0; r < g_.n_rules(); ++r)
            EMBER_REQUIRE(g_.rule(r).body >= 0, "grammar: rule '%s' is referenced but not defined", g_.rule(r).name.c_str());
        find_recursion();
        make_byte_classes();
        // Called rules, discovered from the root.
        rule_dfa_.assign(size_t(g_.n_rules()), -1);
        std::vector<int> work = {g_.root};
        rule_dfa_[size_t(g_.root)] = 0;
        called_.push_back(g_.root);
        while (!work.empty()) {
            const int r = work.back();
            work.pop_back();
            EMBER_ASSIGN(std::vector<DState> d, build_rule(r));
            dfas_.resize(std::max(dfas_.size(), size_t(rule_dfa_[size_t(r)]) + 1));
            for (const DState& s : d)
                for (auto& c : s.calls)
                    if (rule_dfa_[size_t(c.first)] < 0) {
                        rule_dfa_[size_t(c.first)] = int(called_.size());
                        called_.push_back(c.first);
                        work.push_back(c.first);
                    }
            dfas_[size_t(rule_dfa_[size_t(r)])] = std::move(d);
        }
        dfas_.resize(called_.size());
        EMBER_TRY(trim());
        for (auto& d : dfas_) minimize(d);
        EMBER_TRY(check_left_recursion());
        return flatten();
    }

private:
    // ---- rule graph -------------------------------------------------------------------------------------
    void refs_of(int e, std::vector<int>& out) {  // each node once per call (the IR is a DAG)
        if (mark_nodes_.size() != size_t(g_.n_nodes())) mark_nodes_.assign(size_t(g_.n_nodes()), 0);
        ++node_stamp_;
        std::vector<int> st = {e};
        while (!st.empty()) {
            const int x = st.back();
            st.pop_back();
            if (mark_nodes_[size_t(x)] == node_stamp_) continue;
            mark_nodes_[size_t(x)] = node_stamp_;
            const Node& n = g_.node(x);
            if (n.op == Op::REF) out.push_back(n.rule);
            for (int k : n.kids) st.push_back(k);
        }
    }
    std::vector<uint32_t> mark_nodes_;
    uint32_t node_stamp_ = 0;

    void find_recursion() {  // Tarjan SCC; recursive_[r]: r is on a reference cycle
        const int R = g_.n_rules();
        std::vector<std::vector<int>> adj;
        adj.resize(size_t(R));
        std::vector<bool> got(size_t(R), false);  // rules reachable from the root only
        for (std::vector<int> st = {g_.root}; !st.empty();) {
            const int r = st.back();
            st.pop_back();
            if (got[size_t(r)]) continue;
            got[size_t(r)] = true;
            refs_of(g_.rule(r).body, adj[size_t(r)]);
            for (int x : adj[size_t(r)]) st.push_back(x);
        }
        std::vector<int> idx(size_t(R), -1), low(size_t(R), 0), stack;
        std::vector<bool> on(size_t(R), false);
        recursive_.assign(size_t(R), false);
        int counter = 0;
        std::function<void(int)> dfs = [&](int v) {
            idx[size_t(v)] = low[size_t(v)] = counter++;
            stack.push_back(v);
            on[size_t(v)] = true;
            for (int w : adj[size_t(v)]) {
                if (idx[size_t(w)] < 0) { dfs(w); low[size_t(v)] = std::min(low[size_t(v)], low[size_t(w)]); }
                else if (on[size_t(w)]) low[size_t(v)] = std::min(low[size_t(v)], idx[size_t(w)]);
            }
            if (low[size_t(v)] == idx[size_t(v)]) {
                std::vector<int> comp;
                int w;
                do { w = stack.back(); stack.pop_back(); on[size_t(w)] = false; comp.push_back(w); } while (w != v);
                bool self = false;
                for (int x : adj[size_t(v)]) self |= x == v;
                if (comp.size() > 1 || self)
                    for (int x : comp) recursive_[size_t(x)] = true;
            }
        };
        dfs(g_.root);
        inline_size_.assign(size_t(R), -1);
    }

    // Estimated NFA states of a rule with its inlinable references expanded (non-recursive rules only).
    int64_t inline_size(int r) {
        if (inline_size_[size_t(r)] >= 0) return inline_size_[size_t(r)];
        inline_size_[size_t(r)] = kInlineMaxStates + 1;  // guard
        const int64_t s = expr_size(g_.rule(r).body);
        return inline_size_[size_t(r)] = s;
    }
    int64_t expr_size(int e) {
        const Node& n = g_.node(e);
        int64_t s = 1;
        switch (n.op) {
            case Op::REF: return inlines(n.rule) ? inline_size(n.rule) : 1;
            case Op::REPEAT: {
                const int64_t k = expr_size(n.kids[0]);
                return k * (n.max < 0 ? std::max(n.min, 1) : n.max) + 2;
            }
            case Op::DFA: return g_.dfa_of(e).n + 1;
            case Op::GRAPH: s += g_.graph_of(e).n_states; [[fallthrough]];
            default:
                for (int k : n.kids) s += expr_size(k);
                return s;
        }
    }
    bool inlines(int r) { return g_.rule(r).inline_ok && !recursive_[size_t(r)] && inline_size(r) <= kInlineMaxStates; }

    // ---- byte classes -----------------------------------------------------------------------------------
    // Expression nodes reachable from the root (through rule references).
    std::vector<int> reachable_nodes() const {
        std::vector<bool> seen_node(size_t(g_.n_nodes()), false), seen_rule(size_t(g_.n_rules()), false);
        std::vector<int> out, st = {g_.rule(g_.root).body};
        seen_rule[size_t(g_.root)] = true;
        while (!st.empty()) {
            const int e = st.back();
            st.pop_back();
            if (seen_node[size_t(e)]) continue;
            seen_node[size_t(e)] = true;
            out.push_back(e);
            const Node& n = g_.node(e);
            for (int k : n.kids) st.push_back(k);
            if (n.op == Op::REF && !seen_rule[size_t(n.rule)]) {
                seen_rule[size_t(n.rule)] = true;
                st.push_back(g_.rule(n.rule).body);
            }
        }
        return out;
    }

    void make_byte_classes() {
        BytePartition p;
        struct SetHash {
            size_t operator()(const ByteSet& s) const {
                return size_t((s.w[0] * 0x9E3779B97F4A7C15ull) ^ (s.w[1] * 0xC2B2AE3D27D4EB4Full) ^
                              (s.w[2] * 0x165667B19E3779F9ull) ^ (s.w[3] * 0x27D4EB2F165667C5ull));
            }
        };
        std::unordered_set<ByteSet, SetHash> seen;  // each distinct set refines once (literals repeat bytes)
        for (int e : reachable_nodes()) {
            const Node& nd = g_.node(e);
            if (nd.op == Op::BYTES) {
                if (seen.insert(nd.bytes).second) p.refine_by_set(nd.bytes);
            } else if (nd.op == Op::DFA) {  // bytes equivalent in the DFA iff every state sends them alike
                const ByteDfa& d = g_.dfa_of(e);
                for (int st = 0; st < d.n; ++st) p.refine_by_row(&d.next[size_t(st) * 256]);
            }
        }
        n_classes_ = p.n;
        for (int b = 0; b < 256; ++b) byte_class_[b] = p.cls[b];
        class_rep_.assign(p.rep, p.rep + p.n);
    }

    // ---- NFA --------------------------------------------------------------------------------------------
    int32_t new_state() { nfa_.emplace_back(); return int32_t(nfa_.size()) - 1; }

    int32_t set_id(const ByteSet& s) {
        const std::vector<int32_t> key = {int32_t(s.w[0]), int32_t(s.w[0] >> 32), int32_t(s.w[1]), int32_t(s.w[1] >> 32),
                                          int32_t(s.w[2]), int32_t(s.w[2] >> 32), int32_t(s.w[3]), int32_t(s.w[3] >> 32)};
        auto it = set_ids_.find(key);
        if (it != set_ids_.end()) return it->second;
        set_ids_.emplace(key, int32_t(sets_.size()));
        sets_.push_back(s);
        std::vector<int32_t> cl;
        for (int c = 0; c < n_classes_; ++c)
            if (s.has(class_rep_[size_t(c)])) cl.push_back(c);
        set_classes_.push_back(std::move(cl));
        return int32_t(sets_.size()) - 1;
    }

    Status build(int e, int32_t from, int32_t to, int depth) {
        if (int64_t(nfa_.size()) + nfa_total_ > lim_.max_nfa_states)
            return errorf("grammar too large: more than %lld automaton states", (long long)lim_.max_nfa_states);
        if (depth > 4000) return errorf("grammar nested too deeply");
        const Node& n = g_.node(e);
        switch (n.op) {
            case Op::EMPTY: nfa_[size_t(from)].eps.push_back(to); return Status::ok();
            case Op::NOTHING: return Status::ok();
            case Op::BYTES: {
                const int32_t id = set_id(n.bytes);
                nfa_[size_t(from)].bytes.push_back({id, to});
                return Status::ok();
            }
            case Op::SEQ: {
                int32_t cur = from;
                for (size_t i = 0; i < n.kids.size(); ++i) {
                    const int32_t nx = i + 1 == n.kids.size() ? to : new_state();
                    EMBER_TRY(build(n.kids[i], cur, nx, depth + 1));
                    cur = nx;
                }
                return Status::ok();
            }
            case Op::ALT:
                for (int k : n.kids) {
                    const int32_t a = new_state(), b = new_state();  // fresh ends: loops inside never leak
                    nfa_[size_t(from)].eps.push_back(a);
                    EMBER_TRY(build(k, a, b, depth + 1));
                    nfa_[size_t(b)].eps.push_back(to);
                }
                return Status::ok();
            case Op::REPEAT: {
                int32_t cur = from;
                for (int i = 0; i < n.min; ++i) {
                    const int32_t nx = new_state();
                    EMBER_TRY(build(n.kids[0], cur, nx, depth + 1));
                    cur = nx;
                    if (int64_t(nfa_.size()) + nfa_total_ > lim_.max_nfa_states)
                        return errorf("grammar too large: more than %lld automaton states", (long long)lim_.max_nfa_states);
                }
                if (n.max < 0) {
                    const int32_t loop = new_state(), back = new_state();
                    nfa_[size_t(cur)].eps.push_back(loop);
                    EMBER_TRY(build(n.kids[0], loop, back, depth + 1));
                    nfa_[size_t(back)].eps.push_back(loop);
                    nfa_[size_t(loop)].eps.push_back(to);
                } else {
                    for (int i = n.min; i < n.max; ++i) {
                        nfa_[size_t(cur)].eps.push_back(to);
                        const int32_t nx = new_state();
                        EMBER_TRY(build(n.kids[0], cur, nx, depth + 1));
                        cur = nx;
                        if (int64_t(nfa_.size()) + nfa_total_ > lim_.max_nfa_states)
                            return errorf("grammar too large: more than %lld automaton states", (long long)lim_.max_nfa_states);
                    }
                    nfa_[size_t(cur)].eps.push_back(to);
                }
                return Status::ok();
            }
            case Op::GRAPH: {
                const Graph& gr = g_.graph_of(e);
                std::vector<int32_t> map(size_t(gr.n_states));
                for (auto& m : map) m = new_state();
                nfa_[size_t(from)].eps.push_back(map[size_t(gr.start)]);
                for (int f : gr.finals) nfa_[size_t(map[size_t(f)])].eps.push_back(to);
                for (const Graph::Edge& ed : gr.edges) {
                    if (ed.expr < 0) nfa_[size_t(map[size_t(ed.from)])].eps.push_back(map[size_t(ed.to)]);
                    else EMBER_TRY(build(ed.expr, map[size_t(ed.from)], map[size_t(ed.to)], depth + 1));
                }
                return Status::ok();
            }
            case Op::DFA: {
                const ByteDfa& d = g_.dfa_of(e);
                std::vector<int32_t> map(size_t(d.n));
                for (auto& m : map) m = new_state();
                nfa_[size_t(from)].eps.push_back(map[0]);
                for (int st = 0; st < d.n; ++st) {
                    if (d.accept[size_t(st)]) nfa_[size_t(map[size_t(st)])].eps.push_back(to);
                    std::unordered_map<int32_t, ByteSet> by_target;
                    for (int b = 0; b < 256; ++b) {
                        const int32_t t = d.next[size_t(st) * 256 + size_t(b)];
                        if (t >= 0) by_target[t].add(uint8_t(b));
                    }
                    for (auto& [t, set] : by_target) nfa_[size_t(map[size_t(st)])].bytes.push_back({set_id(set), map[size_t(t)]});
                }
                return Status::ok();
            }
            case Op::REF:
                if (inlines(n.rule)) return build(g_.rule(n.rule).body, from, to, depth + 1);
                nfa_[size_t(from)].calls.push_back({n.rule, to});
                return Status::ok();
        }
        return Status::ok();
    }

    void closure(std::vector<int32_t>& set) {
        ++stamp_;
        std::vector<int32_t> stack = set;
        set.clear();
        while (!stack.empty()) {
            const int32_t s = stack.back();
            stack.pop_back();
            if (mark_[size_t(s)] == stamp_) continue;
            mark_[size_t(s)] = stamp_;
            set.push_back(s);
            for (int32_t t : nfa_[size_t(s)].eps) stack.push_back(t);
        }
        std::sort(set.begin(), set.end());
    }

    Expected<std::vector<DState>> build_rule(int r) {
        nfa_.clear();
        const int32_t start = new_state(), accept = new_state();
        EMBER_TRY(build(g_.rule(r).body, start, accept, 0));
        nfa_total_ += int64_t(nfa_.size());
        mark_.assign(nfa_.size(), 0);
        stamp_ = 0;
        std::unordered_map<std::vector<int32_t>, int32_t, VecHash> ids;
        std::vector<std::vector<int32_t>> sets;
        std::vector<DState> dfa;
        std::vector<int32_t> s0 = {start};
        closure(s0);
        ids.emplace(s0, 0);
        sets.push_back(s0);
        std::vector<std::vector<int32_t>> by_class;
        by_class.resize(size_t(n_classes_));
        for (size_t k = 0; k < sets.size(); ++k) {
            if (int64_t(sets.size()) + dfa_total_ > lim_.max_dfa_states)
                return errorf("grammar too large: more than %lld DFA states", (long long)lim_.max_dfa_states);
            if (subset_work_ > lim_.max_subset_work)
                return errorf("grammar too large: the subset construction exceeds %lld steps", (long long)lim_.max_subset_work);
            DState d;
            d.next.assign(size_t(n_classes_), -1);
            for (auto& v : by_class) v.clear();
            std::vector<std::pair<int32_t, int32_t>> calls;
            for (int32_t s : sets[k]) {
                d.accept |= s == accept;
                for (auto& [set, t] : nfa_[size_t(s)].bytes)
                    for (int32_t c : set_classes_[size_t(set)]) by_class[size_t(c)].push_back(t);
                for (auto& c : nfa_[size_t(s)].calls) calls.push_back(c);
            }
            auto intern = [&](std::vector<int32_t> t) {
                closure(t);
                subset_work_ += int64_t(t.size());
                auto it = ids.find(t);
                if (it != ids.end()) return it->second;
                const int32_t id = int32_t(sets.size());
                ids.emplace(t, id);
                sets.push_back(std::move(t));
                return id;
            };
            // Classes with the same target list share one closure (most classes of a state go to few places).
            std::vector<std::pair<std::vector<int32_t>, int32_t>> memo;
            for (int c = 0; c < n_classes_; ++c) {
                auto& t = by_class[size_t(c)];
                if (t.empty()) continue;
                std::sort(t.begin(), t.end());
                t.erase(std::unique(t.begin(), t.end()), t.end());
                int32_t id = -1;
                for (auto& [k, v] : memo)
                    if (k == t) { id = v; break; }
                if (id < 0) {
                    id = intern(t);
                    memo.push_back({t, id});
                }
                d.next[size_t(c)] = id;
            }
            std::sort(calls.begin(), calls.end());
            for (size_t i = 0; i < calls.size();) {
                size_t j = i;
                std::vector<int32_t> t;
                while (j < calls.size() && calls[j].first == calls[i].first) t.push_back(calls[j++].second);
                d.calls.push_back({calls[i].first, intern(std::move(t))});
                i = j;
            }
            dfa.push_back(std::move(d));
        }
        dfa_total_ += int64_t(dfa.size());
        return dfa;
    }

    // ---- trimming ---------------------------------------------------------------------------------------
    // live(r, s): state s of rule r can reach acceptance. The least solution of Horn clauses, by unit
    // propagation (linear in the edges): accepting → live; a byte edge s → t: live(t) → live(s); a call of
    // rule R at s returning to t: live(t) ∧ live(R, 0) → live(s) (R productive). Then dead edges are removed.
    Status trim() {
        const size_t R = dfas_.size();
        std::vector<size_t> base(R + 1, 0);
        for (size_t r = 0; r < R; ++r) base[r + 1] = base[r] + dfas_[r].size();
        const size_t N = base[R];
        // Watchers per premise node: clause ids (byte clauses have one premise, call clauses two).
        struct Clause {
            uint32_t head;
            int32_t need;
        };
        std::vector<Clause> clauses;
        std::vector<uint32_t> w_begin(N + 1, 0), w_list;
        std::vector<std::pair<uint32_t, uint32_t>> watch;  // (premise node, clause)
        for (size_t r = 0; r < R; ++r)
            for (size_t s = 0; s < dfas_[r].size(); ++s) {
                const DState& d = dfas_[r][s];
                const uint32_t x = uint32_t(base[r] + s);
                for (int32_t t : d.next)
                    if (t >= 0) {
                        watch.push_back({uint32_t(base[r] + size_t(t)), uint32_t(clauses.size())});
                        clauses.push_back({x, 1});
                    }
                for (auto& c : d.calls) {
                    const uint32_t ret = uint32_t(base[r] + size_t(c.second));
                    const uint32_t start = uint32_t(base[size_t(rule_dfa_[size_t(c.first)])]);
                    watch.push_back({ret, uint32_t(clauses.size())});
                    if (start != ret) watch.push_back({start, uint32_t(clauses.size())});
                    clauses.push_back({x, start != ret ? 2 : 1});
                }
            }
        for (auto& [p, c] : watch) w_begin[p + 1]++;
        for (size_t i = 0; i < N; ++i) w_begin[i + 1] += w_begin[i];
        w_list.resize(watch.size());
        {
            std::vector<uint32_t> fill(w_begin.begin(), w_begin.end() - 1);
            for (auto& [p, c] : watch) w_list[fill[p]++] = c;
        }
        std::vector<uint8_t> live(N, 0);
        std::vector<uint32_t> st;
        for (size_t r = 0; r < R; ++r)
            for (size_t s = 0; s < dfas_[r].size(); ++s)
                if (dfas_[r][s].accept) { live[base[r] + s] = 1; st.push_back(uint32_t(base[r] + s)); }
        while (!st.empty()) {
            const uint32_t x = st.back();
            st.pop_back();
            for (uint32_t k = w_begin[x]; k < w_begin[x + 1]; ++k) {
                Clause& c = clauses[w_list[k]];
                if (--c.need == 0 && !live[c.head]) { live[c.head] = 1; st.push_back(c.head); }
            }
        }
        if (!live[0]) return errorf("grammar: rule '%s' matches nothing", g_.rule(g_.root).name.c_str());
        for (size_t r = 0; r < R; ++r) {
            auto& d = dfas_[r];
            for (size_t s = 0; s < d.size(); ++s) {
                for (int32_t& t : d[s].next)
                    if (t >= 0 && !live[base[r] + size_t(t)]) t = -1;
                std::vector<std::pair<int32_t, int32_t>> keep;
                for (auto& c : d[s].calls)
                    if (live[base[size_t(rule_dfa_[size_t(c.first)])]] && live[base[r] + size_t(c.second)]) keep.push_back(c);
                d[s].calls = std::move(keep);
            }
        }
        return Status::ok();
    }

    // Minimisation of one rule's DFA (after trimming): states reachable from 0, merged when they agree on
    // acceptance, byte targets and calls. Equivalent states would otherwise differ as mask-cache keys.
    void minimize(std::vector<DState>& d) {
        const size_t n = d.size();
        std::vector<bool> reach(n, false);
        std::vector<int32_t> st = {0};
        reach[0] = true;
        while (!st.empty()) {
            const int32_t s = st.back();
            st.pop_back();
            auto visit = [&](int32_t t) {
                if (t >= 0 && !reach[size_t(t)]) { reach[size_t(t)] = true; st.push_back(t); }
            };
            for (int32_t t : d[size_t(s)].next) visit(t);
            for (auto& c : d[size_t(s)].calls) visit(c.second);
        }
        // Hopcroft over reachable states; symbols: byte classes, then one per called rule (→ return state).
        std::vector<int32_t> rid(n, -1), states;
        for (size_t s = 0; s < n; ++s)
            if (reach[s]) { rid[s] = int32_t(states.size()); states.push_back(int32_t(s)); }
        std::vector<int32_t> callees;
        for (int32_t s : states)
            for (auto& c : d[size_t(s)].calls) callees.push_back(c.first);
        std::sort(callees.begin(), callees.end());
        callees.erase(std::unique(callees.begin(), callees.end()), callees.end());
        const size_t m_sym = size_t(n_classes_) + callees.size();
        std::vector<int32_t> delta(states.size() * m_sym, -1), label(states.size());
        for (size_t i = 0; i < states.size(); ++i) {
            const DState& x = d[size_t(states[i])];
            label[i] = x.accept;
            for (int c = 0; c < n_classes_; ++c) delta[i * m_sym + size_t(c)] = x.next[size_t(c)] >= 0 ? rid[size_t(x.next[size_t(c)])] : -1;
            for (auto& c : x.calls) {
                const size_t sym = size_t(n_classes_) + size_t(std::lower_bound(callees.begin(), callees.end(), c.first) - callees.begin());
                delta[i * m_sym + sym] = rid[size_t(c.second)];
            }
        }
        const std::vector<int32_t> rc = hopcroft_classes(int32_t(states.size()), int32_t(m_sym), delta, label);
        std::vector<int32_t> cls(n, -1);
        size_t n_cls = 0;
        for (size_t i = 0; i < states.size(); ++i) {
            cls[size_t(states[i])] = rc[i];
            n_cls = std::max(n_cls, size_t(rc[i]) + 1);
        }
        if (n_cls == n) return;
        std::vector<int32_t> order(n_cls, -1);
        int32_t k = 0;
        order[size_t(cls[0])] = k++;
        for (size_t s = 0; s < n; ++s)
            if (reach[s] && order[size_t(cls[s])] < 0) order[size_t(cls[s])] = k++;
        std::vector<DState> m(n_cls);
        std::vector<bool> done(n_cls, false);
        for (size_t s = 0; s < n; ++s) {
            if (!reach[s]) continue;
            const int32_t c = order[size_t(cls[s])];
            if (done[size_t(c)]) continue;
            done[size_t(c)] = true;
            DState x = d[s];
            for (int32_t& t : x.next)
                if (t >= 0) t = order[size_t(cls[size_t(t)])];
            for (auto& cl : x.calls) cl.second = order[size_t(cls[size_t(cl.second)])];
            m[size_t(c)] = std::move(x);
        }
        d = std::move(m);
    }

    // A rule that can reach a call of itself without consuming a byte would make the matcher's stack grow
    // without bound (left recursion): refused.
    Status check_left_recursion() {
        const size_t R = dfas_.size();
        std::vector<bool> nullable(R, false);
        auto zero_reach = [&](size_t r, std::vector<int32_t>* callees) {  // states reachable without a byte
            const auto& d = dfas_[r];
            std::vector<bool> seen(d.size(), false);
            std::vector<int32_t> st = {0};
            bool acc = false;
            while (!st.empty()) {
                const int32_t s = st.back();
                st.pop_back();
                if (seen[size_t(s)]) continue;
                seen[size_t(s)] = true;
                acc = acc || d[size_t(s)].accept;
                for (auto& c : d[size_t(s)].calls) {
                    const int32_t callee = rule_dfa_[size_t(c.first)];
                    if (callees) callees->push_back(callee);
                    if (nullable[size_t(callee)]) st.push_back(c.second);
                }
            }
            return acc;
        };
        for (bool ch = true; ch;) {
            ch = false;
            for (size_t r = 0; r < R; ++r)
                if (!nullable[r] && zero_reach(r, nullptr)) nullable[r] = ch = true;
        }
        std::vector<std::vector<int32_t>> left(R);
        for (size_t r = 0; r < R; ++r) zero_reach(r, &left[r]);
        std::vector<int> color(R, 0);  // 0 new, 1 on stack, 2 done
        std::string bad;
        std::function<bool(size_t)> dfs = [&](size_t v) {
            color[v] = 1;
            for (int32_t w : left[v]) {
                if (color[size_t(w)] == 1) { bad = g_.rule(called_[size_t(w)]).name; return true; }
                if (color[size_t(w)] == 0 && dfs(size_t(w))) return true;
            }
            color[v] = 2;
            return false;
        };
        for (size_t r = 0; r < R; ++r)
            if (color[r] == 0 && dfs(r))
                return errorf("grammar: left recursion through rule '%s' is not supported", bad.c_str());
        return Status::ok();
    }

    // ---- flatten ----------------------------------------------------------------------------------------
    Expected<std::shared_ptr<const CompiledGrammar>> flatten() {
        auto cg = std::make_shared<CompiledGrammar>();
        cg->n_classes = n_classes_;
        std::copy(byte_class_, byte_class_ + 256, cg->byte_class);
        std::vector<int32_t> base(dfas_.size());
        int64_t total = 0;
        for (size_t r = 0; r < dfas_.size(); ++r) { base[r] = int32_t(total); total += int64_t(dfas_[r].size()); }
        const size_t nc = size_t(n_classes_);
        cg->next.assign(size_t(total) * nc, -1);
        cg->flags.assign(size_t(total), 0);
        cg->state_rule.assign(size_t(total), 0);
        cg->call_begin.assign(size_t(total) + 1, 0);
        for (size_t r = 0; r < dfas_.size(); ++r) cg->rule_names.push_back(g_.rule(called_[r]).name);
        for (size_t r = 0; r < dfas_.size(); ++r) cg->rule_start.push_back(base[r]);
        for (size_t r = 0; r < dfas_.size(); ++r)
            for (size_t s = 0; s < dfas_[r].size(); ++s) {
                const DState& d = dfas_[r][s];
                const size_t gs = size_t(base[r]) + s;
                uint8_t f = d.accept ? CompiledGrammar::ACCEPT : 0;
                for (size_t c = 0; c < nc; ++c)
                    if (d.next[c] >= 0) {
                        cg->next[gs * nc + c] = base[r] + d.next[c];
                        f |= CompiledGrammar::HAS_BYTES;
                    }
                if (!d.calls.empty()) f |= CompiledGrammar::HAS_CALLS;
                cg->flags[gs] = f;
                cg->state_rule[gs] = int32_t(r);
                for (auto& c : d.calls) {
                    const int32_t callee = rule_dfa_[size_t(c.first)];
                    cg->calls.push_back({base[size_t(callee)], base[r] + c.second, callee});
                }
                cg->call_begin[gs + 1] = uint32_t(cg->calls.size());
            }
        cg->root_start = base[0];
        cg->max_match_work = lim_.max_match_work;
        cg->max_stack_nodes = lim_.max_stack_nodes;
        return std::shared_ptr<const CompiledGrammar>(std::move(cg));
    }

    const GrammarIR& g_;
    CompileLimits lim_;
    std::vector<bool> recursive_;
    std::vector<int64_t> inline_size_;
    int n_classes_ = 0;
    uint8_t byte_class_[256] = {};
    std::vector<uint8_t> class_rep_;
    std::vector<ByteSet> sets_;
    std::unordered_map<std::vector<int32_t>, int32_t, VecHash> set_ids_;
    std::vector<std::vector<int32_t>> set_classes_;
    std::vector<NState> nfa_;
    std::vector<uint32_t> mark_;
    uint32_t stamp_ = 0;
    int64_t nfa_total_ = 0, dfa_total_ = 0, subset_work_ = 0;
    std::vector<int> rule_dfa_;  // IR rule → index of its DFA (-1 = not called)
    std::vector<int> called_;    // DFA index → IR rule
    std::vector<std::vector<DState>> dfas_;
};

}  // namespace

Expected<std::shared_ptr<const CompiledGrammar>> compile_grammar(const GrammarIR& g, const CompileLimits& lim) {
    Compiler c(g, lim);
    return c.run();
}

}  // namespace ember::grammar
