// GPU tests of the batched engine (backend/cuda/cuda_batch.cpp) with the checks of models/batch_test_util.h:
// every row of a batched step equals the same sequence decoded alone by the same CUDA model (greedy tokens
// equal, logits within the fp32 paths' tolerance), for 1..8 rows (GEMVs) and 20 and 64 rows (tensor-core GEMMs),
// with sequences joining at different steps in a shuffled row order; the CPU model as a second oracle; bad steps
// refused without touching the pool; slot reuse; a full context. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "models/batch_test_util.h"
#include "models/model.h"

namespace ember::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

const char* kModels[] = {"qwen35/flat_untied_gqa3", "qwen35/mm_tied", "gguf_models/llama_gqa_untied/model-q8_0.gguf"};

// A fixture (path under tests/fixtures/) or "synthetic:<spec>" (make_synthetic_model, seed 7).
std::unique_ptr<CausalLM> load_cpu(const std::string& rel) {
    const std::string syn = "synthetic:";
    auto m = rel.rfind(syn, 0) == 0 ? make_synthetic_model(rel.substr(syn.size()), 7)
                                    : load_model(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/" + rel);
    EMBER_CHECK(m.is_ok(), "%s", m.message().c_str());
    return std::move(m.value());
}

std::unique_ptr<CausalLM> load_gpu(const std::string& rel, int64_t context = 1024, bool kv_bf16 = false,
                                   int64_t kv_pages = 0) {
    CudaOptions opt;
    opt.context = context;
    opt.kv_bf16 = kv_bf16;
    opt.kv_pages = kv_pages;
    auto m = make_cuda_model(load_cpu(rel), opt);
    EMBER_CHECK(m.is_ok(), "%s", m.message().c_str());
    return std::move(m.value());
}

// The fp32 paths: GEMV (≤ 8 rows) and the fp32-faithful GEMMs (> 8 rows) differ from the 1-row decode only in the
// order of fp32 sums: ≤ 1.3e-4 of the logits' scale measured on flat_untied_gqa3 and the Llama file, 4.8e-4 on
// mm_tied (whose GPU paths sit 1.3-4.4e-4 from the CPU model: SessionSaveCuda). 1e-3 still catches any row mix-up
// (errors of order 1).
constexpr double kTol = 1e-3;

TEST(BatchCuda, RowsEqualSequencesDecodedAlone) {
    SKIP_WITHOUT_GPU();
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        auto m = load_gpu(f);
        for (int64_t K : {1, 5, 8, 20}) {
            const double worst = batchtest::check_batch_equals_alone(*m, K, K + 1 + (K % 5 == 4), 10, kTol, 70 + K);
            std::printf("%s: %lld sequences, worst rel. logit error vs alone %.2e\n", f, (long long)K, worst);
        }
    }
}

// Mixed steps (cuda_mixed.cpp: prompt chunks beside decode rows in one pass): every sequence's logits after its
// prompt and after each decode token within kTol of the sequence run alone, greedy tokens equal; the same schedule
// through the generic form (a prefill call per chunk, one batched decode) agrees within kTol; ids and wanted rows;
// bad mixed steps refused. Also over a paged bf16 KV pool.
TEST(BatchCuda, MixedStepsEqualSequencesRunAlone) {
    SKIP_WITHOUT_GPU();
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        auto m = load_gpu(f);
        m->set_mixed_steps(true);  // the engine's switch (batch_step below is one pass either way)
        ASSERT_TRUE(m->batch_mixed());
        std::vector<float> one_pass, generic;
        const double w1 = batchtest::check_mixed_equals_alone(*m, 9, 11, 6, kTol, 80, false, &one_pass);
        const double w2 = batchtest::check_mixed_equals_alone(*m, 9, 11, 6, kTol, 80, true, &generic);
        ASSERT_EQ(one_pass.size(), generic.size());
        double worst = 0, scale = 1;
        for (size_t i = 0; i < one_pass.size(); ++i) {
            worst = std::max(worst, double(std::fabs(one_pass[i] - generic[i])));
            scale = std::max(scale, double(std::fabs(generic[i])));
        }
        EXPECT_LE(worst / scale, kTol);
        std::printf("[ mixed    ] %s: worst rel. error vs alone %.3g (generic form %.3g), one pass vs generic %.3g\n",
                    f, w1, w2, worst / scale);
        batchtest::check_mixed_ids_want(*m);
        batchtest::check_mixed_errors(*m);
        auto paged = load_gpu(f, 1024, /*kv_bf16=*/true, /*kv_pages=*/64);
        EXPECT_LE(batchtest::check_mixed_equals_alone(*paged, 6, 7, 5, kTol, 90), kTol);
    }
}

