// GPU tests of the exact prefix cache (runtime/prefix_cache.h) on the CUDA batched engine, with the checks of
// runtime/prefix_cache_test_util.h: checkpoints are device copies of the pooled caches (batch_snapshot /
// batch_restore_links, cuda_state_io.cpp; host tensors when device memory runs out: a chain mixing both restores
// the same state); a hit equals the same prompt computed without the cache in another slot
// (the same prefill chunks and kernels both ways: bit-equal logits expected, 1e-5 allowed), for hybrid and
// Llama-family fixtures; eviction under a budget. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "models/state_io.h"
#include "runtime/prefix_cache_test_util.h"

namespace ember::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

const char* kModels[] = {"qwen35/flat_untied_gqa3", "qwen35/mm_tied", "gguf_models/llama_gqa_untied/model-q8_0.gguf"};

std::unique_ptr<CausalLM> load_gpu(const std::string& rel, bool kv_bf16 = false) {
    auto cpu = load_model(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/" + rel);
    EMBER_CHECK(cpu.is_ok(), "%s", cpu.message().c_str());
    CudaOptions opt;
    opt.context = 1024;
    opt.kv_bf16 = kv_bf16;
    auto m = make_cuda_model(std::move(cpu.value()), opt);
    EMBER_CHECK(m.is_ok(), "%s", m.message().c_str());
    return std::move(m.value());
}

constexpr double kTol = 1e-5;

TEST(PrefixCacheCuda, HitEqualsMiss) {
    SKIP_WITHOUT_GPU();
    for (bool bf16 : {false, true})
        for (const char* f : kModels) {
            SCOPED_TRACE(f);
            SCOPED_TRACE(bf16 ? "bf16 KV" : "fp32 KV");
            auto m = load_gpu(f, bf16);
            for (int64_t block : {16, 64}) {
                const double w = prefixtest::check_hit_equals_miss(*m, block, kTol);
                std::printf("%s%s: block %lld, worst rel. logit error hit vs miss %.2e\n", f, bf16 ? " (bf16 KV)" : "",
                            (long long)block, w);
            }
        }
}

TEST(PrefixCacheCuda, BudgetEvictsAndRestoresStayExact) {
    SKIP_WITHOUT_GPU();
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        auto m = load_gpu(f);
        prefixtest::check_eviction(*m, 16, kTol);
    }
}

// A chain of a device checkpoint and a host one (the fallback), or of two device ones, restores exactly the
// state the slot had (every tensor equal); a snapshot of another kind is refused.
// With a bf16 cache the device checkpoint keeps the KV rows in bf16 (smaller than the fp32 host tensors) and the
// host link's fp32 rows round back to the same bf16 values.
TEST(PrefixCacheCuda, DeviceAndHostLinksRestoreTheSameState) {
    SKIP_WITHOUT_GPU();
    struct Foreign : SlotSnapshot {};
    for (bool bf16 : {false, true})
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        SCOPED_TRACE(bf16 ? "bf16 KV" : "fp32 KV");
        auto m = load_gpu(f, bf16);
        const int64_t blk = 16, V = m->info().vocab_size;
        auto b = m->new_batch(2);
        ASSERT_TRUE(b.is_ok()) << b.message();
        std::vector<int32_t> p;
        for (int64_t i = 0; i < 2 * blk; ++i) p.push_back(int32_t((i * 37 + 5) % V));
        ASSERT_TRUE(m->batch_prefill(**b, 0, p.data(), blk, nullptr).is_ok());
        auto d1 = m->batch_snapshot(**b, 0, 0);
        ASSERT_TRUE(d1.is_ok()) << d1.message();
        EXPECT_TRUE((*d1)->device);
        ASSERT_TRUE(m->batch_prefill(**b, 0, p.data() + blk, blk, nullptr).is_ok());
        auto d2 = m->batch_snapshot(**b, 0, blk);
        auto h2 = m->CausalLM::batch_snapshot(**b, 0, blk);  // the host form the fallback takes
        ASSERT_TRUE(d2.is_ok() && h2.is_ok());
        EXPECT_FALSE((*h2)->device);
        if (bf16) EXPECT_LT((*d2)->bytes, (*h2)->bytes);
        else EXPECT_EQ((*d2)->bytes, (*h2)->bytes);
        auto want = m->batch_export_slot(**b, 0, 0);
        ASSERT_TRUE(want.is_ok());
        for (const SlotSnapshot* last : {d2->get(), h2->get()}) {
            ASSERT_TRUE(m->batch_restore_links(**b, 1, blk, {d1->get(), last}).is_ok());
            EXPECT_EQ((*b)->pos[1], 2 * blk);
            auto got = m->batch_export_slot(**b, 1, 0);
            ASSERT_TRUE(got.is_ok());
            ASSERT_EQ(got->size(), want->size());
            for (size_t i = 0; i < got->size(); ++i) EXPECT_EQ((*got)[i].data, (*want)[i].data) << (*got)[i].name;
        }
        Foreign alien;
        const Status st = m->batch_restore_links(**b, 1, blk, {d1->get(), &alien});
        ASSERT_FALSE(st.is_ok());
        EXPECT_NE(st.message().find("not a snapshot of this model"), std::string::npos) << st.message();
        EXPECT_FALSE(m->batch_restore_links(**b, 1, blk + 1, {d1->get(), d2->get()}).is_ok());  // rows ≠ block
    }
}

}  // namespace
}  // namespace ember::cuda
