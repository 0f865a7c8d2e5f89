// routes_ui.cpp: GET / — the web chat page (index.html, chat.js, chat.css from src/server/web/, embedded).
#include <cstring>

#include "server/server.h"
#include "server/web_assets.h"

namespace ember::server {

namespace {
const char* mime_type(const char* name) {
    const char* dot = std::strrchr(name, '.');
    if (dot && !std::strcmp(dot, ".html")) return "text/html; charset=utf-8";
    if (dot && !std::strcmp(dot, ".js")) return "text/javascript; charset=utf-8";
    if (dot && !std::strcmp(dot, ".css")) return "text/css; charset=utf-8";
    return "application/octet-stream";
}
}  // namespace

void add_ui_routes(HttpServer& http, ServerContext& ctx) {
    for (size_t i = 0; i < kEmbeddedFileCount; ++i) {
        const EmbeddedFile& f = kEmbeddedFiles[i];
        const std::string name = f.name;
        auto serve = [&f](const HttpRequest&) {
            HttpResponse r;
            r.content_type = mime_type(f.name);
            r.body.assign(reinterpret_cast<const char*>(f.data), f.size);
            r.headers.emplace_back("Cache-Control", "no-cache");
            // The page loads only its own files and talks only to this server.
            r.headers.emplace_back("Content-Security-Policy", "default-src 'self'; connect-src 'self'");
            return r;
        };
        // The page is public like /health: it holds no data; its API calls carry the key the user types.
        http.route("GET", "/" + name, Endpoint::UI, true, serve);
        if (name == "index.html") http.route("GET", "/", Endpoint::UI, true, serve);
    }
}

}  // namespace ember::server
