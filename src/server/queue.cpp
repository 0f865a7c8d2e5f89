// queue.cpp: the engine worker — admission into the batch pool's slots, batched steps of the active sequences
// (a prefill chunk each for those in their prompt, one batched decode step for the rest), cancellation, shutdown.
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

bool finite_row(const float* l, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(l[i])) return false;
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
    int32_t slot = -1;           // its slot of the batch pool
    bool device = false;         // tokens selected on the device (batch_decode_sample), else on the host
    Clock::time_point last_token;
    std::unique_ptr<Sampler> sampler;  // host selection (the first token always; every token of a host row)
    std::vector<int32_t> history;      // prompt + generated tokens (the penalty window)
    size_t prefilled = 0;
    int32_t last = -1;  // the last generated token, consumed by the next decode step
    int64_t generated = 0;
    bool over = false;           // the job has ended (its slot is freed after the step)
    std::vector<uint32_t> mask;  // the constraint's mask row
};

EngineQueue::EngineQueue(const CausalLM& model, const QueueOptions& opt, Metrics& metrics)
    : model_(model), opt_(opt), metrics_(metrics) {
    opt_.max_seqs = std::max(1, opt_.max_seqs);
    opt_.max_queued = std::max(0, opt_.max_queued);
    opt_.prefill_chunk = std::max<int64_t>(1, opt_.prefill_chunk);
    metrics_.max_seqs = opt_.max_seqs;
    auto b = model_.new_batch(opt_.max_seqs);
    if (b) batch_ = std::move(b.value());
    else ready_ = b.status();
    if (opt_.prefix_cache_bytes > 0) {
        cache_ = std::make_unique<PrefixCache>(model_, PrefixCacheOptions{opt_.prefill_chunk, opt_.prefix_cache_bytes});
        if (!cache_->enabled()) cache_.reset();  // the model cannot snapshot its state
    }
    metrics_.prefix_cache_budget_bytes = cache_ ? opt_.prefix_cache_bytes : 0;
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
    std::vector<char> used(size_t(opt_.max_seqs), 0);
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
                if (!batch_) {
                    job->publish(nullptr, JobEnd::FAILED, ready_.message());
                    continue;
                }
                if (spec.prompt.empty()) {  // nothing to continue from (and a row without a token would fail a step)
                    job->publish(nullptr, JobEnd::FAILED, "the prompt has no tokens");
                    continue;
                }
                auto s = std::make_unique<Seq>();
                s->job = job;
                s->spec = std::move(spec);
                s->slot = int32_t(std::find(used.begin(), used.end(), 0) - used.begin());
                used[size_t(s->slot)] = 1;
                s->device = model_.has_batch_sampler() && s->spec.top_logprobs < 0 && !s->spec.constraint;
                s->sampler = std::make_unique<Sampler>(s->spec.sampling);
                s->history = s->spec.prompt;
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
        // One round: a prefill chunk of every sequence still in its prompt, then one batched decode step of all
        // the others (so a long prompt does not stall the streams, and the streams advance together).
        std::vector<Seq*> decoding;
        for (auto& s : seqs) {
            if (s->job->cancelled()) {
                s->job->publish(nullptr, JobEnd::CANCELLED);
                metrics_.cancelled++;
                s->over = true;
            } else if (s->prefilled < s->spec.prompt.size()) {
                timed([&] { prefill_chunk(*s); });
            } else {
                decoding.push_back(s.get());
            }
        }
        if (!decoding.empty()) timed([&] { decode_step(decoding); });
        int64_t kv = 0;
        for (size_t i = 0; i < seqs.size();) {
            Seq& s = *seqs[i];
            if (!s.over) {
                kv += batch_->pos[size_t(s.slot)];
                ++i;
                continue;
            }
            if (Status st = model_.batch_reset(*batch_, s.slot); !st.is_ok())  // the slot is not reused then
                s.job->publish(nullptr, JobEnd::FAILED, st.message());
            else
                used[size_t(s.slot)] = 0;
            std::lock_guard<std::mutex> lk(mu_);
            running_.erase(std::find(running_.begin(), running_.end(), s.job));
            seqs.erase(seqs.begin() + long(i));
        }
        metrics_.kv_tokens = kv;
        metrics_.kv_bytes = kv * model_.info().kv_bytes_per_token;
        metrics_.state_bytes = int64_t(seqs.size()) * model_.info().state_bytes;
    }
}

