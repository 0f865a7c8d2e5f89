// routes_chat.cpp: POST /v1/chat/completions — messages rendered with the model's chat template, replies split
// into reasoning_content and content when the template thinks in <think> blocks; tools rendered by the template and
// tool calls parsed out of the reply in the template's format (under the tool-call grammar), or the reply under the
// response_format / grammar constraint.
#include "server/reply_text.h"
#include "server/server.h"

namespace ember::server {

namespace {
HttpResponse chat_completions(ServerContext& ctx, const HttpRequest& req) {
    ApiError err;
    auto parsed = parse_chat_request(req.body, &err);
    if (!parsed) return error_response(err.status, err.message, err.type, err.param, err.code);
    ChatRequest& r = parsed.value();
    const bool with_tools = r.tool_choice.kind != grammar::ToolChoice::NONE;
    if (with_tools) {
        auto fmt = template_tool_format(ctx.chat.tools_source());
        if (!fmt) return error_response(400, "tools are not supported with this model: " + fmt.message(),
                                        "invalid_request_error", "tools", "unsupported_parameter");
        r.gen.tool_syntax = fmt.value();
        r.gen.tools = r.tools;
    }
    auto text = ctx.chat.render(r.messages, r.add_generation_prompt, r.template_kwargs,
                                with_tools ? r.tools : ojson());
    if (!text) return error_response(400, "the chat template failed on these messages: " + text.message(),
                                     "invalid_request_error", "messages", "chat_template_error");
    const bool thinking = ctx.chat.reasoning() && prompt_opens_reasoning(text.value());
    JobSpec spec;
    HttpResponse error;
    if (!make_job(ctx, encode_prompt(ctx.tok, text.value()), r.gen, spec, error)) return error;
    if (with_tools) {
        auto g = tool_constraint(ctx.grammars, r.tools, r.tool_choice, *r.gen.tool_syntax, r.parallel_tool_calls,
                                 thinking);
        if (!g) return error_response(400, "invalid tools: " + g.message(), "invalid_request_error", "tools",
                                      "invalid_grammar");
        spec.constraint = std::move(g.value());
    } else if (!attach_structured(ctx, r.gen, spec, error, thinking)) {
        return error;
    }
    auto job = submit_job(ctx, spec, error);
    if (!job) return error;
    ResponseMeta meta{new_id("chatcmpl-"), ctx.model_id, unix_now()};
    const bool lp = r.gen.top_logprobs >= 0;
    ReplyFormat fmt;
    fmt.chunk = [meta, lp](const ReplyDelta* d, bool first, const FinishReason* fr) {
        return chat_chunk_json(meta, d, first, fr, lp);
    };
    fmt.usage_chunk = [meta](const Usage& u) { return chat_usage_chunk_json(meta, u); };
    fmt.whole = [meta, lp](const GenerationResult& g) { return chat_completion_json(meta, g.reply, g.finish, g.usage, lp); };
    return respond(ctx, std::move(job), std::move(spec), std::move(r.gen), ctx.chat.reasoning(), thinking,
                   std::move(fmt), req.client_gone);
}
}  // namespace

void add_chat_routes(HttpServer& http, ServerContext& ctx) {
    http.route("POST", "/v1/chat/completions", Endpoint::CHAT, false,
               [&ctx](const HttpRequest& r) { return chat_completions(ctx, r); });
}

}  // namespace ember::server
