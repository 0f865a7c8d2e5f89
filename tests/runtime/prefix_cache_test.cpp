// The exact prefix cache (runtime/prefix_cache.h) on the CPU batched engine, hybrid and Llama-family fixtures: a
// hit equals the same prompt computed without the cache, bit for bit (the same chunks both ways), and the memory
// budget evicts whole chains' leaves first. The GPU form: backend/cuda/prefix_cache_cuda_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "core/check.h"
#include "runtime/prefix_cache_test_util.h"

namespace ember {
namespace {

std::unique_ptr<CausalLM> load(const std::string& rel) {
    auto m = load_model(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/" + rel);
    EMBER_CHECK(m.is_ok(), "%s", m.message().c_str());
    return std::move(m.value());
}

const char* const kModels[] = {"qwen35/flat_untied_gqa3", "qwen35/mm_tied",
                               "gguf_models/llama_gqa_untied/model-f32.gguf"};

TEST(PrefixCacheCpu, HitEqualsMiss) {
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        auto m = load(f);
        EXPECT_EQ(prefixtest::check_hit_equals_miss(*m, 8, 0.0), 0.0);
    }
}

TEST(PrefixCacheCpu, BudgetEvictsAndRestoresStayExact) {
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        auto m = load(f);
        prefixtest::check_eviction(*m, 8, 0.0);
    }
}

TEST(PrefixCacheCpu, SnapshotsAreCheckedBeforeUse) {
    auto m = load("qwen35/flat_untied_gqa3");
    auto b = m->new_batch(2);
    ASSERT_TRUE(b.is_ok());
    const std::vector<int32_t> p = batchtest::make_prompt(m->info().vocab_size, 5, 1);
    ASSERT_TRUE(m->batch_prefill(**b, 0, p.data(), 5, nullptr).is_ok());
    auto t = m->batch_export_slot(**b, 0, 2);
    ASSERT_TRUE(t.is_ok()) << t.message();
    // KV rows 2..4 only: not a state at position 5, nor at 3.
    EXPECT_FALSE(m->batch_import_slot(**b, 1, 5, *t).is_ok());
    EXPECT_FALSE(m->batch_export_slot(**b, 0, 6).is_ok());
    EXPECT_FALSE(m->batch_export_slot(**b, 7, 0).is_ok());
    auto whole = m->batch_export_slot(**b, 0, 0);
    ASSERT_TRUE(whole.is_ok());
    ASSERT_TRUE(m->batch_import_slot(**b, 1, 5, *whole).is_ok());
    EXPECT_EQ((*b)->pos[1], 5);
    std::vector<StateTensor> broken = *whole;
    broken.back().data.pop_back();
    const Status s = m->batch_import_slot(**b, 1, 5, broken);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("values"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace ember
