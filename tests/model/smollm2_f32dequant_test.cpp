// SmolLM2-135M-Instruct Q4_1 against llama.cpp computing the same function: the goldens greedy_f32dequant.json and
// logits_f32dequant.{bin,json} were made by llama.cpp (llama-cpp-python, CPU) on gguf-py's F32 dequantization of
// the very same file (scripts/make_smollm2_goldens.py). llama.cpp then multiplies exactly the Q4_1 weight values
// with fp32 activations, as ember's default GGUF path does, instead of rounding the activations to 8 bits (which
// alone moves its logits on the Q4_1 file itself by a mean KL ≈ 3.5e-3: gguf_oracle_test.cpp). So the bars are the
// ones issue 4 asks for, as written: KL ≤ 1e-3 at every teacher-forced position, greedy tokens identical; and the
// perplexity of ppl.txt within 0.1 % (against 1 % for llama.cpp on the Q4_1 file).
// The logits are stored as float16 of (logit − row maximum): ≤ 2⁻¹¹ relative where the probability is.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "runtime/session.h"
#include "smollm2_fixture.h"

namespace ember {
namespace {

using nlohmann::json;

TEST(SmolLM2VsLlamaCppF32Dequant, TeacherForcedKLBelow1e3AtEveryPosition) {
    SKIP_WITHOUT_SMOLLM2();
    const json meta = smollm2::golden("logits_f32dequant.json");
    const auto ids = meta["prompt_ids"].get<std::vector<int32_t>>();
    const int64_t n = meta["shape"][0], V = meta["shape"][1];
    ASSERT_EQ(n, int64_t(ids.size()));
    ASSERT_EQ(V, smollm2::model().info().vocab_size);
    const std::vector<uint16_t> half = smollm2::read_f16("logits_f32dequant.bin", size_t(n * V));
    ASSERT_FALSE(half.empty());
    Session s(smollm2::model());
    auto got = s.prefill(ids, /*all_logits=*/true);
    ASSERT_TRUE(got.is_ok()) << got.message();
    double worst = 0, sum = 0;
    int64_t top1 = 0;
    for (int64_t t = 0; t < n; ++t) {
        std::vector<double> p(static_cast<size_t>(V)), q(static_cast<size_t>(V));
        for (int64_t v = 0; v < V; ++v) p[v] = f16_to_f32(half[size_t(t * V + v)]), q[v] = got->data()[t * V + v];
        const double kl = smollm2::kl_div(p, q);
        EXPECT_LE(kl, 1e-3) << "position " << t;
        worst = std::max(worst, kl), sum += kl;
        const int64_t want = meta["top5_ids"][t][0];
        top1 += std::max_element(q.begin(), q.end()) - q.begin() == want;
    }
    EXPECT_EQ(top1, n);
    std::printf("  [smollm2 teacher-forced vs llama.cpp on the F32 dequantization] %lld positions: mean KL %.2e, "
                "max %.2e, top-1 %lld/%lld\n", (long long)n, sum / double(n), worst, (long long)top1, (long long)n);
}

TEST(SmolLM2VsLlamaCppF32Dequant, GreedyTokensIdentical) {
    SKIP_WITHOUT_SMOLLM2();
    const json g = smollm2::golden("greedy_f32dequant.json");
    int cases = 0;
    for (const json& c : g["cases"]) {
        const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
        const auto want = c["generated_ids"].get<std::vector<int32_t>>();
        Session s(smollm2::model());
        std::vector<int32_t> got;
        auto st = s.generate(prompt, int64_t(want.size()), SamplingParams{}, {}, [&](int32_t id) {
            got.push_back(id);
            return true;
        });
        ASSERT_TRUE(st.is_ok()) << st.message();
        size_t same = 0;
        while (same < want.size() && same < got.size() && got[same] == want[same]) ++same;
        EXPECT_EQ(got, want) << c["kind"] << " '" << c["prompt"].get<std::string>() << "': first difference at step "
                             << same << " (llama.cpp's smallest top-2 margin on this case: " << c["min_margin"] << ")";
        std::printf("  [smollm2 greedy vs llama.cpp on the F32 dequantization, %s] equal for %zu of %zu tokens\n",
                    c["kind"].get<std::string>().c_str(), same, want.size());
        ++cases;
    }
    EXPECT_GE(cases, 5);
}

TEST(SmolLM2VsLlamaCppF32Dequant, PerplexityWithinAThousandth) {
    SKIP_WITHOUT_SMOLLM2();
    if (!std::getenv("EMBER_BIN")) GTEST_SKIP() << "EMBER_BIN not set";
    const double want = smollm2::golden("ppl_f32dequant.json")["ppl"];
    std::string log;
    const double got = smollm2::ember_perplexity(/*q8=*/false, log);
    ASSERT_GT(got, 0) << log;
    std::printf("  [smollm2 perplexity vs llama.cpp on the F32 dequantization] ember %.5f, llama.cpp %.5f (%.4f %%)\n",
                got, want, 100 * (got / want - 1));
    EXPECT_NEAR(got, want, 1e-3 * want);
}

}  // namespace
}  // namespace ember
