// EngineQueue on a small deterministic model: token streams, limits, stop ids, logprobs, cancellation freeing the
// slot, the queue bound, interleaved sequences equal to solo runs, shutdown.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <mutex>
#include <thread>
#include <type_traits>

#include "ops/sampling/token_mask.h"
#include "server/queue.h"

namespace ember::server {
namespace {

// Logits of position t: a fixed function of the token there (next = 3·tok + 1 mod V is the greedy choice), so a
// sequence's greedy continuation is known in closed form. Each forward sleeps `delay` to let tests act mid-run.
class ToyLM : public CausalLM {
public:
    explicit ToyLM(std::chrono::milliseconds delay = std::chrono::milliseconds(0)) : delay_(delay) {
        info_.vocab_size = 37;
        info_.kv_bytes_per_token = 100;
        info_.state_bytes = 1000;
        info_.max_context = 1 << 20;
    }
    const ModelInfo& info() const override { return info_; }
    std::unique_ptr<ModelState> new_state() const override { return std::make_unique<ModelState>(); }
    Status forward(ModelState& s, const int32_t* tokens, int64_t n, float* logits, bool all) const override {
        if (delay_.count()) std::this_thread::sleep_for(delay_);
        const int64_t V = info_.vocab_size;
        for (int64_t r = all ? 0 : n - 1; r < n; ++r) {
            float* row = logits + (all ? r : 0) * V;
            for (int64_t v = 0; v < V; ++v) row[v] = std::sin(float(v * 7 + tokens[r]));  // a spread of values
            row[next(tokens[r])] = 5.f;
        }
        s.pos += n;
        return Status::ok();
    }
    static int32_t next(int32_t t) { return (3 * t + 1) % 37; }

private:
    ModelInfo info_;
    std::chrono::milliseconds delay_;
};

// A toy model, its metrics and a queue on them.
template <class LM>
struct RigOf {
    explicit RigOf(QueueOptions o = {}, std::chrono::milliseconds delay = std::chrono::milliseconds(0))
        : lm(delay), q(lm, o, m) {}
    std::shared_ptr<Job> submit(JobSpec s) {
        EngineQueue::Refusal why;
        return q.submit(std::move(s), &why);
    }
    LM lm;
    Metrics m;
    EngineQueue q;
};
using Rig = RigOf<ToyLM>;

JobSpec greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
    JobSpec j;
    j.prompt = std::move(prompt);
    j.max_tokens = max_tokens;
    j.sampling.temperature = 0;
    return j;
}

// Reads a job to its end.
std::vector<int32_t> drain(Job& job, JobEnd* end = nullptr, std::vector<GeneratedToken>* all = nullptr,
                           std::string* error = nullptr) {
    std::vector<int32_t> ids;
    JobUpdate u;
    for (;;) {
        if (!job.wait(u, std::chrono::milliseconds(5000))) ADD_FAILURE() << "job timed out";
        for (const auto& t : u.tokens) {
            ids.push_back(t.id);
            if (all) all->push_back(t);
        }
        if (u.end != JobEnd::RUNNING) {
            if (end) *end = u.end;
            if (error) *error = u.error;
            return ids;
        }
    }
}

std::vector<int32_t> expected(int32_t last, int n) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) out.push_back(last = ToyLM::next(last));
    return out;
}

TEST(EngineQueue, GreedyStreamAndLength) {
    Rig r;
    auto job = r.submit(greedy({1, 2, 5}, 6));
    ASSERT_TRUE(job);
    JobEnd end;
    EXPECT_EQ(drain(*job, &end), expected(5, 6));
    EXPECT_EQ(end, JobEnd::LENGTH);
    EXPECT_EQ(r.m.generation_tokens.load(), 6u);
    EXPECT_EQ(r.m.prompt_tokens.load(), 3u);
}

TEST(EngineQueue, StopIdEndsWithoutEmittingIt) {
    Rig r;
    JobSpec s = greedy({5}, 50);
    const auto seq = expected(5, 10);
    s.stop_ids = {seq[3]};
    auto job = r.submit(s);
    JobEnd end;
    EXPECT_EQ(drain(*job, &end), std::vector<int32_t>(seq.begin(), seq.begin() + 3));
    EXPECT_EQ(end, JobEnd::EOS);
}

