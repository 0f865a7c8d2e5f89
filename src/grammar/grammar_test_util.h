// Test helpers for src/grammar: synthetic vocabularies and the mask-vs-brute-force walk.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "grammar/grammar_ref.h"
#include "grammar/matcher.h"

namespace ember::grammar::test {

// Every byte as a token (ids 0..255), then `pieces`, then random 2..6-byte strings over `alphabet`, then an
// empty special token and EOS (the last id). Duplicated strings are kept (two ids, same bytes).
inline std::shared_ptr<const TokenIndex> synthetic_vocab(const std::vector<std::string>& pieces,
                                                         const std::string& alphabet, int n_random, uint64_t seed) {
    std::vector<std::string> v;
    for (int b = 0; b < 256; ++b) v.push_back(std::string(1, char(b)));
    for (const auto& p : pieces) v.push_back(p);
    std::mt19937_64 rng(seed);
    for (int i = 0; i < n_random; ++i) {
        std::string s;
        const int len = 2 + int(rng() % 5);
        for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
        v.push_back(s);
    }
    v.push_back("");  // a special token: never allowed
    v.push_back("");  // EOS
    const int32_t eos = int32_t(v.size()) - 1;
    return TokenIndex::build(std::move(v), {eos});
}

inline bool bit(const std::vector<uint32_t>& m, int32_t t) { return (m[size_t(t) >> 5] >> (t & 31)) & 1; }

// Random walks through the grammar: at each step the matcher's mask must equal the brute-force set (each
// token's bytes tried with the Earley reference; EOS iff the text is complete); then a random allowed token is
// accepted. Returns the number of masks compared.
inline int compare_masks_on_walks(const GrammarIR& ir, std::shared_ptr<const TokenIndex> vocab, int walks,
                                  int max_steps, uint64_t seed) {
    auto g = Grammar::create(ir, vocab);
    EXPECT_TRUE(g.is_ok()) << g.message();
    if (!g) return 0;
    EarleyRef ref(ir);
    std::mt19937_64 rng(seed);
    int compared = 0;
    const int32_t V = vocab->vocab_size();
    for (int w = 0; w < walks; ++w) {
        Matcher m(g.value());
        EarleyRef::State st = ref.start();
        std::string text;
        for (int step = 0; step < max_steps; ++step) {
            std::vector<uint32_t> mask(size_t(m.mask_words()), 0xdeadbeefu);
            if (Status fs = m.fill_mask(mask.data()); !fs) {
                ADD_FAILURE() << fs.message();
                return compared;
            }
            std::vector<int32_t> allowed;
            int bad = 0;
            for (int32_t t = 0; t < V; ++t) {
                const bool want = vocab->is_eos(t) ? ref.complete(st)
                                                   : !vocab->bytes(t).empty() && ref.viable(st, vocab->bytes(t));
                if (bit(mask, t) != want && bad++ < 5)
                    ADD_FAILURE() << "walk " << w << " step " << step << " after \"" << text << "\": token " << t
                                  << " \"" << vocab->bytes(t) << "\" mask " << bit(mask, t) << " reference " << want;
                if (want) allowed.push_back(t);
            }
            for (int64_t i = (V + 31) / 32 * 32; i < m.mask_words() * 32; ++i) EXPECT_FALSE(bit(mask, int32_t(i)));
            EXPECT_EQ(m.is_complete(), ref.complete(st));
            ++compared;
            if (bad || allowed.empty()) return compared;
            const int32_t t = allowed[rng() % allowed.size()];
            EXPECT_TRUE(m.accept(t).is_ok());
            if (vocab->is_eos(t)) {
                EXPECT_TRUE(m.is_terminated());
                break;
            }
            for (unsigned char c : vocab->bytes(t)) EXPECT_TRUE(ref.feed(st, c));
            text += vocab->bytes(t);
        }
    }
    return compared;
}

}  // namespace ember::grammar::test
