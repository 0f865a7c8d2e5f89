// queue.cpp: the engine worker — admission of waiting jobs into the engine's free slots, one engine step per round
// (include/ember/engine.h: prefill chunks and one batched decode step), each step's tokens and ends published to
// the jobs' consumers, cancellation, shutdown, the metrics.
#include "server/queue.h"

#include <algorithm>

#include <pthread.h>

#include "runtime/engine_impl.h"

namespace ember::server {

using Clock = std::chrono::steady_clock;

namespace {
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

// ---- Job: the consumer's side ----

bool Job::wait(JobUpdate& out, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, timeout, [&] { return !pending_.empty() || end_ != JobEnd::RUNNING; })) return false;
    out.tokens.clear();
    out.tokens.swap(pending_);
    out.end = end_;
    out.error = error_;
    out.cached_tokens = cached_tokens_;
    return true;
}

void Job::cancel() {
    std::lock_guard<std::mutex> lk(mu_);
    cancelled_ = true;
}

bool Job::cancelled() const {
    std::lock_guard<std::mutex> lk(mu_);
    return cancelled_;
}

void Job::publish(const GeneratedToken* t, JobEnd end, std::string error, int64_t cached_tokens) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (t) pending_.push_back(*t);
        if (cached_tokens >= 0) cached_tokens_ = cached_tokens;
        if (end != JobEnd::RUNNING) end_ = end, error_ = std::move(error);
    }
    cv_.notify_all();
}

// ---- the worker ----

EngineQueue::EngineQueue(const CausalLM& model, const QueueOptions& opt, Metrics& metrics)
    : opt_(opt), metrics_(metrics) {
    opt_.max_seqs = std::max(1, opt_.max_seqs);
    opt_.max_queued = std::max(0, opt_.max_queued);
    opt_.prefill_chunk = std::max<int64_t>(1, opt_.prefill_chunk);
    metrics_.max_seqs = opt_.max_seqs;
    EngineOptions eo;
    eo.max_sequences = opt_.max_seqs;
    eo.prefill_chunk = opt_.prefill_chunk;
    eo.prefix_cache_bytes = std::max<int64_t>(0, opt_.prefix_cache_bytes);
    auto e = make_engine(model, eo);
    if (e) engine_ = std::make_unique<Engine>(std::move(e.value()));
    else ready_ = e.status();
    metrics_.prefix_cache_budget_bytes = engine_ ? engine_->stats().prefix_cache_budget_bytes : 0;
    worker_ = std::thread([this] { run(); });
    pthread_setname_np(worker_.native_handle(), "ember-engine");  // bench/server_load.py tells its CPU time apart
}

EngineQueue::~EngineQueue() {
    if (worker_.joinable()) shutdown(std::chrono::milliseconds(0));
}

std::shared_ptr<Job> EngineQueue::submit(JobSpec spec, Refusal* why) {
    std::lock_guard<std::mutex> lk(mu_);
    if (closed_) return *why = Refusal::CLOSED, nullptr;
    // Jobs whose client left while they waited free their place now.
    for (auto it = waiting_.begin(); it != waiting_.end();)
        if (it->first->cancelled()) {
            it->first->publish(nullptr, JobEnd::CANCELLED);
            metrics_.cancelled++;
            it = waiting_.erase(it);
        } else {
            ++it;
        }
    if (active_ + int(waiting_.size()) >= opt_.max_seqs + opt_.max_queued) {
        metrics_.rejected_full++;
        return *why = Refusal::FULL, nullptr;
    }
    auto job = std::make_shared<Job>();
    job->submitted_ = Clock::now();
    waiting_.emplace_back(job, std::move(spec));
    metrics_.queue_depth = int64_t(waiting_.size());
    *why = Refusal::NONE;
    cv_.notify_one();
    return job;
}

int EngineQueue::active() const {
    std::lock_guard<std::mutex> lk(mu_);
    return active_;
}

int EngineQueue::queued() const {
    std::lock_guard<std::mutex> lk(mu_);
    return int(waiting_.size());
}

void EngineQueue::shutdown(std::chrono::milliseconds grace) {
    std::unique_lock<std::mutex> lk(mu_);
    closed_ = true;
    idle_cv_.wait_for(lk, grace, [&] { return waiting_.empty() && active_ == 0; });
    for (auto& w : waiting_) w.first->cancel();
    for (auto& j : running_) j->cancel();
    stop_ = true;
    cv_.notify_all();
    lk.unlock();
    if (worker_.joinable()) worker_.join();
}

