// ember::Engine on the GPU (runtime/engine*.cpp over CudaCausalLM's batch pool, rows selected by the device sampler):
// sequences stepped together — ragged prompts in chunks, joining as slots free — give the tokens each gives alone
// (greedy, and seeded sampling with penalties), and a saved sequence continues after restore exactly as the
// uninterrupted run, its slot's device RNG stream included (batch_slot_rng / batch_set_slot_rng); constrained rows
// masked on the device select what the host's masked selection does. The CPU form:
// src/api/engine_test.cpp. Skips without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cuda/cuda_model.h"
#include "backend/cuda/device.h"
#include "core/check.h"
#include "core/temp_dir.h"
#include "runtime/engine_impl.h"
#include "runtime/engine_test_util.h"

namespace ember::cuda {
namespace {

using namespace enginetest;

#define SKIP_WITHOUT_GPU() \
    if (!gpu_available()) GTEST_SKIP() << "no CUDA device"

const auto& kModels = kFixtures;

std::unique_ptr<CausalLM> gpu_model(const std::string& rel, CudaOptions opt = {}) {
    auto cpu = load_model(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/" + rel);
    EMBER_CHECK(cpu.is_ok(), "%s", cpu.message().c_str());
    auto m = make_cuda_model(std::move(cpu.value()), opt);
    EMBER_CHECK(m.is_ok(), "%s", m.message().c_str());
    return std::move(m.value());
}

Engine engine(const CausalLM& m, int slots, int64_t chunk) {
    auto e = make_engine(m, EngineOptions{slots, chunk, 0});
    EMBER_CHECK(e.is_ok(), "%s", e.message().c_str());
    return std::move(e.value());
}

// Also with mixed rounds (set_mixed_steps: the greedy rounds as one batch_step pass, the sampled ones apart).
TEST(EngineCuda, TogetherEqualsAloneWithDeviceSampling) {
    SKIP_WITHOUT_GPU();
    for (const char* f : kModels)
    for (bool one_call : {false, true}) {
        SCOPED_TRACE(f);
        SCOPED_TRACE(one_call ? "mixed rounds" : "rounds apart");
        auto m = gpu_model(f);
        m->set_mixed_steps(one_call);
        const int64_t V = m->info().vocab_size;
        for (float temp : {0.f, 0.9f}) {
            SCOPED_TRACE(temp);
            const auto todo = mixed(V, temp, /*logits=*/false);  // rows selected on the device
            Engine together = engine(*m, 3, 8);
            const auto all = run(together, todo);
            for (size_t i = 0; i < todo.size(); ++i) {
                Engine solo = engine(*m, 1, 8);
                EXPECT_EQ(all[i].tokens, run(solo, {todo[i]}).at(0).tokens) << i;
            }
        }
    }
}

// Four sequences (60–105 prompt tokens + 40 generated: 2 or 3 pages of 64 tokens each) through 4 slots sharing a
// KV pool of 6 pages: decode rows preempt the sequence admitted last (its state dropped, recomputed by a prefill,
// its device sampling stream and penalty window continued), prompt chunks wait; every sequence's tokens equal its
// run alone with a pool of full contexts (greedy, and seeded sampling with penalties).
TEST(EngineCuda, KvPoolPreemptionKeepsEachSequencesTokens) {
    SKIP_WITHOUT_GPU();
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        CudaOptions small_pool, full_pool;
        small_pool.context = full_pool.context = 256;
        small_pool.kv_pages = 6;
        auto small = gpu_model(f, small_pool), full = gpu_model(f, full_pool);
        const int64_t V = small->info().vocab_size;
        for (float temp : {0.f, 0.9f}) {
            SCOPED_TRACE(temp);
            std::vector<SequenceParams> todo;
            for (int i = 0; i < 4; ++i)
                todo.push_back(params(prompt(60 + 15 * i, V, i), 40, temp, 300 + uint64_t(i), /*logits=*/false));
            Engine e = engine(*small, 4, 32);
            const auto all = run(e, todo);
            EXPECT_GT(e.stats().preemptions, 0);
            EXPECT_GT(e.stats().recomputed_tokens, 0);
            for (size_t i = 0; i < todo.size(); ++i) {
                Engine solo = engine(*full, 1, 32);
                EXPECT_EQ(all[i].tokens, run(solo, {todo[i]}).at(0).tokens) << i;
            }
        }
    }
}

// A constraint allowing a pseudo-random ~1/16 of the vocabulary at each of its steps (never none); accept() refuses
// any other token, so an unmasked selection fails the sequence.
class SparseIds : public TokenConstraint {
public:
    SparseIds(int64_t vocab, uint64_t salt) : V_(vocab), salt_(salt) {}
    bool allowed(int64_t v) const {
        uint64_t h = (uint64_t(v) + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t(step_) * 0xBF58476D1CE4E5B9ull + salt_);
        h ^= h >> 29;
        h *= 0x94D049BB133111EBull;
        return (h >> 32) % 16 == 0 || v == int64_t(salt_ % uint64_t(V_));
    }
    void fill_mask(uint32_t* w) override {
        for (int64_t i = 0; i < (V_ + 31) / 32; ++i) w[i] = 0;
        for (int64_t v = 0; v < V_; ++v)
            if (allowed(v)) w[v / 32] |= 1u << (v % 32);
    }
    Status accept(int32_t t) override {
        if (!allowed(t)) return errorf("token %d is not allowed at step %d", t, step_);
        ++step_;
        return Status::ok();
    }
    bool done() const override { return false; }

private:
    int64_t V_;
    uint64_t salt_;
    int step_ = 0;
};

// Rows 0, 2 and 3 of mixed() under a SparseIds constraint each (fresh ones per call), `host`: selected on the host
// (top_logprobs asks for the logits) instead of through the device masks.
std::vector<SequenceParams> constrained(int64_t V, float temp, bool host) {
    auto todo = mixed(V, temp, /*logits=*/false);
    for (size_t i : {0u, 2u, 3u}) {
        todo[i].constraint = std::make_shared<SparseIds>(V, 7 + i);
        if (host) todo[i].top_logprobs = 0;
    }
    return todo;
}

// Constrained rows selected on the device (masks filled during the forward, applied in the selection graph):
// greedy tokens equal the host's masked selection from the same logits; seeded sampling is batch-invariant;
// every token passes the constraint (record() fails a FAILED sequence).
TEST(EngineCuda, DeviceMasksEqualHostMasks) {
    SKIP_WITHOUT_GPU();
    for (const char* f : kModels) {
        SCOPED_TRACE(f);
        auto m = gpu_model(f);
        const int64_t V = m->info().vocab_size;
        for (float temp : {0.f, 0.9f}) {
            SCOPED_TRACE(temp);
            Engine together = engine(*m, 3, 8);
            const auto dev = run(together, constrained(V, temp, false));
            for (size_t i = 0; i < dev.size(); ++i) EXPECT_FALSE(dev[i].tokens.empty()) << i;
            if (temp == 0.f) {
                Engine host = engine(*m, 3, 8);
                const auto ref = run(host, constrained(V, temp, true));
                for (size_t i = 0; i < dev.size(); ++i) EXPECT_EQ(dev[i].tokens, ref[i].tokens) << i;
            }
            const auto todo = constrained(V, temp, false);
            for (size_t i : {0u, 3u}) {
                Engine solo = engine(*m, 1, 8);
                EXPECT_EQ(dev[i].tokens, run(solo, {todo[i]}).at(0).tokens) << i;
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
        const SequenceParams whole = params(prompt(11, m->info().vocab_size, 3), 14, 0.9f, 7, /*logits=*/false);
        Engine e0 = engine(*m, 2, 4);
        const std::vector<int32_t> ref = run(e0, {whole}).at(0).tokens;
        ASSERT_EQ(ref.size(), 14u);
        Engine e1 = engine(*m, 2, 4);
        SequenceParams head = whole;
        head.max_tokens = 5;
        const SequenceId id = run_kept(e1, head);
        ASSERT_NE(id, 0);
        ASSERT_TRUE(e1.save(id, path).is_ok());
        SequenceParams tail = whole;
        tail.prompt.clear();
        tail.max_tokens = 9;
        Engine e2 = engine(*m, 1, 4);
        EXPECT_EQ(run_restored(e2, path, tail).tokens, std::vector<int32_t>(ref.begin() + 5, ref.end()));
    }
}

}  // namespace
}  // namespace ember::cuda
