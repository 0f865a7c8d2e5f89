// queue.cpp: the engine worker — admission, round-robin stepping of the active sequences, cancellation, shutdown.
#include "server/queue.h"

#include <algorithm>
#include <cmath>

#include <pthread.h>

#include "ops/sampling/token_mask.h"
#include "runtime/session.h"
#include "server/logprobs.h"

namespace ember::server {

using Clock = std::chrono::steady_clock;

namespace {
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

bool finite_row(const std::vector<float>& l) {
    for (float x : l)
        if (!std::isfinite(x)) return false;
    return true;
}
}  // namespace

// ---- Job: the consumer's side ----

bool Job::wait(JobUpdate& out, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, timeout, [&] { return !pending_.empty() || end_ != JobEnd::RUNNING; })) return false;
    out.tokens.clear();
    out.tokens.swap(pending_);
    out.end = end_;
    out.error = error_;
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

void Job::publish(const GeneratedToken* t, JobEnd end, std::string error) {
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (t) pending_.push_back(*t);
        if (end != JobEnd::RUNNING) end_ = end, error_ = std::move(error);
    }
    cv_.notify_all();
}

// ---- the worker ----

struct EngineQueue::Seq {
    std::shared_ptr<Job> job;
    JobSpec spec;
    Clock::time_point last_token;
    std::unique_ptr<Session> session;
    std::unique_ptr<Sampler> sampler;
    size_t prefilled = 0;
    int32_t last = -1;  // the last generated token, consumed by the next decode step
    int64_t generated = 0;
    std::vector<uint32_t> mask;  // the constraint's mask row
};

