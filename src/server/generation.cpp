// generation.cpp: what the chat and completions endpoints share — request checks against the model and the
// context, submission, and reading a job through the reply pipeline.
#include <algorithm>
#include <chrono>
#include <optional>
#include <random>

#include "server/grammar_constraint.h"
#include "server/reply_text.h"
#include "server/server.h"
#include "server/sse.h"
#include "server/tool_stream.h"

namespace ember::server {

std::string new_id(const char* prefix) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    return prefix + strfmt("%016llx%08llx", (unsigned long long)rng(), (unsigned long long)(rng() & 0xffffffffu));
}

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool make_job(const ServerContext& ctx, std::vector<int32_t> prompt, const GenerationOptions& gen, JobSpec& job,
              HttpResponse& error) {
    if (!gen.model.empty() && gen.model != ctx.model_id) {
        error = error_response(404, strfmt("the model '%s' does not exist (this server serves '%s')", gen.model.c_str(),
                                           ctx.model_id.c_str()), "invalid_request_error", "model", "model_not_found");
        return false;
    }
    if (prompt.empty()) {
        error = error_response(400, "the prompt is empty (it encodes to no tokens)", "invalid_request_error", "prompt");
        return false;
    }
    const int64_t vocab = ctx.model.info().vocab_size;
    for (int32_t id : prompt)
        if (id < 0 || id >= vocab) {
            error = error_response(400, strfmt("token id %d is outside the vocabulary [0, %lld)", id, (long long)vocab),
                                   "invalid_request_error", "prompt");
            return false;
        }
    const int64_t n = int64_t(prompt.size());
    const int64_t max_tokens = gen.max_tokens ? *gen.max_tokens : ctx.ctx - n;
    if (n >= ctx.ctx || n + max_tokens > ctx.ctx) {
        error = error_response(400, strfmt("This model's maximum context length is %lld tokens. However, you requested "
                                           "%lld tokens (%lld in the prompt, %lld for the completion). Please reduce "
                                           "the prompt or max_tokens.", (long long)ctx.ctx, (long long)(n + std::max<int64_t>(max_tokens, 0)),
                                           (long long)n, (long long)std::max<int64_t>(max_tokens, 0)),
                               "invalid_request_error", gen.max_tokens ? "max_tokens" : "messages",
                               "context_length_exceeded");
        return false;
    }
    job.prompt = std::move(prompt);
    job.max_tokens = max_tokens;
    job.sampling = gen.sampling;
    if (!gen.seed_given) job.sampling.seed = std::random_device{}() * 0x100000001ull ^ std::random_device{}();
    if (!gen.ignore_eos) job.stop_ids = ctx.tok.eos_ids();
    job.top_logprobs = gen.top_logprobs;
    return true;
}

bool attach_structured(ServerContext& ctx, const GenerationOptions& gen, JobSpec& spec, HttpResponse& error,
                       bool after_reasoning) {
    auto c = structured_constraint(ctx.grammars, gen.structured, after_reasoning);
    if (!c) {
        error = error_response(400, "invalid structured output request: " + c.message(), "invalid_request_error",
                               gen.structured.contains("grammar") ? "grammar" : gen.structured.contains("json_schema")
                                   ? "json_schema" : "response_format", "invalid_grammar");
        return false;
    }
    if (c.value()) spec.constraint = std::move(c.value());
    return true;
}

std::shared_ptr<Job> submit_job(ServerContext& ctx, JobSpec job, HttpResponse& error) {
    EngineQueue::Refusal why;
    auto j = ctx.queue.submit(std::move(job), &why);
    if (j) return j;
    if (why == EngineQueue::Refusal::FULL) {
        error = error_response(503, "the server is busy: every sequence slot and queue place is taken; retry later",
                               "server_busy", "", "queue_full");
        error.headers.emplace_back("Retry-After", std::to_string(ctx.retry_after_s));
    } else {
        error = error_response(503, "the server is shutting down", "server_busy", "", "shutting_down");
    }
    return nullptr;
}