void EngineQueue::timed(const std::function<void()>& f) {
    const auto t0 = Clock::now();
    f();
    metrics_.engine_steps++;
    metrics_.engine_ns += uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

void EngineQueue::fail(Seq& s, const std::string& why) {
    s.job->publish(nullptr, JobEnd::FAILED, why);
    s.over = true;
}

void EngineQueue::prefill_chunk(Seq& s) {
    if (s.prefilled == 0 && cache_) {  // the deepest cached prefix of the prompt, then the rest chunk by chunk
        auto got = cache_->restore(*batch_, s.slot, s.spec.prompt.data(), int64_t(s.spec.prompt.size()));
        if (!got.is_ok()) return fail(s, got.message());
        s.prefilled = size_t(got.value());
        {
            std::lock_guard<std::mutex> lk(s.job->mu_);
            s.job->cached_tokens_ = got.value();
        }
        metrics_.prompt_tokens += uint64_t(got.value());
        metrics_.prompt_tokens_cached += uint64_t(got.value());
        const PrefixCacheStats st = cache_->stats();
        metrics_.prefix_cache_lookups = st.lookups;
        metrics_.prefix_cache_hits = st.hits;
    }
    const size_t n = std::min(size_t(opt_.prefill_chunk), s.spec.prompt.size() - s.prefilled);
    const bool final = s.prefilled + n == s.spec.prompt.size();
    logits_.resize(size_t(model_.info().vocab_size));
    const Status st =
        model_.batch_prefill(*batch_, s.slot, s.spec.prompt.data() + s.prefilled, int64_t(n), final ? logits_.data() : nullptr);
    if (!st.is_ok()) return fail(s, st.message());
    s.prefilled += n;
    metrics_.prompt_tokens += n;
    checkpoint(s, s.spec.prompt.data());
    if (!final) return;
    if (!finite_row(logits_.data(), model_.info().vocab_size))
        return fail(s, "the model produced non-finite logits (broken weights?)");
    sample(s, logits_.data());
}

void EngineQueue::decode_step(const std::vector<Seq*>& rows_in) {
    const ModelInfo& info = model_.info();
    const int64_t V = info.vocab_size;
    std::vector<Seq*> rows;
    for (Seq* s : rows_in) {  // a full context ends that sequence (as a length limit), not the step
        if (info.max_context > 0 && batch_->pos[size_t(s->slot)] + 1 > info.max_context) {
            metrics_.request_duration.observe(seconds(Clock::now() - s->job->submitted_));
            s->job->publish(nullptr, JobEnd::LENGTH);
            s->over = true;
        } else {
            rows.push_back(s);
        }
    }
    if (rows.empty()) return;
    const int64_t R = int64_t(rows.size());
    std::vector<int32_t> slots(static_cast<size_t>(R)), tokens(static_cast<size_t>(R)), ids(static_cast<size_t>(R), -1);
    bool any_host = false;
    for (int64_t r = 0; r < R; ++r) {
        slots[size_t(r)] = rows[size_t(r)]->slot;
        tokens[size_t(r)] = rows[size_t(r)]->last;
        any_host |= !rows[size_t(r)]->device;
    }
    if (any_host) logits_.resize(size_t(R * V));
    Status st = Status::ok();
    if (model_.has_batch_sampler()) {  // device rows selected there (an all-greedy step is the model's fast path)
        std::vector<const SamplingParams*> params(static_cast<size_t>(R));
        std::vector<const std::vector<int32_t>*> hist(static_cast<size_t>(R));
        for (int64_t r = 0; r < R; ++r) {
            params[size_t(r)] = &rows[size_t(r)]->spec.sampling;
            hist[size_t(r)] = &rows[size_t(r)]->history;
        }
        st = model_.batch_decode_sample(*batch_, slots.data(), tokens.data(), R, params.data(), hist.data(), ids.data(),
                                        any_host ? logits_.data() : nullptr);
    } else {  // every row is a host row
        st = model_.batch_decode(*batch_, slots.data(), tokens.data(), R, logits_.data());
    }
    if (!st.is_ok()) {
        for (Seq* s : rows) fail(*s, st.message());
        return;
    }
    for (int64_t r = 0; r < R; ++r) {
        Seq& s = *rows[size_t(r)];
        // A reply crossing a checkpoint boundary is kept too (the next turn of a chat starts with it).
        if (cache_ && batch_->pos[size_t(s.slot)] % opt_.prefill_chunk == 0) checkpoint(s, s.history.data());
        if (s.over) continue;
        if (s.device) {
            emit(s, nullptr, ids[size_t(r)]);
            continue;
        }
        const float* row = logits_.data() + r * V;
        if (!finite_row(row, V)) {
            fail(s, "the model produced non-finite logits (broken weights?)");
            continue;
        }
        sample(s, row);
    }
}

void EngineQueue::checkpoint(Seq& s, const int32_t* tokens) {
    if (!cache_) return;
    if (Status st = cache_->offer(*batch_, s.slot, tokens); !st.is_ok()) return fail(s, st.message());
    const PrefixCacheStats st = cache_->stats();
    metrics_.prefix_cache_bytes = st.bytes;
    metrics_.prefix_cache_entries = st.entries;
    metrics_.prefix_cache_evicted = st.evicted;
}

void EngineQueue::sample(Seq& s, const float* logits) {
    const int64_t V = model_.info().vocab_size;
    const uint32_t* mask = nullptr;
    if (TokenConstraint* c = s.spec.constraint.get()) {
        s.mask.resize(size_t(token_mask_words(V)));
        c->set_remaining(s.spec.max_tokens - s.generated);
        c->fill_mask(s.mask.data());
        if (token_mask_count(s.mask.data(), V) == 0)
            return fail(s, "structured output: no token of the vocabulary can continue the text");
        mask = s.mask.data();
    }
    emit(s, logits, s.sampler->sample(logits, V, s.history, mask));
}

void EngineQueue::emit(Seq& s, const float* logits, int32_t id) {
    const auto now = Clock::now();
    if (s.generated == 0) metrics_.ttft.observe(seconds(now - s.job->submitted_));
    else metrics_.inter_token.observe(seconds(now - s.last_token));
    s.last_token = now;
    s.generated++;
    metrics_.generation_tokens++;
    if (s.spec.constraint) {
        if (Status st = s.spec.constraint->accept(id); !st.is_ok())
            return fail(s, "structured output: " + st.message());
    }
    const auto& stop = s.spec.stop_ids;
    if (std::find(stop.begin(), stop.end(), id) != stop.end()) {
        metrics_.request_duration.observe(seconds(now - s.job->submitted_));
        s.job->publish(nullptr, JobEnd::EOS);
        s.over = true;
        return;
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
    s.history.push_back(id);
    s.over = last;
}

}  // namespace ember::server
