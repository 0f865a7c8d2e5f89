// JSONSchemaBench / MaskBench subset (tests/fixtures/maskbench/subset.jsonl, scripts/grammar/make_maskbench_subset.py):
// every schema either compiles, and then each valid instance is accepted token by token (each token allowed by
// the mask at its step, the grammar complete at the end) and each invalid one rejected — the dataset's labels
// are the oracle — or is refused with an error naming an unsupported feature. Token streams: one token per byte,
// and SmolLM2's tokenizer (a real 49k BPE vocabulary; skipped when scripts/fetch-smollm2.sh has not run).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "grammar/grammar_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/vocab.h"
#include "io/gguf.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace ember::grammar {
namespace {

std::string smollm2_path() {
    if (const char* e = std::getenv("EMBER_SMOLLM2")) return e;
    const char* home = std::getenv("HOME");
    const char* cache = std::getenv("EMBER_CACHE");
    const std::filesystem::path base = cache ? std::filesystem::path(cache) : std::filesystem::path(home ? home : "/root") / ".cache/ember";
    return (base / "models/SmolLM2-135M-Instruct.Q4_1.gguf").string();
}

struct Entry {
    std::string file;
    nlohmann::ordered_json schema;
    std::vector<std::pair<std::string, bool>> tests;
};

std::vector<Entry> load_subset() {
    std::ifstream f(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/maskbench/subset.jsonl");
    std::vector<Entry> out;
    for (std::string line; std::getline(f, line);) {
        auto j = nlohmann::ordered_json::parse(line);
        Entry e{j["file"], j["schema"], {}};
        for (const auto& t : j["tests"]) e.tests.push_back({t["text"], t["valid"]});
        out.push_back(std::move(e));
    }
    return out;
}

// Runs the token stream through a matcher; false at the first token the mask does not allow.
bool run(const std::shared_ptr<Grammar>& g, const std::vector<int32_t>& toks) {
    Matcher m(g);
    std::string dbg_text;
    std::vector<uint32_t> mask(size_t(m.mask_words()));
    for (int32_t t : toks) {
        if (Status st = m.fill_mask(mask.data()); !st) {
            ADD_FAILURE() << st.message();
            return false;
        }
        const bool allowed = test::bit(mask, t);
        EXPECT_EQ(allowed, m.allows(t)) << "mask and accept disagree on token " << t << " '" << g->vocab().bytes(t) << "' after " << dbg_text;
        dbg_text += g->vocab().bytes(t);
        if (!allowed) return false;
        EXPECT_TRUE(m.accept(t).is_ok());
    }
    return m.is_complete();
}

void check_subset(std::shared_ptr<const TokenIndex> vocab, const std::function<std::vector<int32_t>(const std::string&)>& tokenize,
                  const char* what) {
    const std::vector<Entry> subset = load_subset();
    ASSERT_GE(subset.size(), 50u);
    int compiled = 0, covered = 0, refused = 0;
    for (const Entry& e : subset) {
        auto ir = json_schema_grammar_json(e.schema);
        Expected<std::shared_ptr<Grammar>> g = ir ? Grammar::create(ir.value(), vocab) : Expected<std::shared_ptr<Grammar>>(ir.status());
        if (!g) {
            ++refused;
            const std::string& msg = g.message();
            EXPECT_TRUE(msg.find("not supported") != std::string::npos || msg.find("may overlap") != std::string::npos)
                << e.file << ": " << msg;
            continue;
        }
        ++compiled;
        bool ok = true;
        for (const auto& [text, valid] : e.tests) {
            const bool accepted = run(g.value(), tokenize(text));
            EXPECT_EQ(accepted, valid) << what << " " << e.file << ": " << (valid ? "valid instance rejected: " : "invalid instance accepted: ")
                                       << text.substr(0, 300);
            ok = ok && accepted == valid;
        }
        covered += ok;
    }
    std::printf("[maskbench subset, %s] %zu schemas: %d compiled, %d covered, %d refused\n", what, subset.size(), compiled, covered, refused);
    EXPECT_GE(compiled, int(subset.size()) * 3 / 4);
}

TEST(MaskBenchSubset, ByteTokens) {
    std::vector<std::string> v;
    for (int b = 0; b < 256; ++b) v.push_back(std::string(1, char(b)));
    v.push_back("");
    auto vocab = TokenIndex::build(v, {256});
    check_subset(vocab, [](const std::string& s) {
        std::vector<int32_t> t;
        for (unsigned char c : s) t.push_back(c);
        return t;
    }, "bytes");
}

TEST(MaskBenchSubset, SmolLM2Tokens) {
    if (!std::filesystem::exists(smollm2_path())) GTEST_SKIP() << smollm2_path() << " not found (bash scripts/fetch-smollm2.sh)";
    auto f = GgufFile::open(smollm2_path());
    ASSERT_TRUE(f.is_ok()) << f.message();
    auto tok = tokenizer_from_gguf(*f.value());
    ASSERT_TRUE(tok.is_ok()) << tok.message();
    const Tokenizer& t = tok.value();
    auto vocab = token_index_from_tokenizer(t, t.vocab_size());
    check_subset(vocab, [&](const std::string& s) { return t.encode(s, false, false); }, "SmolLM2");
}

}  // namespace
}  // namespace ember::grammar
