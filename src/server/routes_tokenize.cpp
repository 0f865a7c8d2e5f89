// routes_tokenize.cpp: POST /tokenize (a prompt, or messages through the chat template) and POST /detokenize,
// in vLLM's request / response shapes.
#include "server/server.h"

namespace ember::server {

namespace {
bool wrong_model(const ServerContext& ctx, const std::string& model, HttpResponse& error) {
    if (model.empty() || model == ctx.model_id) return false;
    error = error_response(404, strfmt("the model '%s' does not exist", model.c_str()), "invalid_request_error",
                           "model", "model_not_found");
    return true;
}

HttpResponse tokenize(ServerContext& ctx, const HttpRequest& req) {
    ApiError err;
    auto parsed = parse_tokenize_request(req.body, &err);
    if (!parsed) return error_response(err.status, err.message, err.type, err.param, err.code);
    const TokenizeRequest& r = parsed.value();
    HttpResponse res;
    if (wrong_model(ctx, r.model, res)) return res;
    std::vector<int32_t> ids;
    if (r.chat) {
        auto text = ctx.chat.render(r.messages.messages, r.messages.add_generation_prompt, r.messages.template_kwargs);
        if (!text) return error_response(400, "the chat template failed on these messages: " + text.message(),
                                         "invalid_request_error", "messages", "chat_template_error");
        ids = r.add_special ? encode_prompt(ctx.tok, text.value()) : ctx.tok.encode(text.value(), false, true);
    } else {
        ids = r.add_special ? encode_prompt(ctx.tok, r.prompt) : ctx.tok.encode(r.prompt, false, true);
    }
    res.body = dump_json({{"tokens", ids}, {"count", ids.size()}, {"max_model_len", ctx.ctx}});
    return res;
}

HttpResponse detokenize(ServerContext& ctx, const HttpRequest& req) {
    ApiError err;
    auto parsed = parse_detokenize_request(req.body, &err);
    if (!parsed) return error_response(err.status, err.message, err.type, err.param, err.code);
    HttpResponse res;
    if (wrong_model(ctx, parsed->model, res)) return res;
    const int64_t vocab = ctx.tok.vocab_size();
    for (int32_t id : parsed->tokens)
        if (id >= vocab)
            return error_response(400, strfmt("token id %d is outside the vocabulary [0, %lld)", id, (long long)vocab),
                                  "invalid_request_error", "tokens");
    res.body = dump_json({{"prompt", ctx.tok.decode(parsed->tokens)}});
    return res;
}
}  // namespace

void add_tokenize_routes(HttpServer& http, ServerContext& ctx) {
    http.route("POST", "/tokenize", Endpoint::TOKENIZE, false, [&ctx](const HttpRequest& r) { return tokenize(ctx, r); });
    http.route("POST", "/detokenize", Endpoint::DETOKENIZE, false,
               [&ctx](const HttpRequest& r) { return detokenize(ctx, r); });
}

}  // namespace ember::server
