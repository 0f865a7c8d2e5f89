// queue.h: the engine queue — the only place in the server with threads, mutexes and condition variables.
//
// One worker thread owns the engine (ember::Engine, include/ember/engine.h: one batch pool of max_seqs slots of the
// model) and drives it: requests are submitted as jobs (the engine's SequenceParams); at most max_seqs of them are
// active at once, each a sequence of the engine, and each engine step (a prefill chunk of every job still in its
// prompt, one batched decode step of the others) streams their tokens. Later jobs wait in a FIFO of at most
// max_queued (beyond it submit() refuses: the server answers 503 + Retry-After). A job's consumer reads its tokens
// with Job::wait() and may cancel() it at any time; the worker checks between steps and frees the slot then.
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

#include "ember/engine.h"
#include "models/model.h"
#include "ops/sampling/sampling.h"
#include "runtime/session.h"
#include "server/metrics.h"

namespace ember::server {

// A job is one sequence of the engine (include/ember/engine.h): its parameters, tokens and ends are the engine's.
using JobSpec = SequenceParams;
using JobEnd = SequenceEnd;

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
    void publish(const GeneratedToken* t, JobEnd end, std::string error = "", int64_t cached_tokens = -1);

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

    // Whether the engine could be made (its pool of max_seqs slots); if not, every job fails with this.
    const Status& ready() const { return ready_; }

private:
    struct Active {  // a job the engine runs
        std::shared_ptr<Job> job;
        SequenceId id = 0;
        int64_t selected = 0;  // tokens selected so far (a stop id too)
        bool over = false;     // ended or cancelled: forgotten after this round (a late FAILED still reaches it)
        std::chrono::steady_clock::time_point last_token;
    };
    void run();                                    // the worker
    void admit();                                  // waiting jobs into free slots (mu_ held)
    void on_event(const StepEvent& e);             // a step's news for one job
    void update_metrics();

    QueueOptions opt_;
    Metrics& metrics_;
    mutable std::mutex mu_;
    std::condition_variable cv_;      // work arrived / shutdown
    std::condition_variable idle_cv_; // the worker went idle
    std::deque<std::pair<std::shared_ptr<Job>, JobSpec>> waiting_;
    std::vector<std::shared_ptr<Job>> running_;  // jobs the worker holds (for shutdown's cancel)
    bool closed_ = false, stop_ = false;
    int active_ = 0;
    std::unique_ptr<Engine> engine_;  // null when it could not be made (ready_ says why); worker only after that
    std::vector<Active> active_jobs_;  // the engine's sequences (worker only)
    Status ready_ = Status::ok();
    std::thread worker_;
};

}  // namespace ember::server
