// Byte DFAs: dfa_minimize keeps the language and reaches the minimal size (brute force over short strings);
// dfa_from_expr already returns that minimal DFA (it is not minimised twice); algebra on small languages.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "grammar/byte_dfa.h"
#include "grammar/regex.h"

namespace ember::grammar {
namespace {

const std::string kAlpha = "abc";

// All strings over kAlpha of length ≤ len.
std::vector<std::string> strings_upto(int len) {
    std::vector<std::string> out = {""};
    for (size_t i = 0; i < out.size(); ++i)
        if (int(out[i].size()) < len)
            for (char c : kAlpha) out.push_back(out[i] + c);
    return out;
}

// The language of state s restricted to `probe`, as a bit string (states of an n-state DFA are told apart by
// strings of length ≤ n).
std::string signature(const ByteDfa& a, int32_t s, const std::vector<std::string>& probe) {
    std::string sig;
    for (const std::string& w : probe) {
        int32_t x = s;
        for (unsigned char c : w) {
            x = a.next[size_t(x) * 256 + c];
            if (x < 0) break;
        }
        sig += x >= 0 && a.accept[size_t(x)] ? '1' : '0';
    }
    return sig;
}

TEST(ByteDfa, MinimizeKeepsLanguageAndIsMinimal) {
    std::mt19937 rng(3);
    for (int trial = 0; trial < 200; ++trial) {
        ByteDfa a;
        a.n = 1 + int(rng() % 7);
        a.next.assign(size_t(a.n) * 256, -1);
        a.accept.assign(size_t(a.n), 0);
        for (int s = 0; s < a.n; ++s) {
            a.accept[size_t(s)] = rng() % 3 == 0;
            for (char c : kAlpha)
                if (rng() % 4) a.next[size_t(s) * 256 + uint8_t(c)] = int32_t(rng() % size_t(a.n));
        }
        const ByteDfa m = dfa_minimize(a);
        const std::vector<std::string> probe = strings_upto(a.n + 1);
        for (const std::string& w : probe) ASSERT_EQ(dfa_matches(m, w), dfa_matches(a, w)) << "trial " << trial << " on " << w;
        // Minimal: the live reachable states of a, counted by their languages.
        std::set<std::string> langs;
        std::vector<bool> seen(size_t(a.n), false);
        std::vector<int32_t> st = {0};
        seen[0] = true;
        while (!st.empty()) {
            const int32_t s = st.back();
            st.pop_back();
            const std::string sig = signature(a, s, probe);
            if (sig.find('1') != std::string::npos) langs.insert(sig);
            for (char c : kAlpha) {
                const int32_t t = a.next[size_t(s) * 256 + uint8_t(c)];
                if (t >= 0 && !seen[size_t(t)]) { seen[size_t(t)] = true; st.push_back(t); }
            }
        }
        EXPECT_EQ(m.n, int(langs.size())) << "trial " << trial;
    }
}

TEST(ByteDfa, FromExprIsAlreadyMinimal) {
    for (const char* re : {"(a|b)*abb", "a{2,5}(bc)?", "[a-c]+c[ab]*", "(ab|ba)*(a|)", "x|xy|xyz|w"}) {
        GrammarIR lex;
        auto e = regex_to_ir(lex, re, RegexMatch::FULL);
        ASSERT_TRUE(e.is_ok()) << re;
        auto d = dfa_from_expr(lex, e.value());
        ASSERT_TRUE(d.is_ok()) << re;
        const ByteDfa m = dfa_minimize(d.value());
        EXPECT_EQ(d.value().n, m.n) << re;
        EXPECT_EQ(d.value().next, m.next) << re;
        EXPECT_EQ(d.value().accept, m.accept) << re;
    }
}

TEST(ByteDfa, IntersectAndComplement) {
    GrammarIR lex;
    auto ab = dfa_from_expr(lex, regex_to_ir(lex, "[ab]*", RegexMatch::FULL).value()).value();
    auto has_bb = dfa_from_expr(lex, regex_to_ir(lex, ".*bb.*", RegexMatch::FULL).value()).value();
    auto no_bb = dfa_intersect(ab, dfa_complement(has_bb)).value();
    for (const std::string& w : strings_upto(6)) {
        const bool want = w.find('c') == std::string::npos && w.find("bb") == std::string::npos;
        EXPECT_EQ(dfa_matches(no_bb, w), want) << w;
    }
    EXPECT_EQ(no_bb.n, 2);  // after a / start, after one b
}

}  // namespace
}  // namespace ember::grammar