TEST(EngineQueue, LogprobsAreTheLogSoftmax) {
    Rig r;
    JobSpec s = greedy({4}, 3);
    s.top_logprobs = 4;
    auto job = r.submit(s);
    std::vector<GeneratedToken> toks;
    drain(*job, nullptr, &toks);
    ASSERT_EQ(toks.size(), 3u);
    int32_t prev = 4;
    for (const auto& t : toks) {
        std::vector<float> row(37);
        ModelState st;
        ASSERT_TRUE(r.lm.forward(st, &prev, 1, row.data(), false).is_ok());
        double z = 0;
        for (float l : row) z += std::exp(double(l));
        EXPECT_NEAR(t.logprob, row[t.id] - std::log(z), 1e-5);
        ASSERT_EQ(t.top.size(), 4u);
        EXPECT_EQ(t.top[0].first, t.id);  // greedy: the top entry is the token itself
        for (size_t k = 1; k < t.top.size(); ++k) EXPECT_LE(t.top[k].second, t.top[k - 1].second);
        prev = t.id;
    }
}

TEST(EngineQueue, InterleavedSequencesEqualSoloRuns) {
    ToyLM lm;
    Metrics m;
    QueueOptions o;
    o.max_seqs = 3;
    o.prefill_chunk = 2;
    EngineQueue q(lm, o, m);
    std::vector<std::shared_ptr<Job>> jobs;
    EngineQueue::Refusal why;
    for (int i = 0; i < 8; ++i) jobs.push_back(q.submit(greedy({int32_t(i), int32_t(i + 1), int32_t(i + 2)}, 5 + i), &why));
    for (int i = 0; i < 8; ++i) EXPECT_EQ(drain(*jobs[i]), expected(i + 2, 5 + i)) << i;
}

