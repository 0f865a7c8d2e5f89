// examples/batch_generate (the library API's example program) against Session::generate, the path of
// `ember generate`: on a GGUF fixture (hybrid Qwen3.5) and on SmolLM2 when present, the greedy tokens it prints
// for prompts run together — more prompts than slots, so later ones join as earlier ones finish — equal each
// prompt run alone.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "api/open_model.h"
#include "../model/smollm2_fixture.h"
#include "runtime/session.h"

namespace ember {
namespace {

std::vector<int32_t> ids(const std::string& csv) {
    std::vector<int32_t> v;
    std::stringstream ss(csv);
    for (std::string t; std::getline(ss, t, ',');) v.push_back(int32_t(std::stol(t)));
    return v;
}

// Runs the example with --ids; its lines "i<TAB>prompt ids<TAB>generated ids" as (prompt, generated) pairs.
std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> run_example(const std::string& model, int n,
                                                                                const std::vector<std::string>& prompts) {
    std::string cmd = std::string(EMBER_BATCH_GENERATE) + " " + model + " --device cpu --max-seqs 2 --ids -n " +
                      std::to_string(n);
    for (const auto& p : prompts) cmd += " '" + p + "'";
    FILE* f = popen(cmd.c_str(), "r");
    std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> out;
    char buf[1 << 16];
    while (f && std::fgets(buf, sizeof buf, f)) {
        std::string line(buf);
        const size_t a = line.find('\t'), b = line.find('\t', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        out.emplace_back(ids(line.substr(a + 1, b - a - 1)), ids(line.substr(b + 1)));
    }
    EXPECT_EQ(f ? pclose(f) : -1, 0) << cmd;
    return out;
}

void check(const std::string& model, int n) {
    const std::vector<std::string> prompts = {"Hello, my name is", "The capital of France is",
                                              "Write a haiku about the sea.", "1, 2, 3, 4,"};
    const auto got = run_example(model, n, prompts);
    ASSERT_EQ(got.size(), prompts.size());
    auto lm = open_model(model, "", "cpu");
    ASSERT_TRUE(lm.is_ok()) << lm.message();
    auto tok = open_tokenizer(model);
    ASSERT_TRUE(tok.is_ok() && tok.value()) << tok.message();
    for (size_t i = 0; i < prompts.size(); ++i) {
        Session s(**lm);
        std::vector<int32_t> ref;
        auto st = s.generate(got[i].first, n, SamplingParams{}, (*tok)->eos_ids(), [&](int32_t id) {
            ref.push_back(id);
            return true;
        });
        ASSERT_TRUE(st.is_ok()) << st.message();
        EXPECT_EQ(got[i].second, ref) << prompts[i];
        EXPECT_FALSE(got[i].second.empty()) << prompts[i];
    }
}

TEST(ExampleBatchGenerate, FixtureEqualsSessionRuns) {
    check(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/gguf_models/qwen35_flat_gqa3_dkdv/model-q8_0.gguf", 16);
}

TEST(ExampleBatchGenerate, SmolLM2EqualsSessionRuns) {
    SKIP_WITHOUT_SMOLLM2();
    check(smollm2::model_path(), 16);
}

}  // namespace
}  // namespace ember
