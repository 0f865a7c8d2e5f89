// http_conn.cpp: Connection — reads and writes of one request with a deadline and bounds (poll + recv / send).
#include "server/http_conn.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ember::server {

namespace {
// poll() for one socket, retried on EINTR with the time left: > 0 ready (revents set), 0 timeout, < 0 error.
int poll_one(int fd, short events, int timeout_ms, short* revents = nullptr) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        pollfd p{fd, events, 0};
        const int r = ::poll(&p, 1, timeout_ms);
        if (r >= 0 || errno != EINTR) {
            if (revents) *revents = p.revents;
            return r;
        }
        timeout_ms = int(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  end - std::chrono::steady_clock::now()).count()));
    }
}
}  // namespace

Connection::Connection(int fd, const ConnLimits& limits) : fd_(fd), lim_(limits) { next_request(); }

void Connection::next_request() {
    deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(lim_.request_timeout_ms);
    in_head_ = true;
    head_bytes_ = lines_ = line_bytes_ = body_bytes_ = 0;
    prev_ = 0;
    written_ = 0;
    refusal_ = ConnRefusal::NONE;
    close_after = false;
}

int Connection::ms_left() const {
    return int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - std::chrono::steady_clock::now())
                   .count());
}

bool Connection::readable() const {
    if (off_ < len_) return true;
    const int wait = std::min(lim_.read_timeout_ms, ms_left());
    return wait > 0 && poll_one(fd_, POLLIN, wait) > 0;
}

bool Connection::writable() const {
    short rev = 0;
    return poll_one(fd_, POLLOUT, lim_.write_timeout_ms, &rev) > 0 && !(rev & (POLLERR | POLLHUP | POLLNVAL)) &&
           peer_connected(fd_);
}

// The head ends with its first empty line ("\r\n" right after a line feed); the parser reads it a byte at a time,
// so the bounds stop it at the byte that crosses them, before the library has buffered a long line or many lines.
bool Connection::account(const char* p, size_t n) {
    size_t i = 0;
    for (; i < n && in_head_; ++i) {
        const char c = p[i];
        if (++head_bytes_ > lim_.max_head_bytes) {
            refusal_ = ConnRefusal::HEAD_TOO_LARGE;
            return false;
        }
        if (c == '\n') {
            if (lines_ > 0 && line_bytes_ == 1 && prev_ == '\r') {
                in_head_ = false;
            } else if (++lines_ > lim_.max_header_lines + 1) {  // + the request line
                refusal_ = ConnRefusal::TOO_MANY_HEADER_LINES;
                return false;
            }
            line_bytes_ = 0;
        } else {
            ++line_bytes_;
        }
        prev_ = c;
    }
    body_bytes_ += n - i;
    if (body_bytes_ > 2 * lim_.max_body_bytes + (size_t(64) << 10)) {
        refusal_ = ConnRefusal::BODY_TOO_LARGE;
        return false;
    }
    return true;
}

ssize_t Connection::read(char* out, size_t n) {
    if (refusal_ != ConnRefusal::NONE) return -1;
    if (n == 0) return 0;
    if (off_ == len_) {
        const int left = ms_left();
        const int r = left > 0 ? poll_one(fd_, POLLIN, std::min(lim_.read_timeout_ms, left)) : 0;
        if (r == 0) {
            refusal_ = ConnRefusal::TIMEOUT;
            return -1;
        }
        if (r < 0) return -1;
        ssize_t got;
        do got = ::recv(fd_, buf_, sizeof(buf_), 0);
        while (got < 0 && errno == EINTR);
        if (got <= 0) return got;
        off_ = 0;
        len_ = size_t(got);
    }
    const size_t k = std::min(n, len_ - off_);
    if (!account(buf_ + off_, k)) return -1;
    std::memcpy(out, buf_ + off_, k);
    off_ += k;
    return ssize_t(k);
}

ssize_t Connection::write(const char* data, size_t n) {
    if (!writable()) return -1;
    ssize_t put;
    do put = ::send(fd_, data, n, MSG_NOSIGNAL);
    while (put < 0 && errno == EINTR);
    if (put > 0) written_ += size_t(put);
    return put;
}

bool peer_connected(int fd) {
    short rev = 0;
    const int r = poll_one(fd, POLLIN | POLLRDHUP, 0, &rev);
    if (r < 0) return false;
    if (r == 0) return true;  // nothing to read: still connected
    if (rev & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return false;
    char c;
    const ssize_t got = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (got > 0) return true;  // bytes of a pipelined next request
    return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

bool wait_for_request(int fd, int idle_ms, const std::function<bool()>& stopping) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(idle_ms);
    while (!(stopping && stopping())) {
        const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 end - std::chrono::steady_clock::now()).count());
        if (left <= 0) return false;
        const int r = poll_one(fd, POLLIN, std::min(left, 50));
        if (r != 0) return r > 0;
    }
    return false;
}

void lingering_close(int fd, int linger_ms) {
    ::shutdown(fd, SHUT_WR);
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(linger_ms);
    char scratch[16384];
    for (;;) {  // what has arrived, then what arrives until the end of the linger time
        const ssize_t n = ::recv(fd, scratch, sizeof(scratch), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
        const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                                 end - std::chrono::steady_clock::now()).count());
        if (left <= 0 || (n < 0 && poll_one(fd, POLLIN, left) <= 0)) break;
    }
    ::close(fd);
}

void socket_address(int fd, bool peer, std::string& ip, int& port) {
    ip.clear();
    port = -1;
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if ((peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
              : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len)) != 0)
        return;
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), serv, sizeof(serv),
                      NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return;
    ip = host;
    port = std::atoi(serv);
}

}  // namespace ember::server