TEST(EngineQueue, CancelFreesTheSlot) {
    ToyLM lm(std::chrono::milliseconds(5));
    Metrics m;
    QueueOptions o;
    o.max_seqs = 1;
    EngineQueue q(lm, o, m);
    EngineQueue::Refusal why;
    auto a = q.submit(greedy({1}, 100000), &why);
    auto b = q.submit(greedy({2}, 3), &why);
    JobUpdate u;
    ASSERT_TRUE(a->wait(u, std::chrono::milliseconds(5000)));
    EXPECT_EQ(q.active(), 1);
    a->cancel();
    JobEnd end;
    drain(*a, &end);
    EXPECT_EQ(end, JobEnd::CANCELLED);
    EXPECT_EQ(drain(*b), expected(2, 3));  // b got the slot
    EXPECT_EQ(m.cancelled.load(), 1u);
    for (int i = 0; i < 100 && q.active() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(q.active(), 0);
    EXPECT_EQ(m.active_seqs.load(), 0);
}

TEST(EngineQueue, RefusesBeyondTheBoundAndAfterShutdown) {
    ToyLM lm(std::chrono::milliseconds(20));
    Metrics m;
    QueueOptions o;
    o.max_seqs = 1;
    o.max_queued = 2;
    EngineQueue q(lm, o, m);
    EngineQueue::Refusal why;
    std::vector<std::shared_ptr<Job>> ok;
    for (int i = 0; i < 3; ++i) {
        ok.push_back(q.submit(greedy({1}, 1000), &why));
        ASSERT_TRUE(ok.back());
    }
    EXPECT_FALSE(q.submit(greedy({1}, 1), &why));
    EXPECT_EQ(why, EngineQueue::Refusal::FULL);
    EXPECT_EQ(m.rejected_full.load(), 1u);
    ok[2]->cancel();  // a waiting job whose client left frees its place
    EXPECT_TRUE(q.submit(greedy({1}, 1), &why));
    q.shutdown(std::chrono::milliseconds(50));  // grace shorter than the jobs: they are cancelled
    JobEnd end;
    drain(*ok[0], &end);
    EXPECT_EQ(end, JobEnd::CANCELLED);
    drain(*ok[1], &end);
    EXPECT_EQ(end, JobEnd::CANCELLED);
    EXPECT_FALSE(q.submit(greedy({1}, 1), &why));
    EXPECT_EQ(why, EngineQueue::Refusal::CLOSED);
}

TEST(EngineQueue, ShutdownLetsShortJobsFinish) {
    Rig r({}, std::chrono::milliseconds(2));
    auto a = r.submit(greedy({3}, 10));
    r.q.shutdown(std::chrono::milliseconds(10000));
    JobEnd end;
    EXPECT_EQ(drain(*a, &end), expected(3, 10));
    EXPECT_EQ(end, JobEnd::LENGTH);
}

// A constraint that allows only even ids below 20 and is done after `n` tokens; it records what the queue told it.
// From its `dead_end`-th mask on it allows no token at all.
class EvenIds : public TokenConstraint {
public:
    explicit EvenIds(int n, int dead_end = -1, std::string why = "") : n_(n), dead_end_(dead_end), why_(std::move(why)) {}
    void fill_mask(uint32_t* w) override {
        w[0] = 0;
        w[1] = 0;
        dead_ = masks++ == dead_end_;
        if (dead_) return;
        for (int v = 0; v < 20; v += 2) w[0] |= 1u << v;
    }
    Status accept(int32_t t) override {
        if (t % 2 || t >= 20) return errorf("token %d is not allowed", t);
        accepted.push_back(t);
        return Status::ok();
    }
    bool done() const override { return int(accepted.size()) >= n_; }
    void set_remaining(int64_t r) override { remaining.push_back(r); }
    std::string failure() const override { return dead_ ? why_ : std::string(); }
    std::vector<int32_t> accepted;
    std::vector<int64_t> remaining;
    int masks = 0;

private:
    int n_, dead_end_;
    std::string why_;
    bool dead_ = false;
};

TEST(EngineQueue, ConstraintMasksEveryTokenAndEndsTheJob) {
    Rig r;
    for (int n : {3, 100}) {
        auto c = std::make_shared<EvenIds>(n);
        JobSpec s = greedy({5}, 6);
        s.sampling.temperature = 1.f;  // a spread: unmasked, odd ids would come up
        s.sampling.seed = 11;
        s.constraint = c;
        auto job = r.submit(s);
        JobEnd end;
        const auto ids = drain(*job, &end);
        EXPECT_EQ(ids, c->accepted);
        EXPECT_EQ(int64_t(ids.size()), std::min<int64_t>(n, 6));
        EXPECT_EQ(end, n == 3 ? JobEnd::COMPLETE : JobEnd::LENGTH);
        ASSERT_EQ(c->remaining.size(), ids.size());
        for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(c->remaining[i], 6 - int64_t(i));
    }
}

// ToyLM with a batch sampler, as a GPU model has: batch_decode_sample() runs the rows' forwards and selects each
// row with a per-slot Sampler (its own stream, seeded by the row's params, restarted by batch_reset), so the queue's
// device path runs here; it counts the rows it selected and the steps whose logits went to the host.
class BatchToyLM : public ToyLM {
public:
    explicit BatchToyLM(std::chrono::milliseconds delay = std::chrono::milliseconds(0)) : ToyLM(delay) {}
    bool has_batch_sampler() const override { return true; }
    Status batch_decode_sample(BatchState& b, const int32_t* slots, const int32_t* tokens, int64_t rows,
                               const SamplingParams* const* params, const std::vector<int32_t>* const* history,
                               int32_t* ids, float* logits, const TokenMaskFn* const* masks) const override {
        const int64_t V = info().vocab_size;
        std::vector<float> l(size_t(rows * V));
        EMBER_TRY(batch_decode(b, slots, tokens, rows, l.data()));
        std::lock_guard<std::mutex> lk(mu);
        std::vector<uint32_t> mask(size_t(token_mask_words(V)));
        for (int64_t r = 0; r < rows; ++r) {
            EMBER_REQUIRE(!history[r]->empty() && history[r]->back() == tokens[r], "history must end with the token");
            auto& smp = samplers[slots[r]];
            if (!smp || smp->params().seed != params[r]->seed) smp = std::make_unique<Sampler>(*params[r]);
            const bool masked = masks && masks[r];
            if (masked) {
                (*masks[r])(mask.data());
                masked_rows++;
            }
            ids[r] = smp->sample(&l[size_t(r * V)], V, *history[r], masked ? mask.data() : nullptr);
            device_rows++;
        }
        if (logits) std::copy(l.begin(), l.end(), logits), host_logit_steps++;
        return Status::ok();
    }
    Status batch_reset(BatchState& b, int64_t slot) const override {
        std::lock_guard<std::mutex> lk(mu);
        samplers.erase(int32_t(slot));
        return ToyLM::batch_reset(b, slot);
    }
    mutable std::mutex mu;
    mutable std::map<int32_t, std::unique_ptr<Sampler>> samplers;
    mutable int device_rows = 0, host_logit_steps = 0, masked_rows = 0;
};

// A constrained row is a device row too: its mask goes to the batch sampler (filled during the step), no logits
// cross to the host.
TEST(EngineQueue, ConstraintRowsAreMaskedInTheBatchSampler) {
    QueueOptions o;
    o.max_seqs = 2;
    RigOf<BatchToyLM> r(o, std::chrono::milliseconds(2));
    auto c = std::make_shared<EvenIds>(100);
    JobSpec cs = greedy({5}, 6);
    cs.sampling.temperature = 1.f;
    cs.constraint = c;
    JobSpec free_row = greedy({7}, 6);
    free_row.sampling.temperature = 1.f;
    free_row.sampling.seed = 3;
    auto a = r.submit(cs);
    auto b = r.submit(free_row);
    JobEnd end;
    const auto ids = drain(*a, &end);
    drain(*b);
    EXPECT_EQ(ids, c->accepted);  // accept() refused any odd id: the job would have failed
    EXPECT_EQ(ids.size(), 6u);
    EXPECT_EQ(end, JobEnd::LENGTH);
    EXPECT_EQ(c->remaining, (std::vector<int64_t>{6, 5, 4, 3, 2, 1}));
    // Both rows' 5 decode steps were selected by the batch sampler, the constrained row's through its mask (its
    // first token came from the prompt's logits on the host); no logits crossed.
    EXPECT_EQ(r.lm.device_rows, 2 * 5);
    EXPECT_EQ(r.lm.masked_rows, 5);
    EXPECT_EQ(r.lm.host_logit_steps, 0);
}

// A device row whose constraint allows no token fails with that reason; the row beside it goes on.
TEST(EngineQueue, ADeviceRowWithNoAllowedTokenFailsAlone) {
    QueueOptions o;
    o.max_seqs = 2;
    RigOf<BatchToyLM> r(o, std::chrono::milliseconds(2));
    auto c = std::make_shared<EvenIds>(100, /*dead_end=*/3);  // masks 0 (prompt), 1, 2 fine; the 4th empty
    JobSpec cs = greedy({5}, 8);
    cs.constraint = c;
    auto a = r.submit(cs);
    auto b = r.submit(greedy({7}, 8));
    JobUpdate u;
    std::vector<int32_t> ids;
    for (;;) {
        ASSERT_TRUE(a->wait(u, std::chrono::milliseconds(5000)));
        for (const auto& t : u.tokens) ids.push_back(t.id);
        if (u.end != JobEnd::RUNNING) break;
    }
    EXPECT_EQ(u.end, JobEnd::FAILED);
    EXPECT_NE(u.error.find("no token of the vocabulary"), std::string::npos) << u.error;
    EXPECT_EQ(ids, c->accepted);
    EXPECT_EQ(ids.size(), 3u);
    JobEnd end;
    EXPECT_EQ(drain(*b, &end), expected(7, 8));
    EXPECT_EQ(end, JobEnd::LENGTH);
}

// A constraint that fails itself (a grammar over the matcher's work bound): the sequence ends with its reason, on
// a device row (BatchToyLM) and on a host row (ToyLM).
template <class LM>
void expect_constraint_failure_reported() {
    QueueOptions o;
    o.max_seqs = 2;
    RigOf<LM> r(o, std::chrono::milliseconds(2));
    auto c = std::make_shared<EvenIds>(100, /*dead_end=*/2, "grammar: one matcher step exceeded its limit");
    JobSpec cs = greedy({5}, 8);
    cs.constraint = c;
    auto a = r.submit(cs);
    JobEnd end;
    std::string error;
    const std::vector<int32_t> ids = drain(*a, &end, nullptr, &error);
    EXPECT_EQ(end, JobEnd::FAILED);
    EXPECT_NE(error.find("structured output: grammar: one matcher step exceeded its limit"), std::string::npos) << error;
    EXPECT_EQ(ids.size(), 2u);
}
TEST(EngineQueue, AConstraintsOwnFailureIsTheErrorOnADeviceRow) { expect_constraint_failure_reported<BatchToyLM>(); }
TEST(EngineQueue, AConstraintsOwnFailureIsTheErrorOnAHostRow) { expect_constraint_failure_reported<ToyLM>(); }

// A sequence's tokens do not depend on what else is in the batch: sampled alone, and among others with other
// seeds and parameters, on the host path (ToyLM) and on the batch-sampler path (BatchToyLM).
template <class LM>
void expect_batch_invariant_sampling() {
    JobSpec solo = greedy({9, 4}, 12);
    solo.sampling.temperature = 1.5f;
    solo.sampling.top_p = 0.9f;
    solo.sampling.repetition_penalty = 1.2f;
    solo.sampling.seed = 42;
    std::vector<int32_t> alone;
    {
        RigOf<LM> r;
        alone = drain(*r.submit(solo));
    }
    if constexpr (std::is_same_v<LM, ToyLM>) {  // the host path is the runtime's generate() loop, token for token
        LM lm;
        Session sess(lm);
        std::vector<int32_t> ref;
        ASSERT_TRUE(sess.generate(solo.prompt, solo.max_tokens, solo.sampling, {}, [&](int32_t id) {
                            ref.push_back(id);
                            return true;
                        }).is_ok());
        EXPECT_EQ(alone, ref);
    }
    QueueOptions o;
    o.max_seqs = 4;
    o.prefill_chunk = 1;
    RigOf<LM> r(o);
    std::vector<std::shared_ptr<Job>> others;
    for (int i = 0; i < 3; ++i) {
        JobSpec x = greedy({int32_t(i), int32_t(2 * i + 1), 3, 4, 5}, 3 + 4 * i);
        x.sampling.temperature = 0.7f + 0.3f * float(i);
        x.sampling.seed = uint64_t(100 + i);
        others.push_back(r.submit(x));
    }
    auto job = r.submit(solo);
    EXPECT_EQ(drain(*job), alone);
    for (auto& o2 : others) drain(*o2);
}

TEST(EngineQueue, SampledSequenceEqualsItsSoloRunHostPath) { expect_batch_invariant_sampling<ToyLM>(); }
TEST(EngineQueue, SampledSequenceEqualsItsSoloRunBatchSampler) { expect_batch_invariant_sampling<BatchToyLM>(); }

TEST(EngineQueue, AFullContextEndsOnlyThatSequence) {
    struct SmallLM : ToyLM {
        SmallLM() { info_small = ToyLM::info(), info_small.max_context = 6; }
        const ModelInfo& info() const override { return info_small; }
        ModelInfo info_small;
    } lm;
    Metrics m;
    QueueOptions o;
    o.max_seqs = 2;
    EngineQueue q(lm, o, m);
    EngineQueue::Refusal why;
    auto longer = q.submit(greedy({1, 2, 3, 4}, 10), &why);
    auto fits = q.submit(greedy({2}, 3), &why);
    JobEnd end_long, end_fits;
    const auto ids = drain(*longer, &end_long);
    EXPECT_EQ(end_long, JobEnd::LENGTH);  // finish_reason "length", as when max_tokens is reached
    EXPECT_EQ(ids.size(), 3u);  // positions 4 and 5 were decoded (tokens 2 and 3); the 4th token found no room
    EXPECT_EQ(drain(*fits, &end_fits), expected(2, 3));
    EXPECT_EQ(end_fits, JobEnd::LENGTH);
}

TEST(EngineQueue, AnEmptyPromptFailsAloneBesideOthers) {
    Rig r;
    auto ok = r.submit(greedy({4}, 5));
    auto empty = r.submit(greedy({}, 5));
    JobEnd end;
    drain(*empty, &end);
    EXPECT_EQ(end, JobEnd::FAILED);
    EXPECT_EQ(drain(*ok, &end), expected(4, 5));
    EXPECT_EQ(end, JobEnd::LENGTH);
}

TEST(Metrics, PrometheusText) {
    Metrics m;
    m.ttft.observe(0.003);
    m.ttft.observe(0.2);
    m.ttft.observe(100);
    m.count_request(Endpoint::CHAT, 200);
    m.count_request(Endpoint::CHAT, 404);
    const std::string t = m.prometheus();
    EXPECT_NE(t.find("ember_time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n"), std::string::npos);
    EXPECT_NE(t.find("ember_time_to_first_token_seconds_bucket{le=\"0.25\"} 2\n"), std::string::npos);
    EXPECT_NE(t.find("ember_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
    EXPECT_NE(t.find("ember_time_to_first_token_seconds_count 3\n"), std::string::npos);
    EXPECT_NE(t.find("ember_requests_total{endpoint=\"chat_completions\",status=\"4xx\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace ember::server
