// The engine's KV pool scheduling (runtime/engine_step.cpp) on the CPU: the committed GGUF fixtures behind a wrapper
// whose slots share a small pool of KV blocks, with the contract of the CUDA page pool (CausalLM::batch_kv_free /
// batch_kv_need; a call that needs more blocks than are free fails and changes nothing). Sequences that do not all
// fit are preempted, wait and are recomputed, and still produce what each produces alone; sequences kept after
// their end that hold the pool make a new one fail with the numbers, never hang. The CUDA pool itself:
// backend/cuda/engine_cuda_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "api/model_impl.h"
#include "ember/ember.h"
#include "runtime/engine_impl.h"
#include "runtime/engine_test_util.h"

namespace ember {
namespace {

using namespace enginetest;

const auto& kModels = kFixtures;

Model load(const std::string& rel) {
    ModelOptions o;
    o.device = "cpu";
    auto m = Model::load(std::string(EMBER_SOURCE_DIR) + "/tests/fixtures/" + rel, o);
    EXPECT_TRUE(m.is_ok()) << m.message();
    return std::move(m.value());
}

// A CPU model whose batch slots share `blocks` KV blocks of `block` tokens (the generic batch underneath).
class PooledModel : public CausalLM {
public:
    // mixed: rounds as one batch_step call of the inner model (which must take the blocks of every chunk and row
    // at once: the engine plans them together).
    PooledModel(const CausalLM& inner, int64_t block, int64_t blocks, bool mixed = false)
        : in_(inner), block_(block), blocks_(blocks), mixed_(mixed) {}
    bool batch_mixed() const override { return mixed_; }
    Status batch_step(BatchState& b, const int32_t* slots, const int64_t* lens, const int32_t* t, int64_t seqs,
                      float* logits, int32_t* ids, const uint8_t* want) const override {
        int64_t need = 0;
        for (int64_t i = 0; i < seqs; ++i) need += batch_kv_need(b, slots[i], b.pos[size_t(slots[i])] + lens[i]);
        if (need > batch_kv_free(b)) return errorf("the KV cache pool is full (test pool: %lld blocks)", (long long)blocks_);
        for (int64_t i = 0; i < seqs; ++i) EMBER_TRY(take(b, &slots[i], 1, lens[i]));
        return in_.batch_step(b, slots, lens, t, seqs, logits, ids, want);
    }
    const ModelInfo& info() const override { return in_.info(); }
    std::unique_ptr<ModelState> new_state() const override { return in_.new_state(); }
    Status forward(ModelState& s, const int32_t* t, int64_t n, float* logits, bool all) const override {
        return in_.forward(s, t, n, logits, all);
    }
    Expected<std::unique_ptr<BatchState>> new_batch(int64_t max_seqs) const override {
        held_.assign(size_t(max_seqs), 0);
        return CausalLM::new_batch(max_seqs);
    }
    int64_t batch_kv_free(BatchState&) const override {
        int64_t used = 0;
        for (int64_t h : held_) used += h;
        return blocks_ - used;
    }
    int64_t batch_kv_need(const BatchState&, int64_t slot, int64_t len) const override {
        return std::max<int64_t>(0, (len + block_ - 1) / block_ - held_[size_t(slot)]);
    }
    Status batch_prefill(BatchState& b, int64_t slot, const int32_t* t, int64_t n, float* logits) const override {
        EMBER_TRY(take(b, &slot, 1, n));
        return CausalLM::batch_prefill(b, slot, t, n, logits);
    }
    Status batch_decode(BatchState& b, const int32_t* slots, const int32_t* t, int64_t rows,
                        float* logits) const override {
        EMBER_TRY(take(b, slots, rows, 1));
        return CausalLM::batch_decode(b, slots, t, rows, logits);
    }
    Status batch_decode_greedy(BatchState& b, const int32_t* slots, const int32_t* t, int64_t rows,
                               int32_t* ids) const override {
        EMBER_TRY(take(b, slots, rows, 1));
        return CausalLM::batch_decode_greedy(b, slots, t, rows, ids);
    }
    Status batch_reset(BatchState& b, int64_t slot) const override {
        held_[size_t(slot)] = 0;
        return CausalLM::batch_reset(b, slot);
    }
    int64_t peak() const { return peak_; }

private:
    template <class Slot>
    Status take(BatchState& b, const Slot* slots, int64_t rows, int64_t n) const {
        int64_t need = 0;
        for (int64_t r = 0; r < rows; ++r) need += batch_kv_need(b, slots[r], b.pos[size_t(slots[r])] + n);
        if (need > batch_kv_free(b)) return errorf("the KV cache pool is full (test pool: %lld blocks)", (long long)blocks_);
        for (int64_t r = 0; r < rows; ++r)
            held_[size_t(slots[r])] = (b.pos[size_t(slots[r])] + n + block_ - 1) / block_;
        int64_t used = 0;
        for (int64_t h : held_) used += h;
        peak_ = std::max(peak_, used);
        return Status::ok();
    }
    const CausalLM& in_;
    const int64_t block_, blocks_;
    const bool mixed_;
    mutable std::vector<int64_t> held_;
    mutable int64_t peak_ = 0;
};

float max_rel(const std::vector<float>& a, const std::vector<float>& b) {
    float num = 0, den = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        num = std::max(num, std::fabs(a[i] - b[i]));
        den = std::max(den, std::fabs(b[i]));
    }
    return den > 0 ? num / den : num;
}

// Six sequences of 30–44 prompt tokens and 24 generated ones (greedy and seeded sampling) through 4 slots that share
// 12 blocks of 16 tokens (one sequence needs up to 5): decode rows preempt the sequences admitted last, prompt chunks
// wait, stuck prefills give way; every sequence's tokens equal its run alone in an engine without a pool, its
// logits within the prefill-vs-decode rounding of the recompute. Also with every round as one mixed call (the
// engine plans the blocks of all its chunks and rows together).
TEST(EnginePool, PreemptedAndWaitingSequencesEqualTheirRunsAlone) {
    for (const char* f : kModels)
    for (bool mixed : {false, true}) {
        SCOPED_TRACE(f);
        SCOPED_TRACE(mixed ? "mixed rounds" : "rounds apart");
        Model m = load(f);
        const CausalLM& lm = *m.impl()->lm;
        const int64_t V = m.vocab_size();
        for (float temp : {0.f, 0.9f}) {
            SCOPED_TRACE(temp);
            std::vector<SequenceParams> todo;
            for (int i = 0; i < 6; ++i) todo.push_back(params(prompt(30 + 3 * i, V, i), 24, temp, 200 + uint64_t(i)));
            PooledModel pooled(lm, 16, 12, mixed);
            auto e = make_engine(pooled, EngineOptions{4, 8, 0});
            ASSERT_TRUE(e.is_ok()) << e.message();
            const std::vector<SeqRun> all = run(*e, todo);
            const EngineStats st = e->stats();
            EXPECT_GT(st.preemptions, 0);
            EXPECT_GT(st.recomputed_tokens, 0);
            EXPECT_GT(st.kv_waits, 0);
            EXPECT_LE(pooled.peak(), 12);
            int64_t prompt_total = 0;
            for (const auto& p : todo) prompt_total += int64_t(p.prompt.size());
            EXPECT_EQ(st.prompt_tokens, prompt_total);  // recomputed tokens are counted apart
            for (size_t i = 0; i < todo.size(); ++i) {
                auto solo = make_engine(lm, EngineOptions{1, 8, 0});
                ASSERT_TRUE(solo.is_ok());
                const SeqRun alone = run(*solo, {todo[i]}).at(0);
                EXPECT_EQ(all[i].tokens, alone.tokens) << i;
                ASSERT_EQ(all[i].logits.size(), alone.logits.size()) << i;
                for (size_t k = 0; k < alone.logits.size(); ++k)
                    EXPECT_LE(max_rel(all[i].logits[k], alone.logits[k]), 1e-4f) << i << " token " << k;
                EXPECT_EQ(all[i].end, SequenceEnd::LENGTH);
            }
        }
    }
}

// Three 60-token prompts prefilled 16 tokens a step fill 8 blocks of 16 between them before any of them decodes:
// with no decode row and every chunk waiting, the sequence admitted last gives its blocks up (else the engine would
// wait forever); the results equal each run alone. Also as mixed rounds, whose chunks take their blocks together.
TEST(EnginePool, PromptsThatFillThePoolTogetherGiveWay) {
    for (bool mixed : {false, true}) {
        SCOPED_TRACE(mixed ? "mixed rounds" : "rounds apart");
        Model m = load(kModels[0]);
        const CausalLM& lm = *m.impl()->lm;
        const int64_t V = m.vocab_size();
        std::vector<SequenceParams> todo;
        for (int i = 0; i < 3; ++i) todo.push_back(params(prompt(60, V, 10 + i), 4));
        PooledModel pooled(lm, 16, 8, mixed);
        auto e = make_engine(pooled, EngineOptions{3, 16, 0});
        ASSERT_TRUE(e.is_ok()) << e.message();
        for (const auto& p : todo) ASSERT_TRUE(e->add(p).is_ok());
        int64_t steps = 0, preempted_before_decode = -1;
        std::vector<SeqRun> all(3);
        while (e->running() > 0 && steps < 200) {
            const std::vector<StepEvent> ev = e->step();
            ++steps;
            if (preempted_before_decode < 0 && !ev.empty()) preempted_before_decode = e->stats().preemptions;
            for (const StepEvent& x : ev) record(all[size_t(x.id - 1)], x);
        }
        EXPECT_LT(steps, 200);
        EXPECT_GT(preempted_before_decode, 0);  // the first token of any sequence came after a preemption
        for (size_t i = 0; i < todo.size(); ++i) {
            auto solo = make_engine(lm, EngineOptions{1, 16, 0});
            ASSERT_TRUE(solo.is_ok());
            EXPECT_EQ(all[i].tokens, run(*solo, {todo[i]}).at(0).tokens) << i;
        }
    }
}

// A sequence kept after its end holds most of the pool: a new prompt that cannot fit fails with the numbers (no
// hang, no preemption of the kept one); after cancel() the same prompt runs.
TEST(EnginePool, KeptSequencesHoldingThePoolFailANewOneWithTheNumbers) {
    Model m = load(kModels[0]);
    const CausalLM& lm = *m.impl()->lm;
    const int64_t V = m.vocab_size();
    PooledModel pooled(lm, 16, 6);
    auto e = make_engine(pooled, EngineOptions{2, 32, 0});
    ASSERT_TRUE(e.is_ok()) << e.message();
    const SequenceId kept = run_kept(*e, params(prompt(60, V, 1), 8));  // 68 tokens: 5 of the 6 blocks
    ASSERT_NE(kept, 0);
    ASSERT_TRUE(e->add(params(prompt(40, V, 2), 4)).is_ok());
    std::string error;
    for (int i = 0; i < 10 && e->running() > 0; ++i)
        for (const StepEvent& ev : e->step())
            if (ev.end == SequenceEnd::FAILED) error = ev.error;
    EXPECT_EQ(e->running(), 0);
    EXPECT_NE(error.find("KV cache pool is full"), std::string::npos) << error;
    EXPECT_NE(error.find("kept"), std::string::npos) << error;
    EXPECT_TRUE(e->info(kept).is_ok());  // untouched
    ASSERT_TRUE(e->cancel(kept).is_ok());
    const SeqRun again = run(*e, {params(prompt(40, V, 2), 4)}).at(0);
    EXPECT_EQ(again.tokens.size(), 4u);
}

}  // namespace
}  // namespace ember