EngineQueue::EngineQueue(const CausalLM& model, const QueueOptions& opt, Metrics& metrics)
    : model_(model), opt_(opt), metrics_(metrics) {
    opt_.max_seqs = std::max(1, opt_.max_seqs);
    opt_.max_queued = std::max(0, opt_.max_queued);
    opt_.prefill_chunk = std::max<int64_t>(1, opt_.prefill_chunk);
    metrics_.max_seqs = opt_.max_seqs;
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

void EngineQueue::run() {
    std::vector<std::unique_ptr<Seq>> seqs;
    const ModelInfo& info = model_.info();
    for (;;) {
        {
            std::unique_lock<std::mutex> lk(mu_);
            while (int(seqs.size()) < opt_.max_seqs && !waiting_.empty()) {
                auto [job, spec] = std::move(waiting_.front());
                waiting_.pop_front();
                if (job->cancelled()) {
                    job->publish(nullptr, JobEnd::CANCELLED);
                    metrics_.cancelled++;
                    continue;
                }
                auto s = std::make_unique<Seq>();
                s->job = job;
                s->spec = std::move(spec);
                s->session = std::make_unique<Session>(model_);
                s->sampler = std::make_unique<Sampler>(s->spec.sampling);
                running_.push_back(job);
                seqs.push_back(std::move(s));
            }
            active_ = int(seqs.size());
            metrics_.queue_depth = int64_t(waiting_.size());
            metrics_.active_seqs = active_;
            if (seqs.empty()) {
                metrics_.kv_tokens = metrics_.kv_bytes = metrics_.state_bytes = 0;
                idle_cv_.notify_all();
                if (stop_) return;
                cv_.wait(lk, [&] { return stop_ || !waiting_.empty(); });
                continue;
            }
        }
        int64_t kv = 0;
        for (size_t i = 0; i < seqs.size();) {
            if (!step(*seqs[i])) {
                kv += seqs[i]->session->pos();
                ++i;
                continue;
            }
            std::lock_guard<std::mutex> lk(mu_);
            running_.erase(std::find(running_.begin(), running_.end(), seqs[i]->job));
            seqs.erase(seqs.begin() + long(i));
        }
        metrics_.kv_tokens = kv;
        metrics_.kv_bytes = kv * info.kv_bytes_per_token;
        metrics_.state_bytes = int64_t(seqs.size()) * info.state_bytes;
    }
}

bool EngineQueue::step(Seq& s) {
    const auto t0 = Clock::now();
    const bool done = advance(s);
    metrics_.engine_steps++;
    metrics_.engine_ns += uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
    return done;
}

bool EngineQueue::advance(Seq& s) {
    if (s.job->cancelled()) {
        s.job->publish(nullptr, JobEnd::CANCELLED);
        metrics_.cancelled++;
        return true;
    }
    const auto fail = [&](const std::string& why) {
        s.job->publish(nullptr, JobEnd::FAILED, why);
        return true;
    };
    if (s.prefilled < s.spec.prompt.size()) {
        const size_t n = std::min(size_t(opt_.prefill_chunk), s.spec.prompt.size() - s.prefilled);
        std::vector<int32_t> chunk(s.spec.prompt.begin() + long(s.prefilled), s.spec.prompt.begin() + long(s.prefilled + n));
        auto logits = s.session->prefill(chunk, false, int64_t(n));
        if (!logits) return fail(logits.message());
        s.prefilled += n;
        metrics_.prompt_tokens += n;
        if (s.prefilled < s.spec.prompt.size()) return false;
        if (!finite_row(logits.value())) return fail("the model produced non-finite logits (broken weights?)");
        return sample(s, logits.value());
    }
    if (model_.has_device_sampler() && s.spec.top_logprobs < 0) {  // only the id crosses to the host
        // A constraint's mask is filled on the host while the device runs the forward pass, applied there.
        TokenConstraint* c = s.spec.constraint.get();
        const int64_t remaining = s.spec.max_tokens - s.generated;
        const TokenMaskFn mask = [c, remaining](uint32_t* w) {
            c->set_remaining(remaining);
            c->fill_mask(w);
        };
        auto id = s.session->decode_sample(s.last, s.spec.sampling, c ? &mask : nullptr);
        if (!id) return fail(id.message());
        return emit(s, nullptr, id.value());
    }
    auto logits = s.session->decode(s.last);
    if (!logits) return fail(logits.message());
    if (!finite_row(logits.value())) return fail("the model produced non-finite logits (broken weights?)");
    return sample(s, logits.value());
}

bool EngineQueue::sample(Seq& s, const std::vector<float>& logits) {
    const int64_t V = model_.info().vocab_size;
    const uint32_t* mask = nullptr;
    if (TokenConstraint* c = s.spec.constraint.get()) {
        s.mask.resize(size_t(token_mask_words(V)));
        c->set_remaining(s.spec.max_tokens - s.generated);
        c->fill_mask(s.mask.data());
        if (token_mask_count(s.mask.data(), V) == 0) {
            s.job->publish(nullptr, JobEnd::FAILED, "structured output: no token of the vocabulary can continue the text");
            return true;
        }
        mask = s.mask.data();
    }
    return emit(s, logits.data(), s.sampler->sample(logits.data(), V, s.session->tokens(), mask));
}

bool EngineQueue::emit(Seq& s, const float* logits, int32_t id) {
    const auto now = Clock::now();
    if (s.generated == 0) metrics_.ttft.observe(seconds(now - s.job->submitted_));
    else metrics_.inter_token.observe(seconds(now - s.last_token));
    s.last_token = now;
    s.generated++;
    metrics_.generation_tokens++;
    if (s.spec.constraint) {
        if (Status st = s.spec.constraint->accept(id); !st.is_ok()) {
            s.job->publish(nullptr, JobEnd::FAILED, "structured output: " + st.message());
            return true;
        }
    }
    const auto& stop = s.spec.stop_ids;
    if (std::find(stop.begin(), stop.end(), id) != stop.end()) {
        metrics_.request_duration.observe(seconds(now - s.job->submitted_));
        s.job->publish(nullptr, JobEnd::EOS);
        return true;
    }
    GeneratedToken t;
    t.id = id;
    if (s.spec.top_logprobs >= 0 && logits) {
        auto lp = token_logprobs(logits, model_.info().vocab_size, id, s.spec.top_logprobs);
        t.logprob = lp.first;
        t.top = std::move(lp.second);
    }
    const bool complete = s.spec.constraint && s.spec.constraint->done();
    const bool last = complete || s.generated >= s.spec.max_tokens;
    if (last) metrics_.request_duration.observe(seconds(now - s.job->submitted_));
    s.job->publish(&t, complete ? JobEnd::COMPLETE : last ? JobEnd::LENGTH : JobEnd::RUNNING);
    s.last = id;
    return last;
}

}  // namespace ember::server
