// The exact prefix cache (runtime/prefix_cache.h) on the CPU batched engine, hybrid and Llama-family fixtures: a
// hit equals the same prompt computed without the cache, bit for bit (the same chunks both ways), and the memory
// budget evicts whole chains' leaves first. The GPU form: backend/cuda/prefix_cache_cuda_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "core/check.h"
#include "models/state_io.h"
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
    // Links: blocks of 2 rows from a slot at 4 (rows 0-1, then 2-3 + the recurrent state) make position 4, equal to
    // the whole snapshot at 4; a link of another block size, a short tensor, a null or no link are errors.
    ASSERT_TRUE(m->batch_reset(**b, 0).is_ok());
    ASSERT_TRUE(m->batch_prefill(**b, 0, p.data(), 4, nullptr).is_ok());
    auto l0 = m->batch_export_slot(**b, 0, 0), l1 = m->batch_export_slot(**b, 0, 2), at4 = m->batch_export_slot(**b, 0, 0);
    ASSERT_TRUE(l0.is_ok() && l1.is_ok() && at4.is_ok());
    for (StateTensor& x : *l0)
        if (is_kv_tensor(x)) {  // rows 0-1 of [n_kv, 4, d]
            const int64_t g = x.shape[0], d = x.shape[2];
            std::vector<float> keep;
            for (int64_t i = 0; i < g; ++i) keep.insert(keep.end(), x.data.begin() + i * 4 * d, x.data.begin() + (i * 4 + 2) * d);
            x.shape[1] = 2;
            x.data = keep;
        }
    ASSERT_TRUE(m->batch_import_slot_links(**b, 1, 2, {&*l0, &*l1}).is_ok());
    EXPECT_EQ((*b)->pos[1], 4);
    auto back = m->batch_export_slot(**b, 1, 0);
    ASSERT_TRUE(back.is_ok());
    ASSERT_EQ(back->size(), at4->size());
    for (size_t i = 0; i < back->size(); ++i) EXPECT_EQ((*back)[i].data, (*at4)[i].data) << (*back)[i].name;
    EXPECT_FALSE(m->batch_import_slot_links(**b, 1, 3, {&*l0, &*l1}).is_ok());
    EXPECT_FALSE(m->batch_import_slot_links(**b, 1, 2, {}).is_ok());
    EXPECT_FALSE(m->batch_import_slot_links(**b, 1, 2, {&*l0, nullptr}).is_ok());
    std::vector<StateTensor> short_link = *l1;
    short_link.front().data.pop_back();
    const Status sl = m->batch_import_slot_links(**b, 1, 2, {&*l0, &short_link});
    ASSERT_FALSE(sl.is_ok());
    EXPECT_NE(sl.message().find("link 1"), std::string::npos) << sl.message();
}

}  // namespace
}  // namespace ember
