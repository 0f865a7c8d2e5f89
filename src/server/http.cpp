// http.cpp: HttpServer on cpp-httplib 0.11 (the only file that includes httplib.h). A build without the library
// (EMBER_NO_HTTPLIB: CMake did not find it) keeps the interface and refuses to bind, saying why.
#include "server/http.h"

#ifndef EMBER_NO_HTTPLIB
#include <httplib.h>
#endif
#include <signal.h>

#include <algorithm>
#include <cctype>

#include "server/openai_types.h"

namespace ember::server {

namespace {
std::string lower(std::string s) {
    for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

const char* status_type(int status) {
    if (status == 401) return "authentication_error";
    if (status == 404) return "not_found_error";
    if (status == 503) return "server_busy";
    return status >= 500 ? "server_error" : "invalid_request_error";
}

// Constant-time comparison (the key must not leak through response timing).
bool same_key(const std::string& a, const std::string& b) {
    unsigned diff = unsigned(a.size() != b.size());
    for (size_t i = 0; i < a.size(); ++i) diff |= unsigned(a[i] ^ (i < b.size() ? b[i] : 0));
    return diff == 0;
}
}  // namespace

HttpResponse error_response(int status, const std::string& message, const std::string& type, const std::string& param,
                            const std::string& code) {
    ApiError e;
    e.status = status;
    e.message = message;
    e.type = type;
    e.param = param;
    e.code = code;
    HttpResponse r;
    r.status = status;
    r.body = error_body(e);
    return r;
}

#ifdef EMBER_NO_HTTPLIB
struct HttpServer::Impl {};
HttpServer::HttpServer(const HttpOptions& opt, Metrics& metrics) : opt_(opt), metrics_(metrics) {}
HttpServer::~HttpServer() = default;
void HttpServer::route(const std::string&, const std::string&, Endpoint, bool, Handler) {}
Status HttpServer::bind() {
    return errorf("this ember was built without cpp-httplib (Debian libcpp-httplib-dev): it has no HTTP server");
}
void HttpServer::serve() {}
void HttpServer::stop() {}
#else
struct HttpServer::Impl {
    httplib::Server svr;
    struct Route {
        Endpoint endpoint;
        bool is_public;
        Handler handler;
    };
    std::map<std::pair<std::string, std::string>, Route> routes;  // (method, path) → route
};

HttpServer::HttpServer(const HttpOptions& opt, Metrics& metrics)
    : impl_(std::make_unique<Impl>()), opt_(opt), metrics_(metrics) {}

HttpServer::~HttpServer() = default;

void HttpServer::route(const std::string& method, const std::string& path, Endpoint e, bool is_public, Handler h) {
    impl_->routes[{method, path}] = {e, is_public, std::move(h)};
}

Status HttpServer::bind() {
    auto& svr = impl_->svr;
    const int threads = std::max(2, opt_.threads);
    svr.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
    svr.set_payload_max_length(opt_.max_body_bytes);
    svr.set_read_timeout(opt_.read_timeout_s);
    svr.set_write_timeout(opt_.write_timeout_s);
    svr.set_keep_alive_timeout(5);
    svr.set_tcp_nodelay(true);  // SSE chunks go out as they are written
    // Every request goes through one dispatcher: auth, limits, routing, metrics (httplib's own routing only sees it).
    auto dispatch = [this](const httplib::Request& req, httplib::Response& res) {
        HttpResponse out;
        Endpoint ep = Endpoint::OTHER;
        size_t header_bytes = 0;
        for (const auto& h : req.headers) header_bytes += h.first.size() + h.second.size() + 4;
        auto it = impl_->routes.find({req.method, req.path});
        if (it != impl_->routes.end()) ep = it->second.endpoint;
        if (header_bytes > opt_.max_header_bytes) {
            out = error_response(431, strfmt("request headers exceed %zu bytes", opt_.max_header_bytes));
        } else if (it == impl_->routes.end()) {
            bool path_known = false;
            for (const auto& r : impl_->routes) path_known |= r.first.second == req.path;
            out = path_known ? error_response(405, strfmt("method %s is not allowed on %s", req.method.c_str(),
                                                          req.path.c_str()))
                             : error_response(404, strfmt("no such endpoint: %s %s", req.method.c_str(),
                                                          req.path.c_str()), "not_found_error");
        } else if (!opt_.api_key.empty() && !it->second.is_public &&
                   !same_key(req.get_header_value("Authorization"), "Bearer " + opt_.api_key)) {
            out = error_response(401, "missing or wrong API key (send 'Authorization: Bearer KEY')",
                                 "authentication_error", "", "invalid_api_key");
            out.headers.emplace_back("WWW-Authenticate", "Bearer");
        } else {
            HttpRequest r;
            r.method = req.method;
            r.path = req.path;
            r.body = req.body;
            for (const auto& h : req.headers) r.headers.emplace(lower(h.first), h.second);
            out = it->second.handler(r);
        }
        metrics_.count_request(ep, out.status);
        res.status = out.status;
        for (const auto& h : out.headers) res.set_header(h.first.c_str(), h.second);
        if (!out.stream) {
            res.set_content(out.body, out.content_type.c_str());
            return;
        }
        auto stream = std::make_shared<std::function<void(const BodyWriter&)>>(std::move(out.stream));
        res.set_chunked_content_provider(out.content_type, [stream](size_t, httplib::DataSink& sink) {
            (*stream)([&sink](std::string_view s) { return sink.write(s.data(), s.size()); });
            sink.done();
            return true;
        });
    };
    svr.Get(".*", dispatch);
    svr.Post(".*", dispatch);
    svr.Put(".*", dispatch);
    svr.Delete(".*", dispatch);
    svr.Patch(".*", dispatch);
    svr.Options(".*", dispatch);
    // httplib's own refusals (unreadable request line or headers, body over the limit, ...) get JSON bodies too.
    svr.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return;
        const int s = res.status;
        const std::string msg = s == 413   ? strfmt("request body exceeds %zu bytes", opt_.max_body_bytes)
                                : s == 414 ? std::string("request URI too long")
                                           : strfmt("malformed or incomplete HTTP request (status %d)", s);
        res.set_content(error_response(s, msg, status_type(s)).body, "application/json");
        if (s >= 400) metrics_.count_request(Endpoint::OTHER, s);
    });
    svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content(error_response(500, "internal error", "server_error").body, "application/json");
    });
    if (opt_.port == 0) {
        port_ = svr.bind_to_any_port(opt_.host);
        if (port_ <= 0) return errorf("cannot bind %s (any port)", opt_.host.c_str());
    } else {
        if (!svr.bind_to_port(opt_.host, opt_.port))
            return errorf("cannot bind %s:%d (in use, or not an address of this machine?)", opt_.host.c_str(), opt_.port);
        port_ = opt_.port;
    }
    return Status::ok();
}

void HttpServer::serve() {
    signal(SIGPIPE, SIG_IGN);  // a client gone mid-write must be an error return, not the end of the process
    impl_->svr.listen_after_bind();
}

void HttpServer::stop() { impl_->svr.stop(); }

#endif  // EMBER_NO_HTTPLIB

}  // namespace ember::server
