// Reference recognizer for the grammar IR: an Earley parser over bytes, plain and slow, sharing nothing with
// the compiled automata or the matcher (compile.h, runtime.h). Tests compare masks with it: a token is
// allowed iff the accepted text plus its bytes is a viable prefix of the language.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/ir.h"

namespace ember::grammar {

class EarleyRef {
public:
    explicit EarleyRef(const GrammarIR& g);
    // The chart after `prefix`; empty chart = the prefix is not viable.
    struct Item {
        int prod, dot, origin;
    };
    struct State {
        std::vector<std::vector<Item>> sets;  // per position, in insertion order
    };
    State start() const;
    bool feed(State& s, uint8_t b) const;                    // false: not viable (s unusable)
    bool viable(State& s, const std::string& more) const;  // prefix + more is viable (s restored)
    bool complete(const State& s) const;                     // the prefix is a sentence

private:
    struct Sym {
        bool term;
        int id;  // terminal: index into terms_; nonterminal: index
    };
    int nt_of_node(const GrammarIR& g, int e);
    int nt_of_rule(const GrammarIR& g, int r);
    int new_nt();
    void add_prod(int nt, std::vector<Sym> rhs);
    void close(State& s, size_t k, std::vector<Item>& set) const;

    std::vector<ByteSet> terms_;
    std::vector<std::vector<Sym>> rhs_;
    std::vector<int> lhs_;
    std::vector<std::vector<int>> prods_of_;  // nonterminal → productions
    std::vector<bool> nullable_;
    std::vector<int> node_nt_, rule_nt_;
    int start_ = -1;
};

}  // namespace ember::grammar
