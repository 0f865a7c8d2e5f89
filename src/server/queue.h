// queue.h: the engine queue — the only place in the server with threads, mutexes and condition variables.
//
// One worker thread owns the model and one batch pool of max_seqs slots (CausalLM::new_batch). Requests are
// submitted as jobs (prompt ids, sampling, limits); at most max_seqs of them are active at once, each in a slot.
// Each round of the worker runs a prefill chunk of every job still in its prompt, then one batched decode step of
// all the others (CUDA: one graph launch; each row sampled with its own parameters and seed — on the device when
// the model has a batch sampler and the job needs neither logprobs nor a grammar mask, else on the host from the
// row's logits). So up to max_seqs replies stream at the same time; later jobs wait in a FIFO of at most
// max_queued (beyond it submit() refuses: the server answers 503 + Retry-After). A job's consumer reads its tokens
// with Job::wait() and may cancel() it at any time; the worker checks between rounds and frees the slot then.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "models/model.h"
#include "ops/sampling/sampling.h"
#include "runtime/prefix_cache.h"
#include "runtime/session.h"
#include "server/metrics.h"

namespace ember::server {

struct JobSpec {
    std::vector<int32_t> prompt;   // token ids, each in [0, vocab)
    int64_t max_tokens = 16;       // ≥ 1
    SamplingParams sampling;
    std::vector<int32_t> stop_ids;  // end-of-sequence ids: generation stops there (the id is not emitted)
    int top_logprobs = -1;          // −1: none (device sampling allowed); ≥ 0: logprobs from the host logits
    // Structured output (a grammar matcher): every token is sampled under its mask (on a device sampler the mask is
    // filled while the forward pass runs); the job ends when it is done(). Used by the worker only while the job
    // runs.
    std::shared_ptr<TokenConstraint> constraint;
};

struct GeneratedToken {
    int32_t id = 0;
    float logprob = 0;                            // when JobSpec::top_logprobs ≥ 0
    std::vector<std::pair<int32_t, float>> top;   // the top_logprobs most likely (id, logprob), most likely first
};

// EOS: an end-of-sequence token (not emitted); COMPLETE: the constraint allows nothing more after the last token.
enum class JobEnd { RUNNING, EOS, COMPLETE, LENGTH, CANCELLED, FAILED };

struct JobUpdate {
    std::vector<GeneratedToken> tokens;  // new since the last wait()
    JobEnd end = JobEnd::RUNNING;        // set once the job is over (after its last tokens)
    std::string error;                   // FAILED: why
    int64_t cached_tokens = 0;           // prompt tokens restored from the prefix cache (known once prefilled)
};

class Job {
public:
    // Waits until there are new tokens or the job has ended, at most `timeout`; moves them into `out` (replacing
    // its tokens). Returns false on a timeout with nothing new.
    bool wait(JobUpdate& out, std::chrono::milliseconds timeout);
    void cancel();  // the worker stops this job at its next step (or drops it from the queue)
    bool cancelled() const;

private:
    friend class EngineQueue;
    void publish(const GeneratedToken* t, JobEnd end, std::string error = "");

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<GeneratedToken> pending_;
    JobEnd end_ = JobEnd::RUNNING;
    std::string error_;
    int64_t cached_tokens_ = 0;
    bool cancelled_ = false;
    std::chrono::steady_clock::time_point submitted_;
};

struct QueueOptions {
    int max_seqs = 4;             // sequences advanced together
    int max_queued = 64;          // jobs waiting beyond those
    int64_t prefill_chunk = 256;  // prompt tokens per prefill step (long prompts do not stall the others)
    // Host memory of the exact prefix cache (runtime/prefix_cache.h; checkpoints every prefill_chunk tokens of a
    // prompt or a reply); 0 = off. A prompt starting with a cached prefix is computed from its deepest checkpoint.
    int64_t prefix_cache_bytes = 0;
};

class EngineQueue {
public:
    EngineQueue(const CausalLM& model, const QueueOptions& opt, Metrics& metrics);
    ~EngineQueue();  // cancels what is left and joins the worker

    enum class Refusal { NONE, FULL, CLOSED };
    // The job, or nullptr with *why set (FULL: max_queued jobs already wait; CLOSED: shutting down).
    std::shared_ptr<Job> submit(JobSpec spec, Refusal* why);
    // Stop accepting; let active and queued jobs finish for up to `grace`, then cancel the rest; join the worker.
    void shutdown(std::chrono::milliseconds grace);
    int active() const;
    int queued() const;

    // Whether the batch pool could be made (CausalLM::new_batch(max_seqs)); if not, every job fails with this.
    const Status& ready() const { return ready_; }

private:
    struct Seq;
    void run();                                   // the worker
    void timed(const std::function<void()>& f);   // one model call, counted in the metrics
    void fail(Seq& s, const std::string& why);
    void prefill_chunk(Seq& s);                   // the next chunk of s's prompt (the last one samples a token)
    void decode_step(const std::vector<Seq*>& rows);  // one batched step: a token for each of these sequences
    void sample(Seq& s, const float* logits);     // a host selection (masked by the constraint)
    void emit(Seq& s, const float* logits, int32_t id);
    void checkpoint(Seq& s, const int32_t* tokens);  // offers the slot's state to the prefix cache

    const CausalLM& model_;
    QueueOptions opt_;
    Metrics& metrics_;
    mutable std::mutex mu_;
    std::condition_variable cv_;      // work arrived / shutdown
    std::condition_variable idle_cv_; // the worker went idle
    std::deque<std::pair<std::shared_ptr<Job>, JobSpec>> waiting_;
    std::vector<std::shared_ptr<Job>> running_;  // jobs the worker holds (for shutdown's cancel)
    bool closed_ = false, stop_ = false;
    int active_ = 0;
    std::unique_ptr<BatchState> batch_;  // the sequences' states: slot i of the pool per active job
    std::unique_ptr<PrefixCache> cache_;  // null when off (worker only)
    Status ready_ = Status::ok();
    std::vector<float> logits_;          // the host rows' logits of a step [rows, vocab] (worker only)
    std::thread worker_;
};

}  // namespace ember::server
