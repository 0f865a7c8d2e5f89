// routes_metrics.cpp: GET /metrics — Prometheus text exposition (metrics.h).
#include "server/server.h"

namespace ember::server {

void add_metrics_routes(HttpServer& http, ServerContext& ctx) {
    http.route("GET", "/metrics", Endpoint::METRICS, false, [&ctx](const HttpRequest&) {
        HttpResponse r;
        r.content_type = "text/plain; version=0.0.4";
        r.body = ctx.metrics.prometheus();
        return r;
    });
}

}  // namespace ember::server
