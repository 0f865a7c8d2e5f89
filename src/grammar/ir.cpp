// Grammar IR builders (ir.h). Small simplifications on construction keep the automata small: nested SEQ/ALT
// are flattened, EMPTY drops out of SEQ, NOTHING out of ALT.
#include "grammar/ir.h"

namespace ember::grammar {

int GrammarIR::add(Node n) {
    nodes_.push_back(std::move(n));
    return int(nodes_.size()) - 1;
}

int GrammarIR::empty() { return add(Node{}); }

int GrammarIR::nothing() {
    Node n;
    n.op = Op::NOTHING;
    return add(n);
}

int GrammarIR::bytes(const ByteSet& s) {
    if (s.empty()) return nothing();
    Node n;
    n.op = Op::BYTES;
    n.bytes = s;
    return add(n);
}

int GrammarIR::literal(std::string_view s) {
    std::vector<int> k;
    for (unsigned char c : s) k.push_back(byte(c));
    return seq(std::move(k));
}

int GrammarIR::seq(std::vector<int> kids) {
    Node n;
    n.op = Op::SEQ;
    for (int k : kids) {
        const Node& c = nodes_[size_t(k)];
        if (c.op == Op::EMPTY) continue;
        if (c.op == Op::NOTHING) return nothing();
        if (c.op == Op::SEQ) n.kids.insert(n.kids.end(), c.kids.begin(), c.kids.end());
        else n.kids.push_back(k);
    }
    if (n.kids.empty()) return empty();
    if (n.kids.size() == 1) return n.kids[0];
    return add(std::move(n));
}

int GrammarIR::alt(std::vector<int> kids) {
    Node n;
    n.op = Op::ALT;
    for (int k : kids) {
        const Node& c = nodes_[size_t(k)];
        if (c.op == Op::NOTHING) continue;
        if (c.op == Op::ALT) n.kids.insert(n.kids.end(), c.kids.begin(), c.kids.end());
        else n.kids.push_back(k);
    }
    if (n.kids.empty()) return nothing();
    if (n.kids.size() == 1) return n.kids[0];
    return add(std::move(n));
}

int GrammarIR::repeat(int e, int min, int max) {
    if (max == 0) return empty();
    if (min == 1 && max == 1) return e;
    const Node& c = nodes_[size_t(e)];
    if (c.op == Op::EMPTY) return empty();
    if (c.op == Op::NOTHING) return min == 0 ? empty() : nothing();
    Node n;
    n.op = Op::REPEAT;
    n.kids = {e};
    n.min = min;
    n.max = max;
    return add(std::move(n));
}

int GrammarIR::ref(int rule) {
    Node n;
    n.op = Op::REF;
    n.rule = rule;
    return add(n);
}

int GrammarIR::graph(Graph gr) {
    Node n;
    n.op = Op::GRAPH;
    n.aux = int(graphs_.size());
    for (const Graph::Edge& e : gr.edges)
        if (e.expr >= 0) n.kids.push_back(e.expr);  // for walkers that only follow kids
    graphs_.push_back(std::move(gr));
    return add(std::move(n));
}

int GrammarIR::dfa(ByteDfa d) {
    Node n;
    n.op = Op::DFA;
    n.aux = int(dfas_.size());
    dfas_.push_back(std::move(d));
    return add(std::move(n));
}

int GrammarIR::add_rule(const std::string& name, bool inline_ok) {
    Rule r;
    r.name = name;
    r.inline_ok = inline_ok;
    rules_.push_back(std::move(r));
    return int(rules_.size()) - 1;
}

int GrammarIR::find_rule(std::string_view name) const {
    for (size_t i = 0; i < rules_.size(); ++i)
        if (rules_[i].name == name) return int(i);
    return -1;
}

}  // namespace ember::grammar
