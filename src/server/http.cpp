// http.cpp: HttpServer on cpp-httplib 0.11 (the only file that includes httplib.h), its connections read through
// http_conn.h. A build without the library (EMBER_NO_HTTPLIB: CMake did not find it) keeps the interface and refuses
// to bind, saying why.
#include "server/http.h"

#ifndef EMBER_NO_HTTPLIB
#include <httplib.h>
#endif
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>

#include "server/http_conn.h"
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
namespace {
// The request this HTTP thread is serving (set by ConnServer around process_request): the handlers below read its
// refusal, mark it to be closed, and hand its socket to the endpoint (HttpRequest::client_gone).
thread_local Connection* t_conn = nullptr;
// Set by ShedQueue on the accept thread around a connection it will not queue: the connection is answered 503.
thread_local bool t_shed = false;

// httplib::Stream over a Connection.
class ConnStream final : public httplib::Stream {
public:
    explicit ConnStream(Connection& c) : c_(c) {}
    bool is_readable() const override { return c_.readable(); }
    bool is_writable() const override { return c_.writable(); }
    ssize_t read(char* p, size_t n) override { return c_.read(p, n); }
    ssize_t write(const char* p, size_t n) override { return c_.write(p, n); }
    void get_remote_ip_and_port(std::string& ip, int& port) const override { socket_address(c_.fd(), true, ip, port); }
    void get_local_ip_and_port(std::string& ip, int& port) const override { socket_address(c_.fd(), false, ip, port); }
    socket_t socket() const override { return c_.fd(); }

private:
    Connection& c_;
};

const char* reason_phrase(int status) {
    switch (status) {
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Bad Request";
    }
}

// An answer written by hand, where the library does not write one; the connection closes after it.
void write_raw(Connection& c, const HttpResponse& r) {
    std::string raw = strfmt("HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n",
                             r.status, reason_phrase(r.status), r.content_type.c_str(), r.body.size());
    for (const auto& h : r.headers) raw += h.first + ": " + h.second + "\r\n";
    raw += "\r\n" + r.body;
    for (size_t off = 0; off < raw.size();) {
        const ssize_t n = c.write(raw.data() + off, raw.size() - off);
        if (n <= 0) break;
        off += size_t(n);
    }
}

// cpp-httplib 0.11 hands every accepted socket to the virtual process_and_close_socket(). This one is the library's
// own loop (kept-alive requests through process_request, at most keep_alive_max_count_, each within
// keep_alive_timeout_sec_ of the last) with a Connection in place of the library's SocketStream (which it makes
// anew per request, dropping what it had read ahead of a pipelined request). Beside the library's: a connection
// shed by ShedQueue is answered `busy` at once.
class ConnServer final : public httplib::Server {
public:
    ConnLimits limits;
    std::function<HttpResponse(ConnRefusal)> unanswered;  // refused before the library could answer (request line)
    std::function<HttpResponse()> busy;                   // too many connections

private:
    bool process_and_close_socket(socket_t sock) override {
        if (t_shed) {
            Connection conn(sock, limits);
            write_raw(conn, busy());
            lingering_close(sock, 0);  // what has arrived is read, so that the close does not reset the answer
            return false;
        }
        const auto stopping = [this] { return svr_sock_ == INVALID_SOCKET; };
        bool ret = false, unread = false;
        Connection conn(sock, limits);
        ConnStream strm(conn);
        for (size_t left = keep_alive_max_count_; left > 0; --left) {
            if (!conn.buffered() && !wait_for_request(sock, int(keep_alive_timeout_sec_ * 1000), stopping)) break;
            conn.next_request();
            bool closed = false;
            t_conn = &conn;
            ret = process_request(strm, left == 1, closed, nullptr);
            t_conn = nullptr;
            const bool refused = conn.refusal() != ConnRefusal::NONE;
            if (refused && conn.bytes_written() == 0) write_raw(conn, unanswered(conn.refusal()));
            unread = refused || conn.close_after;
            if (!ret || closed || unread) break;
        }
        if (unread) {
            lingering_close(sock, 2000);
        } else {
            ::shutdown(sock, SHUT_RDWR);
            ::close(sock);
        }
        return ret;
    }
};

// cpp-httplib 0.11's ThreadPool queues accepted connections without a bound. This queue lets at most `most` be
// accepted and unfinished (served, or waiting for one of the pool's threads); any more is answered 503 with
// Retry-After at once, on the accept thread, like a request past the engine queue's bound.
class ShedQueue final : public httplib::TaskQueue {
public:
    ShedQueue(size_t threads, size_t most) : pool_(threads), most_(most) {}
    void enqueue(std::function<void()> fn) override {
        if (open_.fetch_add(1) >= most_) {
            open_--;
            t_shed = true;
            fn();  // ConnServer::process_and_close_socket: the 503, then the close
            t_shed = false;
            return;
        }
        pool_.enqueue([this, fn = std::move(fn)] {
            fn();
            open_--;
        });
    }
    void shutdown() override { pool_.shutdown(); }

private:
    httplib::ThreadPool pool_;
    const size_t most_;
    std::atomic<size_t> open_{0};
};

bool announces_body(const httplib::Request& req) {
    return req.has_header("Transfer-Encoding") ||
           (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
}

struct Route {
    Endpoint endpoint;
    bool is_public;
    Handler handler;
};
using Routes = std::map<std::pair<std::string, std::string>, Route>;  // (method, path) → route
}  // namespace

struct HttpServer::Impl {
    ConnServer svr;
    Routes routes;
};

HttpServer::HttpServer(const HttpOptions& opt, Metrics& metrics)
    : impl_(std::make_unique<Impl>()), opt_(opt), metrics_(metrics) {}

HttpServer::~HttpServer() = default;

void HttpServer::route(const std::string& method, const std::string& path, Endpoint e, bool is_public, Handler h) {
    impl_->routes[{method, path}] = {e, is_public, std::move(h)};
}

namespace {
void to_httplib(HttpResponse out, httplib::Response& res) {
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
}

// The answer to a request whose reading was stopped by a bound of its Connection.
HttpResponse refusal_response(ConnRefusal why, const HttpOptions& opt) {
    switch (why) {
    case ConnRefusal::TIMEOUT:
        return error_response(408, strfmt("the request did not arrive in time (%d s for a whole request, %d s for "
                                          "each read)", opt.request_timeout_s, opt.read_timeout_s),
                              "invalid_request_error", "", "request_timeout");
    case ConnRefusal::HEAD_TOO_LARGE:
        return error_response(431, strfmt("the request line and headers exceed %zu bytes", opt.max_header_bytes));
    case ConnRefusal::TOO_MANY_HEADER_LINES:
        return error_response(431, strfmt("the request has more than %zu header lines", opt.max_header_lines));
    case ConnRefusal::BODY_TOO_LARGE:
    case ConnRefusal::NONE: break;
    }
    return error_response(413, strfmt("request body exceeds %zu bytes", opt.max_body_bytes));
}

// What can be refused before the body is read: no such route, the API key, a body that cannot be accepted.
bool admit(const Routes& routes, const HttpOptions& opt, const httplib::Request& req, HttpResponse& out, Endpoint& ep) {
    auto it = routes.find({req.method, req.path});
    if (it == routes.end()) {
        bool path_known = false;
        for (const auto& r : routes) path_known |= r.first.second == req.path;
        out = path_known ? error_response(405, strfmt("method %s is not allowed on %s", req.method.c_str(),
                                                      req.path.c_str()))
                         : error_response(404, strfmt("no such endpoint: %s %s", req.method.c_str(), req.path.c_str()),
                                          "not_found_error");
        return false;
    }
    ep = it->second.endpoint;
    if (!opt.api_key.empty() && !it->second.is_public &&
        !same_key(req.get_header_value("Authorization"), "Bearer " + opt.api_key)) {
        out = error_response(401, "missing or wrong API key (send 'Authorization: Bearer KEY')", "authentication_error",
                             "", "invalid_api_key");
        out.headers.emplace_back("WWW-Authenticate", "Bearer");
        return false;
    }
    if (req.method != "POST") return true;
    const std::string encoding = lower(req.get_header_value("Content-Encoding"));
    if (!encoding.empty() && encoding != "identity") {
        out = error_response(415, strfmt("Content-Encoding '%s' is not supported: send the body uncompressed",
                                         encoding.c_str()));
        return false;
    }
    if (req.has_header("Transfer-Encoding")) {
        if (lower(req.get_header_value("Transfer-Encoding")) == "chunked") return true;  // bounded as it is read
        out = error_response(400, "only 'Transfer-Encoding: chunked' is supported");
        return false;
    }
    if (!req.has_header("Content-Length")) {
        out = error_response(411, "a request body needs a Content-Length (or Transfer-Encoding: chunked)");
        return false;
    }
    const std::string len = req.get_header_value("Content-Length");
    if (len.empty() || len.size() > 19 || len.find_first_not_of("0123456789") != std::string::npos) {
        out = error_response(400, "the Content-Length header is not a number");
        return false;
    }
    if (std::stoull(len) > opt.max_body_bytes) {
        out = error_response(413, strfmt("request body exceeds %zu bytes", opt.max_body_bytes));
        return false;
    }
    return true;
}
}  // namespace

Status HttpServer::bind() {
    auto& svr = impl_->svr;
    const int threads = std::max(2, opt_.threads);
    svr.new_task_queue = [threads] { return new ShedQueue(size_t(threads), 2 * size_t(threads)); };
    svr.set_payload_max_length(opt_.max_body_bytes);
    svr.set_read_timeout(opt_.read_timeout_s);  // also the sockets' SO_RCVTIMEO / SO_SNDTIMEO
    svr.set_write_timeout(opt_.write_timeout_s);
    svr.set_keep_alive_timeout(5);
    svr.set_tcp_nodelay(true);  // SSE chunks go out as they are written
    svr.limits.read_timeout_ms = opt_.read_timeout_s * 1000;
    svr.limits.write_timeout_ms = opt_.write_timeout_s * 1000;
    svr.limits.request_timeout_ms = opt_.request_timeout_s * 1000;
    svr.limits.max_head_bytes = opt_.max_header_bytes;
    svr.limits.max_header_lines = opt_.max_header_lines;
    svr.limits.max_body_bytes = opt_.max_body_bytes;
    // Stopped in the request line: the library closes without an answer; this one answers.
    svr.unanswered = [this](ConnRefusal why) {
        HttpResponse r = refusal_response(why, opt_);
        metrics_.count_request(Endpoint::OTHER, r.status);
        return r;
    };
    svr.busy = [this, threads] {
        HttpResponse r = error_response(503, strfmt("the server is busy: %d connections are served and as many wait; "
                                                    "retry later", threads), "server_busy", "", "too_many_connections");
        r.headers.emplace_back("Retry-After", "1");
        metrics_.count_request(Endpoint::OTHER, r.status);
        return r;
    };
    // Refusals that need no body are made before it is read (the library reads it right after this handler); a
    // request answered with its body unread closes its connection.
    svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        HttpResponse out;
        Endpoint ep = Endpoint::OTHER;
        const bool admitted = admit(impl_->routes, opt_, req, out, ep);
        if (announces_body(req) && !(admitted && req.method == "POST") && t_conn) t_conn->close_after = true;
        if (admitted) return httplib::Server::HandlerResponse::Unhandled;
        if (t_conn && t_conn->close_after) out.headers.emplace_back("Connection", "close");
        metrics_.count_request(ep, out.status);
        to_httplib(std::move(out), res);
        return httplib::Server::HandlerResponse::Handled;
    });
    // Every admitted request goes through one dispatcher (httplib's own routing only sees it).
    auto dispatch = [this](const httplib::Request& req, httplib::Response& res) {
        HttpResponse out;
        auto it = impl_->routes.find({req.method, req.path});
        const Endpoint ep = it == impl_->routes.end() ? Endpoint::OTHER : it->second.endpoint;
        if (it == impl_->routes.end()) {
            out = error_response(404, "no such endpoint", "not_found_error");
        } else if (req.body.size() > opt_.max_body_bytes) {  // a chunked body: its length is known only now
            out = error_response(413, strfmt("request body exceeds %zu bytes", opt_.max_body_bytes));
        } else {
            HttpRequest r;
            r.method = req.method;
            r.path = req.path;
            r.body = req.body;
            for (const auto& h : req.headers) r.headers.emplace(lower(h.first), h.second);
            if (t_conn) r.client_gone = [fd = t_conn->fd()] { return !peer_connected(fd); };
            out = it->second.handler(r);
        }
        metrics_.count_request(ep, out.status);
        to_httplib(std::move(out), res);
    };
    svr.Get(".*", dispatch);
    svr.Post(".*", dispatch);
    // httplib's own refusals (unreadable request line or headers, a bound of the Connection, ...) get JSON bodies.
    svr.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return;
        HttpResponse out;
        if (t_conn && t_conn->refusal() != ConnRefusal::NONE) {
            out = refusal_response(t_conn->refusal(), opt_);
            res.status = out.status;
            res.set_header("Connection", "close");
        } else {
            const int s = res.status;
            out = error_response(s, s == 413   ? strfmt("request body exceeds %zu bytes", opt_.max_body_bytes)
                                    : s == 414 ? std::string("request URI too long")
                                               : strfmt("malformed or incomplete HTTP request (status %d)", s),
                                 status_type(s));
        }
        res.set_content(out.body, "application/json");
        if (res.status >= 400) metrics_.count_request(Endpoint::OTHER, res.status);
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
