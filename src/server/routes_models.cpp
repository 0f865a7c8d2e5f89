// routes_models.cpp: GET /v1/models, GET /v1/models/{id}, GET /health.
#include "server/server.h"

namespace ember::server {

namespace {
ojson model_card(const ServerContext& ctx) {
    const ModelInfo& i = ctx.model.info();
    return {{"id", ctx.model_id},       {"object", "model"},         {"created", ctx.created},
            {"owned_by", "ember"},      {"max_model_len", ctx.ctx},  {"architecture", i.architecture},
            {"weight_format", i.weight_format}};
}
}  // namespace

void add_model_routes(HttpServer& http, ServerContext& ctx) {
    http.route("GET", "/v1/models", Endpoint::MODELS, false, [&ctx](const HttpRequest&) {
        HttpResponse r;
        r.body = dump_json({{"object", "list"}, {"data", ojson::array({model_card(ctx)})}});
        return r;
    });
    http.route("GET", "/v1/models/" + ctx.model_id, Endpoint::MODELS, false, [&ctx](const HttpRequest&) {
        HttpResponse r;
        r.body = dump_json(model_card(ctx));
        return r;
    });
    http.route("GET", "/health", Endpoint::HEALTH, true, [&ctx](const HttpRequest&) {
        HttpResponse r;
        r.body = dump_json({{"status", "ok"}, {"active", ctx.queue.active()}, {"queued", ctx.queue.queued()}});
        return r;
    });
}

}  // namespace ember::server
