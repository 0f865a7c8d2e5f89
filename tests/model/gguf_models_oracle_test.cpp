// Llama-family and Qwen3.5 GGUF files against exact oracles (tests/fixtures/gguf_models/, scripts/make_gguf_model_fixtures.py):
// tiny random-init Llama (GQA untied, MQA tied, RoPE linear scaling), Qwen3 (q/k norm), Qwen2 (q/k/v biases, YaRN) and a K-quant Llama converted by llama.cpp's
// convert_hf_to_gguf.py (q/k rows permuted for `llama`) and quantized by llama.cpp. The oracle is transformers
// in fp32 — on the HF weights for the F32 files (ref_logits.bin), on gguf-py's dequantization of the quantized
// files (dequant_logits_<type>.bin). ember computes with fp32 activations, so the bar is fp32-level: max rel. L2
// per position ≤ 1e-4 and the same top-1 wherever the oracle's top-2 margin exceeds 1e-3.
// (llama.cpp's own logits, llama_logits_*.bin, differ from the exact ones by ~1e-2 because it rounds activations
// to 8 bits for quantized weights; they are not used as a bar here.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "models/model.h"
#include "runtime/session.h"
#include "oracle_util.h"

namespace ember {
namespace {

namespace fs = std::filesystem;

struct Case {
    const char* dir;
    const char* gguf;
    const char* oracle;  // relative to the case directory
    const char* prompt = "prompt.json";
};

const Case kCases[] = {
    {"llama_gqa_untied", "model-f32.gguf", "ref_logits.bin"},
    {"llama_gqa_untied", "model-q8_0.gguf", "dequant_logits_q8_0.bin"},
    {"llama_mqa_tied", "model-f32.gguf", "ref_logits.bin"},
    {"llama_mqa_tied", "model-q8_0.gguf", "dequant_logits_q8_0.bin"},
    {"qwen3_qknorm", "model-f32.gguf", "ref_logits.bin"},
    {"qwen3_qknorm", "model-q8_0.gguf", "dequant_logits_q8_0.bin"},
    {"qwen2_bias", "model-f32.gguf", "ref_logits.bin"},  // q/k/v biases
    {"qwen2_bias", "model-q8_0.gguf", "dequant_logits_q8_0.bin"},
    {"llama_rope_linear", "model-f32.gguf", "ref_logits.bin"},  // rope.scaling linear x4
    {"qwen2_yarn", "model-f32.gguf", "ref_logits.bin"},         // rope.scaling yarn x4, original context 16
    {"llama_kquant", "model-q4_0.gguf", "dequant_logits_q4_0.bin"},
    {"llama_kquant", "model-q4_k_m.gguf", "dequant_logits_q4_k_m.bin"},
    // Qwen3.5 converted by llama.cpp (value heads tiled, ssm_a = −exp(A_log), norms +1): transformers on the bf16
    // weights, and llama.cpp's F32 path on gguf-py's dequantization for Q8_0 (validated against transformers to
    // ~6e-7 on the Llama cases).
    {"qwen35_flat_gqa3_dkdv", "model-bf16.gguf", "ref_logits.bin"},
    {"qwen35_flat_gqa3_dkdv", "model-q8_0.gguf", "llama_f32dequant_logits_q8_0.bin"},
    {"qwen35_flat_untied_gqa3_bf16", "model-bf16.gguf", "../../qwen35/flat_untied_gqa3/ref_logits.bin",
     "../../qwen35/flat_untied_gqa3/prompt.json"},
    {"qwen35_mm_tied_bf16", "model-bf16.gguf", "../../qwen35/mm_tied/ref_logits.bin", "../../qwen35/mm_tied/prompt.json"},
    {"qwen35_mm_tied_q8_0", "model-q8_0.gguf", "llama_f32dequant_logits_q8_0.bin", "../../qwen35/mm_tied/prompt.json"},
};

class GgufModelsOracle : public ::testing::TestWithParam<Case> {};

TEST_P(GgufModelsOracle, PrefillAndDecodeMatchTransformers) {
    const Case& c = GetParam();
    const fs::path d = fs::path(EMBER_SOURCE_DIR) / "tests/fixtures/gguf_models" / c.dir;
    auto m = load_model((d / c.gguf).string());
    ASSERT_TRUE(m.is_ok()) << m.message();
    const auto prompt = nlohmann::json::parse(ember_test::read_text(d / c.prompt))["tokens"].get<std::vector<int32_t>>();
    const std::vector<float> want = ember_test::read_f32(d / c.oracle);
    const int64_t n = int64_t(prompt.size()), V = (*m)->info().vocab_size;
    ASSERT_EQ(int64_t(want.size()), n * V);
    for (int64_t decode_from : {n, int64_t(1), n / 2}) {  // one prefill; prefill 1 + decode; half and half
        Session s(**m);
        auto got = s.prefill(std::vector<int32_t>(prompt.begin(), prompt.begin() + decode_from), true);
        ASSERT_TRUE(got.is_ok()) << got.message();
        std::vector<float> all = std::move(got.value());
        for (int64_t t = decode_from; t < n; ++t) {
            auto r = s.decode(prompt[t]);
            ASSERT_TRUE(r.is_ok()) << r.message();
            all.insert(all.end(), r->begin(), r->end());
        }
        double worst = 0;
        for (int64_t t = 0; t < n; ++t) {
            const float *g = &all[t * V], *w = &want[t * V];
            double num = 0, den = 0;
            for (int64_t v = 0; v < V; ++v) {
                num += double(g[v] - w[v]) * (g[v] - w[v]);
                den += double(w[v]) * w[v];
            }
            const double rel = std::sqrt(num / den);
            worst = std::max(worst, rel);
            EXPECT_LE(rel, 1e-4) << c.dir << "/" << c.gguf << " position " << t << " (decode from " << decode_from << ")";
            size_t a = ember_test::argmax_row(w, size_t(V)), b = ember_test::argmax_row(g, size_t(V));
            float second = -INFINITY;
            for (int64_t v = 0; v < V; ++v)
                if (size_t(v) != a) second = std::max(second, w[v]);
            if (w[a] - second > 1e-3f) {
                EXPECT_EQ(a, b) << c.dir << "/" << c.gguf << " top-1 at position " << t;
            }
        }
        if (decode_from == n)
            std::printf("  [%s/%s vs %s] max rel L2 %.2e over %lld positions\n", c.dir, c.gguf, c.oracle, worst,
                        (long long)n);
    }
}

INSTANTIATE_TEST_SUITE_P(All, GgufModelsOracle, ::testing::ValuesIn(kCases), [](const auto& info) {
    std::string s = std::string(info.param.dir) + "_" + info.param.gguf;
    for (char& ch : s)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return s;
});

}  // namespace
}  // namespace ember
