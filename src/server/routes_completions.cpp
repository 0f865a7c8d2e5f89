// routes_completions.cpp: POST /v1/completions — a raw prompt (text or token ids) continued, no template.
#include <memory>

#include "server/server.h"

namespace ember::server {

namespace {
HttpResponse completions(ServerContext& ctx, const HttpRequest& req) {
    ApiError err;
    auto parsed = parse_completion_request(req.body, &err);
    if (!parsed) return error_response(err.status, err.message, err.type, err.param, err.code);
    CompletionRequest& r = parsed.value();
    JobSpec spec;
    HttpResponse error;
    if (!make_job(ctx, r.prompt_is_ids ? r.prompt_ids : encode_prompt(ctx.tok, r.prompt), r.gen, spec, error))
        return error;
    if (!attach_structured(ctx, r.gen, spec, error)) return error;
    auto job = submit_job(ctx, spec, error);
    if (!job) return error;
    ResponseMeta meta{new_id("cmpl-"), ctx.model_id, unix_now()};
    const bool lp = r.gen.top_logprobs >= 0;
    auto offset = std::make_shared<int64_t>(0);  // bytes of text streamed so far (logprobs text_offset)
    ReplyFormat fmt;
    fmt.chunk = [meta, lp, offset](const ReplyDelta* d, bool, const FinishReason* fr) {
        static const ReplyDelta empty;
        ojson j = completion_json(meta, d ? *d : empty, fr, nullptr, lp && d, *offset);
        if (d) for (const auto& t : d->logprobs) *offset += int64_t(t.bytes.size());
        return j;
    };
    fmt.usage_chunk = [meta](const Usage& u) {
        ojson j = completion_json(meta, ReplyDelta{}, nullptr, &u, false, 0);
        j["choices"] = ojson::array();
        return j;
    };
    fmt.whole = [meta, lp](const GenerationResult& g) {
        return completion_json(meta, g.reply, &g.finish, &g.usage, lp, 0);
    };
    return respond(ctx, std::move(job), std::move(spec), std::move(r.gen), false, false, std::move(fmt),
                   req.client_gone);
}
}  // namespace

void add_completion_routes(HttpServer& http, ServerContext& ctx) {
    http.route("POST", "/v1/completions", Endpoint::COMPLETIONS, false,
               [&ctx](const HttpRequest& r) { return completions(ctx, r); });
}

}  // namespace ember::server