TEST(BatchCuda, SixtyFourSequencesEqualAlone) {
    SKIP_WITHOUT_GPU();
    for (const char* f : {kModels[0], kModels[2]}) {
        SCOPED_TRACE(f);
        auto m = load_gpu(f);
        const double worst = batchtest::check_batch_equals_alone(*m, 64, 64, 16, kTol, 300);
        std::printf("%s: 64 sequences, worst rel. logit error vs alone %.2e\n", f, worst);
    }
}

// Heads stored TILED (≥ 64 MiB: the stream kernel reads them once per row, Q6_K once per 4 rows), as the synthetic
// 9B's untied 4-bit head and the Q6_K output of a Q4_0 file: the batched engine multiplies an untiled copy from 2
// rows on (affine: the q kernel reads it once for up to 8 rows); the Q6_K head stays tiled up to 64 rows (4 rows per
// pass); a sequence decoded alone runs the tiled one with one row. Rows still equal their sequences decoded alone.
TEST(BatchCuda, TiledHeadRowsEqualSequencesDecodedAlone) {
    SKIP_WITHOUT_GPU();
    for (const auto& [spec, Ks] : {std::pair<const char*, std::vector<int64_t>>{"synthetic:qwen3.5-9b", {2, 8}},
                                   {"synthetic:qwen3.5-0.8b:q4_0", {2, 8, 20}}}) {  // (9B, 20 rows: below)
        SCOPED_TRACE(spec);
        auto m = load_gpu(spec, 256);
        for (int64_t K : Ks) {
            const double worst = batchtest::check_batch_equals_alone(*m, K, K + 1, 4, kTol, 190 + K);
            std::printf("%s: %lld sequences, worst rel. logit error vs alone %.2e\n", spec, (long long)K,
                        worst);
        }
    }
}

// KNOWN FAILURE (found 2026-12-06 by the test above, open): the synthetic 9B with 20 sequences — steps of 13 and 14
// rows, greedy (device argmax) — selects tokens other than the sequences decoded alone (19 of ~27 greedy rows on an
// H100), while its logits steps (6, 7 and 20 rows) match within 6e-5 and 2-8 rows pass; the 0.8B Q4_0 mix and the
// fixtures pass at the same row counts. Not caused by the untiled head at 2-8 rows (rows > 8 took that path before).
// (The pattern of joins makes steps of 7, 14, 20, 13 and 6 rows, the odd ones greedy: 13 and 14 are the only
// greedy steps, so "wrong at 13-14 rows" may be "wrong at every greedy step above 8 rows" of this model.) The first
// run compares logits at every step, to tell a wrong forward at 13-14 rows from a wrong selection; diagnosis:
// EMBER_GEMM_PLAN=0:1 (one GEMM tile, no K split), EMBER_HEAD_UNTILED_ROWS=1000 (the tiled head at every row count),
// and GemmQCuda.RuleChoiceOnModelShapesMatchesReference (the GEMM plans of these shapes against fp64).
TEST(BatchCuda, Synthetic9BTwentySequencesEqualAlone) {
    SKIP_WITHOUT_GPU();
    auto m = load_gpu("synthetic:qwen3.5-9b", 256);
    const double w = batchtest::check_batch_equals_alone(*m, 20, 21, 4, kTol, 290, true);
    std::printf("synthetic 9B: 20 sequences, logits only: worst rel. logit error vs alone %.2e\n", w);
    const double g = batchtest::check_batch_equals_alone(*m, 20, 21, 4, kTol, 210);
    std::printf("synthetic 9B: 20 sequences, logits and greedy steps: worst rel. logit error vs alone %.2e\n", g);
}

// A bf16 KV cache pool: a row still equals its sequence decoded alone (the same rounded cache both ways).
TEST(BatchCuda, Bf16KvRowsEqualSequencesDecodedAlone) {
    SKIP_WITHOUT_GPU();
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        auto m = load_gpu(f, 1024, true);
        for (int64_t K : {1, 8, 20}) {
            const double worst = batchtest::check_batch_equals_alone(*m, K, K + 1, 10, kTol, 170 + K);
            std::printf("%s (bf16 KV): %lld sequences, worst rel. logit error vs alone %.2e\n", f, (long long)K, worst);
        }
    }
}