namespace {
TokenLogprob make_logprob(const Tokenizer& tok, const GeneratedToken& t, bool as_ids) {
    auto name = [&](int32_t id) { return as_ids ? strfmt("token_id:%d", id) : tok.decode({id}); };
    TokenLogprob lp;
    lp.bytes = tok.token_bytes(t.id);
    lp.token = name(t.id);
    lp.logprob = t.logprob;
    for (const auto& [id, l] : t.top) lp.top.push_back({name(id), tok.token_bytes(id), l});
    return lp;
}

void append(ReplyDelta& all, const ReplyDelta& d) {
    all.content += d.content;
    all.reasoning += d.reasoning;
    all.logprobs.insert(all.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
}
}  // namespace

GenerationResult run_generation(ServerContext& ctx, Job& job, const JobSpec& spec, const GenerationOptions& gen,
                                bool reasoning, bool start_in_reasoning,
                                const std::function<bool(const ReplyDelta&)>& on_delta,
                                const std::function<bool()>& keepalive,
                                const std::function<bool()>& client_gone) {
    GenerationResult r;
    r.usage.prompt_tokens = int64_t(spec.prompt.size());
    ReplyText text(ctx.tok, gen.stop, reasoning, start_in_reasoning);
    std::optional<ToolStream> tools;
    if (gen.tool_syntax) tools.emplace(*gen.tool_syntax, gen.tools, new_id("call_") + "_");
    const bool with_logprobs = gen.top_logprobs >= 0;
    // How the reply ended: a grammar closed early (out of tokens) reads as "length", a reply with tool calls as
    // "tool_calls".
    const auto* grammar = dynamic_cast<const GrammarConstraint*>(spec.constraint.get());
    const auto end = [&](FinishReason fr) {
        if (grammar && grammar->cut()) fr = FinishReason::LENGTH;
        if (tools) {
            for (const auto& c : tools->calls()) r.reply.tool_calls.push_back(c);
            if (fr == FinishReason::STOP && !tools->calls().empty()) fr = FinishReason::TOOL_CALLS;
        }
        r.finish = fr;
        return r;
    };
    JobUpdate u;
    for (;;) {
        const bool got = job.wait(u, std::chrono::milliseconds(1000));
        r.usage.cached_tokens = u.cached_tokens;
        if (client_gone && u.end == JobEnd::RUNNING && client_gone()) {
            job.cancel();
            r.cancelled = true;
            return r;
        }
        if (!got) {
            if (keepalive && !keepalive()) {
                job.cancel();
                r.cancelled = true;
                return r;
            }
            continue;
        }
        ReplyDelta d;
        bool stopped = false;
        for (const auto& t : u.tokens) {
            r.usage.completion_tokens++;
            text.push(t.id, d);
            if (with_logprobs) d.logprobs.push_back(make_logprob(ctx.tok, t, gen.tokens_as_ids));
            if ((stopped = text.stopped())) break;
        }
        if (stopped) job.cancel();  // the worker drops it at its next step
        else if (u.end != JobEnd::RUNNING) text.finish(d);
        if (tools) {
            if (stopped || u.end != JobEnd::RUNNING) tools->finish(d);
            else tools->push(d);
        }
        if (u.end == JobEnd::EOS && !stopped) r.usage.completion_tokens++;  // the end-of-sequence token
        const bool any = !d.content.empty() || !d.reasoning.empty() || !d.logprobs.empty() || !d.tool_calls.empty();
        if (any) {
            append(r.reply, d);
            if (on_delta && !on_delta(d)) {
                job.cancel();
                r.cancelled = true;
                return r;
            }
        }
        if (stopped || u.end == JobEnd::EOS || u.end == JobEnd::COMPLETE) return end(FinishReason::STOP);
        if (u.end == JobEnd::LENGTH) return end(FinishReason::LENGTH);
        if (u.end == JobEnd::CANCELLED) return r.cancelled = true, r;
        if (u.end == JobEnd::FAILED) return r.error = u.error, r;
    }
}

HttpResponse respond(ServerContext& ctx, std::shared_ptr<Job> job, JobSpec spec, GenerationOptions gen,
                     bool reasoning, bool start_in_reasoning, ReplyFormat fmt,
                     const std::function<bool()>& client_gone) {
    HttpResponse res;
    if (!gen.stream) {
        bool gone = false;
        const auto left = [&] { return gone = client_gone && client_gone(); };
        GenerationResult r = run_generation(ctx, *job, spec, gen, reasoning, start_in_reasoning, nullptr, nullptr, left);
        if (!r.error.empty()) return error_response(500, "generation failed: " + r.error, "server_error");
        // Nobody reads this answer; 499 (nginx's "client closed request") keeps it apart in /metrics.
        if (gone) return error_response(499, "the client closed the connection before the reply was complete");
        if (r.cancelled) return error_response(503, "the server shut down before the reply was complete", "server_busy");
        res.body = dump_json(fmt.whole(r));
        return res;
    }
    res.content_type = kSseContentType;
    res.headers.emplace_back("Cache-Control", "no-cache");
    res.headers.emplace_back("X-Accel-Buffering", "no");
    res.stream = [&ctx, job, spec = std::move(spec), gen = std::move(gen), reasoning, start_in_reasoning,
                  fmt = std::move(fmt)](const BodyWriter& write) {
        bool first = true;
        auto on_delta = [&](const ReplyDelta& d) {
            const bool ok = write(sse_data(fmt.chunk(&d, first, nullptr)));
            first = false;
            return ok;
        };
        auto keepalive = [&] { return write(sse_keepalive()); };
        GenerationResult r = run_generation(ctx, *job, spec, gen, reasoning, start_in_reasoning, on_delta, keepalive);
        if (r.cancelled || !r.error.empty()) {  // client gone (the writes fail harmlessly), shutdown, engine failure
            ApiError e;
            e.status = r.cancelled ? 503 : 500;
            e.type = r.cancelled ? "server_busy" : "server_error";
            e.message = r.cancelled ? "the reply was cancelled (server shutting down)" : "generation failed: " + r.error;
            if (write("data: " + error_body(e) + "\n\n")) write(sse_done());
            return;
        }
        if (!write(sse_data(fmt.chunk(nullptr, first, &r.finish)))) return;
        if (gen.include_usage && !write(sse_data(fmt.usage_chunk(r.usage)))) return;
        write(sse_done());
    };
    return res;
}

}  // namespace ember::server
