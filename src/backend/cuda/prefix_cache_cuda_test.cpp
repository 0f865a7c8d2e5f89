// GPU tests of the exact prefix cache (runtime/prefix_cache.h) on the CUDA batched engine, with the checks of
// runtime/prefix_cache_test_util.h: slot snapshots go through the pooled caches (batch_export_slot /
// batch_import_slot, cuda_state_io.cpp); a hit equals the same prompt computed without the cache in another slot
// (the same prefill chunks and kernels both ways: bit-equal logits expected, 1e-5 allowed), for hybrid and
// Llama-family fixtures; eviction under a budget. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "runtime/prefix_cache_test_util.h"

namespace ember::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

const char* kModels[] = {"qwen35/flat_untied_gqa3", "qwen35/mm_tied", "gguf_models/llama_gqa_untied/model-q8_0.gguf"};

std::unique_ptr<CausalLM> load_gpu(const std::string& rel) {
    auto cpu = load_model(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/" + rel);
    EMBER_CHECK(cpu.is_ok(), "%s", cpu.message().c_str());
    CudaOptions opt;
    opt.context = 1024;
    auto m = make_cuda_model(std::move(cpu.value()), opt);
    EMBER_CHECK(m.is_ok(), "%s", m.message().c_str());
    return std::move(m.value());
}

constexpr double kTol = 1e-5;

TEST(PrefixCacheCuda, HitEqualsMiss) {
    SKIP_WITHOUT_GPU();
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        auto m = load_gpu(f);
        for (int64_t block : {16, 64}) {
            const double w = prefixtest::check_hit_equals_miss(*m, block, kTol);
            std::printf("%s: block %lld, worst rel. logit error hit vs miss %.2e\n", f, (long long)block, w);
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

}  // namespace
}  // namespace ember::cuda