// What the bf16 KV cache costs against the fp32 one (issue 14's report): the fp32 model's greedy sequence (a
// 40-token prompt through the prefill, then 24 decode steps) fed to the bf16 model, logits compared per step.
// Rounding K and V to bf16 (2⁻⁹ relative) moves the fixtures' logits by ~1e-3 of their scale; 2e-2 catches a
// broken cache (errors of order 1).
TEST(BatchCuda, Bf16KvAgainstFp32Kv) {
    SKIP_WITHOUT_GPU();
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        auto m32 = load_gpu(f), m16 = load_gpu(f, 1024, true);
        const int64_t V = m32->info().vocab_size;
        const batchtest::Alone ref = batchtest::decode_alone(*m32, batchtest::make_prompt(V, 40, 4242), 24);
        auto st = m16->new_state();
        std::vector<float> lg(static_cast<size_t>(V));
        ASSERT_TRUE(m16->forward(*st, ref.prompt.data(), int64_t(ref.prompt.size()), lg.data(), false).is_ok());
        double worst = 0, kl_max = 0;
        int top1 = 0;
        for (size_t i = 0; i < ref.tokens.size(); ++i) {
            if (i > 0) {
                ASSERT_TRUE(m16->forward(*st, &ref.tokens[i - 1], 1, lg.data(), false).is_ok());
            }
            worst = std::max(worst, batchtest::rel_err(lg.data(), ref.logits[i]));
            top1 += ember::argmax(lg.data(), V) == ref.tokens[i];
            double m1 = -INFINITY, m2 = -INFINITY, z1 = 0, z2 = 0, kl = 0;
            for (int64_t v = 0; v < V; ++v) m1 = std::max(m1, double(ref.logits[i][size_t(v)])), m2 = std::max(m2, double(lg[size_t(v)]));
            for (int64_t v = 0; v < V; ++v) z1 += std::exp(ref.logits[i][size_t(v)] - m1), z2 += std::exp(lg[size_t(v)] - m2);
            for (int64_t v = 0; v < V; ++v) {
                const double lp = ref.logits[i][size_t(v)] - m1 - std::log(z1), lq = lg[size_t(v)] - m2 - std::log(z2);
                kl += std::exp(lp) * (lp - lq);
            }
            kl_max = std::max(kl_max, kl);
        }
        std::printf("%s: bf16 KV vs fp32 KV over %zu steps: worst rel. logit error %.2e, max KL %.1e, top-1 %d/%zu\n",
                    f, ref.tokens.size(), worst, kl_max, top1, ref.tokens.size());
        EXPECT_LE(worst, 2e-2);
    }
}

// The CPU model as the oracle of the GPU batch (the GPU vs CPU distance of these fixtures is ≤ ~3e-4).
TEST(BatchCuda, RowsMatchTheCpuModel) {
    SKIP_WITHOUT_GPU();
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        auto gpu = load_gpu(f);
        auto cpu = load_cpu(f);
        const int64_t V = cpu->info().vocab_size;
        auto b = gpu->new_batch(12);
        ASSERT_TRUE(b.is_ok()) << b.message();
        std::vector<batchtest::Alone> ref;
        std::vector<int32_t> slots, toks;
        for (int k = 0; k < 12; ++k) {
            ref.push_back(batchtest::decode_alone(*cpu, batchtest::make_prompt(V, 3 + k, 900 + k), 6));
            ASSERT_TRUE(gpu->batch_prefill(**b, 11 - k, ref.back().prompt.data(), int64_t(ref.back().prompt.size()),
                                           nullptr).is_ok());
            slots.push_back(11 - k);
        }
        double worst = 0;
        std::vector<float> out(size_t(12 * V));
        for (int i = 1; i < 6; ++i) {
            toks.clear();
            for (int k = 0; k < 12; ++k) toks.push_back(ref[size_t(k)].tokens[size_t(i - 1)]);
            ASSERT_TRUE(gpu->batch_decode(**b, slots.data(), toks.data(), 12, out.data()).is_ok());
            for (int k = 0; k < 12; ++k) worst = std::max(worst, batchtest::rel_err(&out[size_t(k) * V], ref[size_t(k)].logits[size_t(i)]));
        }
        std::printf("%s: 12 rows, worst rel. logit error vs the CPU model %.2e\n", f, worst);
        EXPECT_LE(worst, 2e-3);
    }
}

TEST(BatchCuda, BadStepsAreRefusedAndSlotsReused) {
    SKIP_WITHOUT_GPU();
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        auto m = load_gpu(f);
        batchtest::check_errors_and_reuse(*m, kTol);
    }
}