void EngineQueue::admit() {
    while (!waiting_.empty() && (!engine_ || engine_->free_slots() > 0)) {
        auto [job, spec] = std::move(waiting_.front());
        waiting_.pop_front();
        if (job->cancelled()) {
            job->publish(nullptr, JobEnd::CANCELLED);
            metrics_.cancelled++;
            continue;
        }
        if (!engine_) {
            job->publish(nullptr, JobEnd::FAILED, ready_.message());
            continue;
        }
        auto id = engine_->add(std::move(spec));
        if (!id) {  // a request the engine refuses (no prompt, ...) fails alone
            job->publish(nullptr, JobEnd::FAILED, id.message());
            continue;
        }
        running_.push_back(job);
        Active a;
        a.job = job;
        a.id = id.value();
        active_jobs_.push_back(std::move(a));
    }
}

void EngineQueue::run() {
    for (;;) {
        {
            std::unique_lock<std::mutex> lk(mu_);
            admit();
            active_ = int(active_jobs_.size());
            metrics_.queue_depth = int64_t(waiting_.size());
            metrics_.active_seqs = active_;
            if (active_jobs_.empty()) {
                metrics_.kv_tokens = metrics_.kv_bytes = metrics_.state_bytes = 0;
                idle_cv_.notify_all();
                if (stop_) return;
                cv_.wait(lk, [&] { return stop_ || !waiting_.empty(); });
                continue;
            }
        }
        // Jobs whose consumer left stop now (their slot is free for the next round's admission).
        for (Active& a : active_jobs_)
            if (a.job->cancelled()) {
                (void)engine_->cancel(a.id);  // the engine holds it: cannot fail
                a.job->publish(nullptr, JobEnd::CANCELLED);
                metrics_.cancelled++;
                a.over = true;
            }
        engine_->step([this](const StepEvent& e) { on_event(e); });
        update_metrics();
        std::lock_guard<std::mutex> lk(mu_);
        for (size_t i = 0; i < active_jobs_.size();) {
            if (!active_jobs_[i].over) {
                ++i;
                continue;
            }
            running_.erase(std::find(running_.begin(), running_.end(), active_jobs_[i].job));
            active_jobs_.erase(active_jobs_.begin() + long(i));
        }
    }
}

void EngineQueue::on_event(const StepEvent& e) {
    auto it = std::find_if(active_jobs_.begin(), active_jobs_.end(), [&](const Active& a) { return a.id == e.id; });
    if (it == active_jobs_.end()) return;
    Active& a = *it;
    const auto now = Clock::now();
    if (e.has_token || e.end == JobEnd::EOS) {  // a selection (a stop id too)
        if (a.selected++ == 0) metrics_.ttft.observe(seconds(now - a.job->submitted_));
        else metrics_.inter_token.observe(seconds(now - a.last_token));
        a.last_token = now;
    }
    if (e.end == JobEnd::EOS || e.end == JobEnd::LENGTH || e.end == JobEnd::COMPLETE)
        metrics_.request_duration.observe(seconds(now - a.job->submitted_));
    update_metrics();  // the counters include this event before its consumer sees it
    a.job->publish(e.has_token ? &e.token : nullptr, e.end, e.error, e.cached_tokens);
    if (e.end != JobEnd::RUNNING) a.over = true;  // the engine frees its slot at the end of the step
}

void EngineQueue::update_metrics() {
    const EngineStats st = engine_->stats();
    metrics_.engine_steps = uint64_t(st.model_calls);
    metrics_.engine_ns = uint64_t(st.model_ns);
    metrics_.prompt_tokens = uint64_t(st.prompt_tokens);
    metrics_.prompt_tokens_cached = uint64_t(st.cached_prompt_tokens);
    metrics_.generation_tokens = uint64_t(st.generated_tokens);
    metrics_.kv_waits = uint64_t(st.kv_waits);
    metrics_.preemptions = uint64_t(st.preemptions);
    metrics_.recomputed_tokens = uint64_t(st.recomputed_tokens);
    metrics_.prefix_cache_lookups = st.prefix_cache_lookups;
    metrics_.prefix_cache_hits = st.prefix_cache_hits;
    metrics_.prefix_cache_evicted = st.prefix_cache_evicted;
    metrics_.prefix_cache_entries = st.prefix_cache_entries;
    metrics_.prefix_cache_bytes = st.prefix_cache_bytes;
    metrics_.kv_tokens = st.kv_tokens;
    metrics_.kv_bytes = st.kv_bytes;
    metrics_.state_bytes = st.state_bytes;
}

}  // namespace ember::server
