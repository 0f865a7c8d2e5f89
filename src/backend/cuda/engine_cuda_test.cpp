// ember::Engine on the GPU (runtime/engine*.cpp over CudaCausalLM's batch pool, rows selected by the device sampler):
// sequences stepped together — ragged prompts in chunks, joining as slots free — give the tokens each gives alone
// (greedy, and seeded sampling with penalties), and a saved sequence continues after restore exactly as the
// uninterrupted run, its slot's device RNG stream included (batch_slot_rng / batch_set_slot_rng). The CPU form:
// src/api/engine_test.cpp. Skips without a GPU.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "core/temp_dir.h"
#include "runtime/engine_impl.h"

namespace ember::cuda {
namespace {

#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

const char* const kModels[] = {"gguf_models/qwen35_flat_gqa3_dkdv/model-q8_0.gguf",
                               "gguf_models/llama_gqa_untied/model-q8_0.gguf"};

std::unique_ptr<CausalLM> gpu_model(const std::string& rel) {
    auto cpu = load_model(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/" + rel);
    EMBER_CHECK(cpu.is_ok(), "%s", cpu.message().c_str());
    auto m = make_cuda_model(std::move(cpu.value()), CudaOptions{});
    EMBER_CHECK(m.is_ok(), "%s", m.message().c_str());
    return std::move(m.value());
}

Engine engine(const CausalLM& m, int slots, int64_t chunk) {
    auto e = make_engine(m, EngineOptions{slots, chunk, 0});
    EMBER_CHECK(e.is_ok(), "%s", e.message().c_str());
    return std::move(e.value());
}

SequenceParams params(int64_t len, int64_t max_tokens, int64_t vocab, int salt, float temp) {
    SequenceParams p;
    for (int64_t i = 0; i < len; ++i) p.prompt.push_back(int32_t((i * 131 + 17 + salt * 53) % vocab));
    p.max_tokens = max_tokens;
    p.sampling.temperature = temp;
    p.sampling.top_k = temp > 0 ? 20 : 0;
    p.sampling.repetition_penalty = temp > 0 ? 1.1f : 1.f;
    p.sampling.seed = 100 + uint64_t(salt);
    return p;
}

// Adds `todo` as slots free up; steps until all have ended; each sequence's tokens.
std::vector<std::vector<int32_t>> run(Engine& e, const std::vector<SequenceParams>& todo) {
    std::map<SequenceId, size_t> which;
    std::vector<std::vector<int32_t>> out(todo.size());
    size_t next = 0;
    while (next < todo.size() || e.running() > 0) {
        for (; next < todo.size() && e.free_slots() > 0; ++next) {
            auto id = e.add(todo[next]);
            EMBER_CHECK(id.is_ok(), "%s", id.message().c_str());
            which[*id] = next;
        }
        for (const StepEvent& ev : e.step()) {
            if (ev.has_token) out[which.at(ev.id)].push_back(ev.token.id);
            EXPECT_NE(ev.end, SequenceEnd::FAILED) << ev.error;
        }
    }
    return out;
}

TEST(EngineCuda, TogetherEqualsAloneWithDeviceSampling) {
    SKIP_WITHOUT_GPU();
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        auto m = gpu_model(f);
        const int64_t V = m->info().vocab_size;
        for (float temp : {0.f, 0.9f}) {
            SCOPED_TRACE(temp);
            const int64_t lens[] = {1, 3, 17, 40, 9}, toks[] = {12, 5, 9, 12, 1};
            std::vector<SequenceParams> todo;
            for (int i = 0; i < 5; ++i) todo.push_back(params(lens[i], toks[i], V, i, temp));
            Engine together = engine(*m, 3, 8);
            const auto all = run(together, todo);
            for (size_t i = 0; i < todo.size(); ++i) {
                Engine solo = engine(*m, 1, 8);
                EXPECT_EQ(all[i], run(solo, {todo[i]}).at(0)) << i;
            }
        }
    }
}

TEST(EngineCuda, SaveRestoreContinuesTheDeviceStream) {
    SKIP_WITHOUT_GPU();
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        auto m = gpu_model(f);
        TempDir dir;
        const std::string path = (dir.path() / "seq.session").string();
        const SequenceParams whole = params(11, 14, m->info().vocab_size, 3, 0.9f);
        Engine e0 = engine(*m, 2, 4);
        const std::vector<int32_t> ref = run(e0, {whole}).at(0);
        ASSERT_EQ(ref.size(), 14u);
        Engine e1 = engine(*m, 2, 4);
        SequenceParams head = whole;
        head.max_tokens = 5;
        head.keep = true;
        auto id = e1.add(head);
        ASSERT_TRUE(id.is_ok());
        while (e1.running() > 0) e1.step();
        ASSERT_TRUE(e1.save(*id, path).is_ok());
        SequenceParams tail = whole;
        tail.prompt.clear();
        tail.max_tokens = 9;
        Engine e2 = engine(*m, 1, 4);
        ASSERT_TRUE(e2.restore(path, tail).is_ok());
        std::vector<int32_t> got;
        while (e2.running() > 0)
            for (const StepEvent& ev : e2.step())
                if (ev.has_token) got.push_back(ev.token.id);
        EXPECT_EQ(got, std::vector<int32_t>(ref.begin() + 5, ref.end()));
    }
}

}  // namespace
}  // namespace ember::cuda
