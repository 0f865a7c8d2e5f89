// http.h: the HTTP transport (cpp-httplib, Debian libcpp-httplib-dev) behind plain structs, so that the endpoints
// never see the library: routes, bearer-key check, bounded thread pool, streamed (chunked) bodies, and the limits
// on requests: every connection is read through http_conn.h (a deadline per request, bounded head and body), and
// what can be refused before a body is read is (404, 405, 401, 411, 413, 415), all with JSON error bodies.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "server/metrics.h"

namespace ember::server {

struct HttpRequest {
    std::string method, path, body;
    std::map<std::string, std::string> headers;  // names lower-cased (the first value of each)
    // true once the client has closed its connection (checked without blocking); empty when unknown.
    std::function<bool()> client_gone;
    std::string header(const std::string& lower_name) const {
        auto it = headers.find(lower_name);
        return it == headers.end() ? "" : it->second;
    }
};

// A streamed body: `write` sends bytes now and returns false once the client is gone.
using BodyWriter = std::function<bool(std::string_view)>;

struct HttpResponse {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    std::function<void(const BodyWriter&)> stream;  // set: the body is produced by this, chunked, on the HTTP thread
};

using Handler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpOptions {
    std::string host = "127.0.0.1";
    int port = 8080;                        // 0: any free port (see HttpServer::port())
    std::string api_key;                    // non-empty: every route but the public ones needs "Bearer KEY"
    size_t max_body_bytes = size_t(8) << 20;
    size_t max_header_bytes = size_t(64) << 10;  // request line + header lines (each line ≤ 8 KiB: httplib)
    size_t max_header_lines = 100;
    int threads = 32;                       // connections served at once (streams hold one each); as many more
                                            // may wait for a thread, beyond that 503 + Retry-After
    int read_timeout_s = 10, write_timeout_s = 10;  // one read / write
    int request_timeout_s = 30;             // the whole request (line, headers, body) after its first byte
};

class HttpServer {
public:
    HttpServer(const HttpOptions& opt, Metrics& metrics);
    ~HttpServer();
    // `is_public`: reachable without the API key (/health).
    void route(const std::string& method, const std::string& path, Endpoint e, bool is_public, Handler h);
    Status bind();   // binds host:port (port 0 → a free one)
    int port() const { return port_; }
    void serve();    // blocks until stop(); call after bind()
    void stop();     // from any thread: stop accepting, return from serve() once handlers are done

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    HttpOptions opt_;
    Metrics& metrics_;
    int port_ = 0;
};

// An OpenAI-style JSON error response.
HttpResponse error_response(int status, const std::string& message, const std::string& type = "invalid_request_error",
                            const std::string& param = "", const std::string& code = "");

}  // namespace ember::server
