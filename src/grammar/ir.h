// Grammar IR: a context-free grammar over BYTES whose rule bodies are regular expressions over byte sets and
// references to rules (an "extended BNF"). Every front end lowers to it: GBNF (gbnf.h), regular expressions
// (regex.h) and JSON Schema (json_schema.h); compile.h turns it into the automata the matcher runs.
//   expr := BYTES(set) | SEQ(e...) | ALT(e...) | REPEAT(e, min, max) | REF(rule) | EMPTY | NOTHING
//         | GRAPH(states, edges labelled by expressions)   an explicit automaton (shared states: object members)
//         | DFA(byte automaton)                             a byte DFA built elsewhere (byte_dfa.h: intersections)
// Text is UTF-8: a Unicode character class is lowered to byte sequences (utf8.h) before it gets here.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::grammar {

// A set of byte values (256 bits).
struct ByteSet {
    uint64_t w[4] = {0, 0, 0, 0};
    static ByteSet of(uint8_t b) { ByteSet s; s.add(b); return s; }
    static ByteSet range(uint8_t lo, uint8_t hi) { ByteSet s; s.add_range(lo, hi); return s; }
    static ByteSet all() { ByteSet s; s.w[0] = s.w[1] = s.w[2] = s.w[3] = ~0ull; return s; }
    void add(uint8_t b) { w[b >> 6] |= 1ull << (b & 63); }
    void add_range(uint8_t lo, uint8_t hi) { for (int b = lo; b <= hi; ++b) add(uint8_t(b)); }
    bool has(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
    bool empty() const { return !(w[0] | w[1] | w[2] | w[3]); }
    ByteSet operator|(const ByteSet& o) const { ByteSet s; for (int i = 0; i < 4; ++i) s.w[i] = w[i] | o.w[i]; return s; }
    ByteSet operator&(const ByteSet& o) const { ByteSet s; for (int i = 0; i < 4; ++i) s.w[i] = w[i] & o.w[i]; return s; }
    ByteSet operator~() const { ByteSet s; for (int i = 0; i < 4; ++i) s.w[i] = ~w[i]; return s; }
    bool operator==(const ByteSet& o) const { return w[0] == o.w[0] && w[1] == o.w[1] && w[2] == o.w[2] && w[3] == o.w[3]; }
};

enum class Op : uint8_t { EMPTY, NOTHING, BYTES, SEQ, ALT, REPEAT, REF, GRAPH, DFA };

// An automaton whose edges are expressions (expr < 0: epsilon); it matches a path from start to a final state.
struct Graph {
    struct Edge {
        int from, to, expr;
    };
    int n_states = 0, start = 0;
    std::vector<int> finals;
    std::vector<Edge> edges;
};

// A deterministic automaton over bytes: next[s * 256 + b] (−1 = reject), accept[s], start state 0.
struct ByteDfa {
    int n = 0;
    std::vector<int32_t> next;
    std::vector<uint8_t> accept;
};

struct Node {
    Op op = Op::EMPTY;
    ByteSet bytes;            // BYTES
    std::vector<int> kids;    // SEQ, ALT; REPEAT: one
    int min = 0, max = 0;     // REPEAT: max < 0 = unbounded
    int rule = -1;            // REF
    int aux = -1;             // GRAPH / DFA: index into the grammar's graphs / dfas
};

struct Rule {
    std::string name;
    int body = -1;            // expression id; -1 = not defined yet
    bool inline_ok = true;    // false: always a call (JSON value rules: shared, so their masks are cached)
};

// The grammar: an arena of expressions plus named rules. Builders return expression ids.
class GrammarIR {
public:
    int empty();
    int nothing();
    int bytes(const ByteSet& s);
    int byte(uint8_t b) { return bytes(ByteSet::of(b)); }
    int literal(std::string_view s);             // the bytes of s in order
    int seq(std::vector<int> kids);
    int alt(std::vector<int> kids);
    int repeat(int e, int min, int max);         // max < 0: unbounded
    int star(int e) { return repeat(e, 0, -1); }
    int plus(int e) { return repeat(e, 1, -1); }
    int opt(int e) { return repeat(e, 0, 1); }
    int ref(int rule);
    int graph(Graph g);
    int dfa(ByteDfa d);
    const Graph& graph_of(int e) const { return graphs_[size_t(nodes_[size_t(e)].aux)]; }
    const ByteDfa& dfa_of(int e) const { return dfas_[size_t(nodes_[size_t(e)].aux)]; }
    // Rules: add_rule makes a new (undefined) rule; find_rule by name (-1 if none).
    int add_rule(const std::string& name, bool inline_ok = true);
    int find_rule(std::string_view name) const;
    void define(int rule, int body) { rules_[size_t(rule)].body = body; }

    const Node& node(int e) const { return nodes_[size_t(e)]; }
    const Rule& rule(int r) const { return rules_[size_t(r)]; }
    Rule& rule(int r) { return rules_[size_t(r)]; }
    int n_rules() const { return int(rules_.size()); }
    int n_nodes() const { return int(nodes_.size()); }
    int root = -1;  // rule id of the start symbol

private:
    int add(Node n);
    std::vector<Node> nodes_;
    std::vector<Rule> rules_;
    std::vector<Graph> graphs_;
    std::vector<ByteDfa> dfas_;
};

}  // namespace ember::grammar