// The shared KV page pool (kKvPage = 64 tokens a page) of 6 pages: a 200-token sequence holds 4, a 127-token one
// 2; the second's step into a third page is refused with a clear error (its position unchanged), so is a new
// prompt; after the first sequence is reset its pages serve the second, whose logits equal it decoded alone with
// no page limit (the pages are interleaved in the pool, not in order).
TEST(BatchCuda, KvPoolExhaustionIsAnErrorAndPagesAreReused) {
    SKIP_WITHOUT_GPU();
    for (const char* f : {kModels[0], kModels[2]}) {
        SCOPED_TRACE(f);
        auto m = load_gpu(f, 256, false, 6);
        auto ref_m = load_gpu(f, 256);
        const int64_t V = m->info().vocab_size;
        const batchtest::Alone ref = batchtest::decode_alone(*ref_m, batchtest::make_prompt(V, 127, 2), 4);
        auto b = m->new_batch(3);
        ASSERT_TRUE(b.is_ok()) << b.message();
        const std::vector<int32_t> pa = batchtest::make_prompt(V, 200, 1);
        std::vector<float> lg(static_cast<size_t>(V));
        ASSERT_TRUE(m->batch_prefill(**b, 0, pa.data(), 100, nullptr).is_ok());  // pages 0, 1
        ASSERT_TRUE(m->batch_prefill(**b, 1, ref.prompt.data(), 127, lg.data()).is_ok());  // pages 2, 3
        EXPECT_LE(batchtest::rel_err(lg.data(), ref.logits[0]), kTol);
        ASSERT_TRUE(m->batch_prefill(**b, 0, pa.data() + 100, 100, nullptr).is_ok());  // pages 4, 5
        const int32_t slot1 = 1;
        ASSERT_TRUE(m->batch_decode(**b, &slot1, &ref.tokens[0], 1, lg.data()).is_ok());  // position 127: page 3
        EXPECT_LE(batchtest::rel_err(lg.data(), ref.logits[1]), kTol);
        Status st = m->batch_decode(**b, &slot1, &ref.tokens[1], 1, lg.data());  // position 128: a third page
        ASSERT_FALSE(st.is_ok());
        EXPECT_NE(st.message().find("KV cache pool is full"), std::string::npos) << st.message();
        EXPECT_EQ((*b)->pos[1], 128);
        st = m->batch_prefill(**b, 2, pa.data(), 10, nullptr);
        ASSERT_FALSE(st.is_ok());
        EXPECT_NE(st.message().find("KV cache pool is full"), std::string::npos) << st.message();
        ASSERT_TRUE(m->batch_reset(**b, 0).is_ok());
        ASSERT_TRUE(m->batch_decode(**b, &slot1, &ref.tokens[1], 1, lg.data()).is_ok());
        EXPECT_LE(batchtest::rel_err(lg.data(), ref.logits[2]), kTol);
        ASSERT_TRUE(m->batch_decode(**b, &slot1, &ref.tokens[2], 1, lg.data()).is_ok());
        EXPECT_LE(batchtest::rel_err(lg.data(), ref.logits[3]), kTol);
        ASSERT_TRUE(m->batch_prefill(**b, 2, pa.data(), 10, nullptr).is_ok());  // the freed pages serve new prompts
    }
}

TEST(BatchCuda, ContextFullIsAnError) {
    SKIP_WITHOUT_GPU();
    auto m = load_gpu(kModels[0], 64);
    const int64_t V = m->info().vocab_size;
    auto b = m->new_batch(2);
    ASSERT_TRUE(b.is_ok());
    const std::vector<int32_t> p = batchtest::make_prompt(V, 63, 5);
    ASSERT_TRUE(m->batch_prefill(**b, 1, p.data(), 63, nullptr).is_ok());
    const int32_t slots[2] = {0, 1}, toks[2] = {1, 2};
    int32_t ids[2];
    ASSERT_TRUE(m->batch_decode_greedy(**b, slots, toks, 2, ids).is_ok());
    const Status s = m->batch_decode_greedy(**b, slots, toks, 2, ids);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("context full"), std::string::npos) << s.message();
    EXPECT_EQ((*b)->pos[0], 1);
    EXPECT_EQ((*b)->pos[1], 64);
    EXPECT_FALSE(m->batch_prefill(**b, 0, p.data(), 64, nullptr).is_ok()) << "prefill past the context";
    EXPECT_FALSE(m->new_batch(100000).is_ok());
}

}  // namespace
}  // namespace ember::cuda
