// Matcher tests: GBNF and regex grammars, acceptance of strings, masks against the Earley brute force,
// rollback, EOS handling.
#include <gtest/gtest.h>

#include "grammar/gbnf.h"
#include "grammar/grammar_test_util.h"
#include "grammar/regex.h"

namespace ember::grammar {
namespace {

std::shared_ptr<Grammar> make(const Expected<GrammarIR>& ir, std::shared_ptr<const TokenIndex> v) {
    EXPECT_TRUE(ir.is_ok()) << ir.message();
    auto g = Grammar::create(ir.value(), v);
    EXPECT_TRUE(g.is_ok()) << g.message();
    return g.value();
}

// Full-string acceptance through accept_bytes + is_complete.
bool matches(const std::shared_ptr<Grammar>& g, const std::string& s) {
    Matcher m(g);
    return m.accept_bytes(s).is_ok() && m.is_complete();
}

const char* kJsonGbnf = R"(
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws
array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws
string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";

TEST(Gbnf, JsonGrammarAcceptsAndRejects) {
    auto v = test::synthetic_vocab({}, "ab", 0, 1);
    auto g = make(parse_gbnf(kJsonGbnf), v);
    for (const char* s : {"{}", "{\"a\": [1, 2.5, -3e4, true, null]}", "\"x\\u00e9\"", "[ ]", "{\"k\":{\"n\":\"é\"}}"})
        EXPECT_TRUE(matches(g, s)) << s;
    for (const char* s : {"{", "{\"a\" 1}", "[1,]", "01x", "\"\x01\"", "tru", "{\"a\":1}}"})
        EXPECT_FALSE(matches(g, s)) << s;
}

TEST(Gbnf, Errors) {
    EXPECT_FALSE(parse_gbnf("root ::= foo").is_ok());                  // undefined rule
    EXPECT_FALSE(parse_gbnf("start ::= \"a\"").is_ok());                // no root
    EXPECT_FALSE(parse_gbnf("root ::= \"a").is_ok());                   // unterminated literal
    EXPECT_FALSE(parse_gbnf("root ::= [a-").is_ok());                   // unterminated class
    EXPECT_FALSE(parse_gbnf("root ::= <[1000]>").is_ok());              // token references
    EXPECT_FALSE(parse_gbnf("root ::= \"a\"\nroot ::= \"b\"").is_ok());  // defined twice
    auto lr = parse_gbnf("root ::= root \"a\" | \"b\"");
    ASSERT_TRUE(lr.is_ok());
    auto c = compile_grammar(lr.value());
    ASSERT_FALSE(c.is_ok());
    EXPECT_NE(c.message().find("left recursion"), std::string::npos) << c.message();
    auto none = parse_gbnf("root ::= x\nx ::= \"a\" x");  // only infinite strings
    ASSERT_TRUE(none.is_ok());
    EXPECT_FALSE(compile_grammar(none.value()).is_ok());
}

// Trimming: alternatives through rules that can never finish are removed, however deep the chain of calls
// (x, y, z recurse without a way out; w finishes only through p, which finishes only through q).
TEST(Gbnf, UnproductiveCallChainsAreTrimmed) {
    auto v = test::synthetic_vocab({}, "abc", 0, 1);
    auto ir = parse_gbnf(
        "root ::= \"a\" x | \"b\" w | \"c\"\n"
        "x ::= \"(\" y \")\"\ny ::= \"[\" z \"]\"\nz ::= \"{\" x \"}\" | \"<\" y \">\"\n"
        "w ::= \"(\" p \")\" | \"w\" w\np ::= \"[\" q \"]\" | \"p\" p\nq ::= \"q\" | \"{\" w \"}\"");
    auto g = make(ir, v);
    for (const char* s : {"c", "b([q])", "bww(pp[{([q])}])"}) EXPECT_TRUE(matches(g, s)) << s;
    for (const char* s : {"a", "a([", "b(", "bw"}) EXPECT_FALSE(matches(g, s)) << s;
    Matcher m(g);  // "a" can never be completed: it is not allowed at all
    EXPECT_FALSE(m.accept_bytes("a").is_ok());
    EXPECT_TRUE(m.accept_bytes("b").is_ok());
}

TEST(Regex, FullMatch) {
    auto v = test::synthetic_vocab({}, "ab", 0, 1);
    struct Case {
        const char* re;
        std::vector<const char*> yes, no;
    };
    const Case cases[] = {
        {"a(b|c)*d", {"ad", "abcbd"}, {"a", "abdx", "bd"}},
        {"^\\d{3}-\\d{2,4}$", {"123-45", "123-4567"}, {"12-45", "123-45678", "123-"}},
        {"[^a-c]+x?", {"dx", "zzz", "é", "x?"}, {"ax", "", "b"}},
        {"(?:ab){2,}|c{0,1}", {"abab", "ababab", "", "c"}, {"ab", "cc"}},
        {"[\\w.-]+@[a-z]+\\.(com|org)", {"a.b-c@x.com"}, {"@x.com", "a@x.co"}},
        {"\\u00e9|\\x41|\\n|[\\s]", {"é", "A", "\n", " ", "\t"}, {"e", "a"}},
        {".+", {"abc", "日本"}, {"a\nb", ""}},
        {"a{2}b*?", {"aa", "aab"}, {"a"}},
    };
    for (const Case& c : cases) {
        auto ir = regex_grammar(c.re);
        ASSERT_TRUE(ir.is_ok()) << c.re << ": " << ir.message();
        auto g = Grammar::create(ir.value(), v);
        ASSERT_TRUE(g.is_ok()) << c.re << ": " << g.message();
        for (const char* s : c.yes) EXPECT_TRUE(matches(g.value(), s)) << c.re << " on " << s;
        for (const char* s : c.no) EXPECT_FALSE(matches(g.value(), s)) << c.re << " on " << s;
    }
}

TEST(Regex, EmptyLanguageIsAnError) {
    auto ir = regex_grammar("[]a]");  // ECMAScript: [] matches nothing
    ASSERT_TRUE(ir.is_ok());
    EXPECT_FALSE(compile_grammar(ir.value()).is_ok());
}

TEST(Regex, RefusedConstructs) {
    for (const char* re : {"a(?=b)", "(a)\\1", "\\bfoo", "a*+", "\\p{L}", "a^b", "a$b", "(a", "a)", "[z-a]", "x{3,2}"}) {
        auto ir = regex_grammar(re);
        EXPECT_FALSE(ir.is_ok()) << re;
    }
}

TEST(Mask, GbnfJsonAgainstBruteForce) {
    auto ir = parse_gbnf(kJsonGbnf);
    ASSERT_TRUE(ir.is_ok()) << ir.message();
    auto v = test::synthetic_vocab({"{\"", "\":", "\": ", "true", "null", "\"}", "\"},", "],", "{}", "[]", "é", "\xc3",
                                    "\xa9\"", "\\u00", "12", "-0", ".5e", "\n  ", " \"", "\"\"", "\\\""},
                                   "{}[]\":, 0123456789.-eEtrufalsn\\\n ", 300, 7);
    const int n = test::compare_masks_on_walks(ir.value(), v, 12, 40, 11);
    EXPECT_GT(n, 100);
}

TEST(Mask, RegexAgainstBruteForce) {
    auto v = test::synthetic_vocab({"ab", "abc", "ba", "12", "-1", "x@", "é"}, "abc@.-x12", 200, 3);
    for (const char* re : {"(ab|a)*c", "[a-c]{2,5}@x\\.(ab|c)", "-?\\d+(\\.\\d{1,2})?", "(é|a)+b?"}) {
        auto ir = regex_grammar(re);
        ASSERT_TRUE(ir.is_ok()) << re;
        EXPECT_GT(test::compare_masks_on_walks(ir.value(), v, 10, 25, 5), 10) << re;
    }
}

// Closing: from random reachable states of the JSON grammar, following the closing mask ends the text in at most
// completion_distance() tokens, each step shortening the distance.
// A token that ends a called rule, then the rule that called it (which can pop there), then goes on in the
// caller's caller: "()," from x after "k" leaves y and x and takes the ",". The fast DFA loop inside y must pass
// the second pop on as an edge of x's frame.
TEST(Mask, TokenPoppingTwoFramesAgainstBruteForce) {
    auto v = test::synthetic_vocab({"()", "(),", "(),k", "),", "), ", " (", " ()", " (),", "[()]", "[()],", "k (),", "m"},
                                   "km ()[],", 200, 17);
    auto ir = parse_gbnf("root ::= x (\",\" x)*\nx ::= \"k\" \" \"? y | \"m\" x\ny ::= \"(\" \")\" | \"[\" y \"]\"");
    ASSERT_TRUE(ir.is_ok()) << ir.message();
    EXPECT_GT(test::compare_masks_on_walks(ir.value(), v, 40, 12, 3), 100);
}

TEST(Matcher, ClosingMaskEndsTheText) {
    auto ir = parse_gbnf(kJsonGbnf);
    ASSERT_TRUE(ir.is_ok());
    auto v = test::synthetic_vocab({"{\"", "\":", "\"}", "],", "true", "12", "\"a"}, "{}[]\":,0123456789tr", 100, 5);
    auto g = make(ir, v);
    std::mt19937_64 rng(3);
    std::vector<uint32_t> mask(size_t(v->mask_words()));
    for (int walk = 0; walk < 20; ++walk) {
        Matcher m(g);
        const int steps = int(rng() % 25);
        for (int s = 0; s < steps; ++s) {  // a random prefix
            ASSERT_TRUE(m.fill_mask(mask.data()));
            std::vector<int32_t> ok;
            for (int32_t t = 0; t < v->vocab_size(); ++t)
                if (test::bit(mask, t) && !v->is_eos(t)) ok.push_back(t);
            if (ok.empty()) break;
            ASSERT_TRUE(m.accept(ok[rng() % ok.size()]).is_ok());
        }
        int64_t d = m.completion_distance();
        const int64_t need = m.completion_tokens();
        ASSERT_LT(d, 1000);
        ASSERT_LE(need, d);
        for (int s = 0; !m.is_terminated(); ++s) {
            ASSERT_LE(s, need + 1) << "closing did not end the text";
            m.fill_closing_mask(mask.data());
            std::vector<int32_t> ok;
            for (int32_t t = 0; t < v->vocab_size(); ++t)
                if (test::bit(mask, t)) ok.push_back(t);
            ASSERT_FALSE(ok.empty());
            const int32_t t = ok[rng() % ok.size()];
            ASSERT_TRUE(m.allows(t) || v->is_eos(t));
            ASSERT_TRUE(m.accept(t).is_ok());
            if (!m.is_terminated()) {
                const int64_t d2 = m.completion_distance();
                EXPECT_LT(d2, d);
                d = d2;
            }
        }
    }
}

TEST(Matcher, RollbackAndEos) {
    auto v = test::synthetic_vocab({"ab", "c"}, "abc", 0, 1);
    auto g = make(regex_grammar("(ab)+c?"), v);
    Matcher m(g);
    const int32_t ab = 256, c = 257, eos = v->vocab_size() - 1, special = v->vocab_size() - 2;
    EXPECT_FALSE(m.is_complete());
    EXPECT_FALSE(m.accept(eos).is_ok());      // not complete yet
    EXPECT_FALSE(m.accept(special).is_ok());  // never
    EXPECT_FALSE(m.accept(c).is_ok());
    ASSERT_TRUE(m.accept(ab).is_ok());
    EXPECT_TRUE(m.is_complete());
    ASSERT_TRUE(m.accept(ab).is_ok());
    ASSERT_TRUE(m.accept(c).is_ok());
    EXPECT_TRUE(m.is_terminated());  // complete, nothing can follow
    std::vector<uint32_t> mask(size_t(m.mask_words()));
    ASSERT_TRUE(m.fill_mask(mask.data()));
    for (int32_t t = 0; t < v->vocab_size(); ++t) EXPECT_EQ(test::bit(mask, t), t == eos) << t;
    ASSERT_TRUE(m.rollback(2).is_ok());
    EXPECT_EQ(m.n_tokens(), 1);
    ASSERT_TRUE(m.fill_mask(mask.data()));
    EXPECT_TRUE(test::bit(mask, ab));
    EXPECT_TRUE(test::bit(mask, c));
    EXPECT_TRUE(test::bit(mask, eos));
    EXPECT_FALSE(m.rollback(5).is_ok());
    ASSERT_TRUE(m.accept(eos).is_ok());
    EXPECT_TRUE(m.is_terminated());
    ASSERT_TRUE(m.fill_mask(mask.data()));
    for (uint32_t w : mask) EXPECT_EQ(w, 0u);
    EXPECT_FALSE(m.accept(ab).is_ok());
}

// A rule that can match nothing, recursing under a repeat (found by fuzzing, tests/fuzz/corpus/regress-timeout-
// 07ed6732-*): every byte multiplies the stacks the matcher tracks, so masks cost more with each token. The work
// bound turns that into a clear error (mask zero) instead of an unbounded wait; no operation exceeds it.
TEST(Matcher, AmbiguousRecursionStopsAtTheWorkBound) {
    auto v = test::synthetic_vocab({}, "abxy", 3000, 7);
    auto ir = parse_gbnf(R"(root ::= ("ab" | "") | . [a-z] root{0,5})");
    ASSERT_TRUE(ir.is_ok()) << ir.message();
    CompileLimits lim;
    lim.max_match_work = 2'000'000, lim.max_stack_nodes = 20'000;  // a fortieth / a fiftieth of the defaults
    auto g = Grammar::create(ir.value(), v, lim);
    ASSERT_TRUE(g.is_ok()) << g.message();
    Matcher m(g.value());
    std::vector<uint32_t> mask(size_t(m.mask_words()));
    Status failed = Status::ok();
    for (int step = 0; step < 200 && failed; ++step) {
        std::fill(mask.begin(), mask.end(), 0xdeadbeefu);
        failed = m.fill_mask(mask.data());
        if (!failed) break;
        // The longest allowed token: the text (and the stack graph) grows fastest.
        int32_t pick = -1;
        for (int32_t t = 0; t < v->vocab_size(); ++t)
            if (test::bit(mask, t) && !v->is_eos(t) && (pick < 0 || v->bytes(t).size() > v->bytes(pick).size())) pick = t;
        ASSERT_GE(pick, 0);
        failed = m.accept(pick);
    }
    ASSERT_FALSE(failed.is_ok()) << "the ambiguous grammar never reached the bound";
    EXPECT_GE(m.n_tokens(), 1);  // the first masks are fine: the growth with the text is what stops it
    EXPECT_LE(g.value()->cache_stats().stack_nodes, 20'000);
    EXPECT_NE(failed.message().find("its limit of"), std::string::npos) << failed.message();
    EXPECT_NE(failed.message().find("ambiguous"), std::string::npos) << failed.message();
    if (failed.message().find("steps") != std::string::npos && !m.fill_mask(mask.data()).is_ok()) {
        for (uint32_t w : mask) ASSERT_EQ(w, 0u);  // a refused mask allows nothing
    }
    // The first state's mask is still right after the refusals (nothing partial was cached).
    ASSERT_TRUE(m.rollback(m.n_tokens()).is_ok());
    ASSERT_TRUE(m.fill_mask(mask.data()));
    EXPECT_TRUE(test::bit(mask, v->vocab_size() - 1));  // root can match nothing: EOS allowed
}

TEST(Matcher, TinyWorkBoundRefusesEverythingClearly) {
    auto v = test::synthetic_vocab({"ab"}, "ab", 0, 1);
    auto ir = regex_grammar("(ab)+");
    ASSERT_TRUE(ir.is_ok());
    for (int64_t work : {int64_t(0), int64_t(1)}) {
        CompileLimits lim;
        lim.max_match_work = work;
        auto g = Grammar::create(ir.value(), v, lim);
        ASSERT_TRUE(g.is_ok()) << g.message();
        Matcher m(g.value());
        std::vector<uint32_t> mask(size_t(m.mask_words()), 0xdeadbeefu);
        const Status st = m.fill_mask(mask.data());
        ASSERT_FALSE(st.is_ok()) << work;
        EXPECT_NE(st.message().find("limit of " + std::to_string(work) + " steps"), std::string::npos) << st.message();
        for (uint32_t w : mask) EXPECT_EQ(w, 0u);
        const Status acc = m.accept(256);
        ASSERT_FALSE(acc.is_ok());
        EXPECT_NE(acc.message().find("limit of"), std::string::npos) << acc.message();
    }
    CompileLimits nodes;
    nodes.max_stack_nodes = 1;
    auto g = Grammar::create(ir.value(), v, nodes);
    ASSERT_TRUE(g.is_ok());
    Matcher m(g.value());
    std::vector<uint32_t> mask(size_t(m.mask_words()));
    const Status st = m.fill_mask(mask.data());
    if (!st.is_ok()) EXPECT_NE(st.message().find("limit of 1 nodes"), std::string::npos) << st.message();
    else EXPECT_LE(g.value()->cache_stats().stack_nodes, 1);
}

}  // namespace
}  // namespace ember::grammar
