// http_conn.h: a client socket as the HTTP parser reads it, request by request, with the bounds that cpp-httplib 0.11
// (Debian, a compiled library whose limits are fixed at its build) does not set, and whether the client is still
// there.
//
// What the library lacks, and what Connection adds (http.cpp reads every request through it):
// - a deadline: the library's timeout is per read, so a client trickling a byte every few seconds holds a thread for
//   as long as it likes; here the whole request (request line, headers, body) must arrive within request_timeout_ms;
// - a bound on the head: the library checks a header line's length only once it has read the whole line into memory,
//   and never counts the lines; here the request line and headers together stop at max_head_bytes and
//   max_header_lines;
// - a bound on chunked and length-less bodies: the library applies its payload limit to Content-Length only; here
//   the bytes after the head stop at twice max_body_bytes + 64 KiB (chunk framing included; the body itself is
//   checked against max_body_bytes once read);
// - the socket for the handler: whether the client has closed its connection (peer_connected), so that a
//   non-streamed request whose client left is cancelled like a streamed one;
// - bytes read ahead kept for the next request (the library's stream is made anew per request and drops them).
#pragma once
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace ember::server {

struct ConnLimits {
    int read_timeout_ms = 10'000;       // one read waits at most this long for bytes
    int write_timeout_ms = 10'000;      // one write waits at most this long for room
    int request_timeout_ms = 30'000;    // the whole request must have arrived this long after its first byte
    size_t max_head_bytes = 64 << 10;   // request line + header lines + the blank line
    size_t max_header_lines = 100;      // header lines (the request line not counted)
    size_t max_body_bytes = 8 << 20;    // see above: the bytes after the head stop at 2 × this + 64 KiB
};

// Why reading stopped before the request was whole; the client is answered 408, 431 or 413.
enum class ConnRefusal { NONE, TIMEOUT, HEAD_TOO_LARGE, TOO_MANY_HEADER_LINES, BODY_TOO_LARGE };

// A connected socket, read one request at a time: the bounds and the deadline apply per request (next_request()),
// and bytes read ahead stay for the next one (a client that sends its next request before this answer, pipelining,
// loses nothing). Not thread-safe: the HTTP thread that serves the connection uses it. Does not own the socket.
class Connection {
public:
    Connection(int fd, const ConnLimits& limits);  // the first request starts now
    void next_request();                           // the next request starts now (its deadline runs from here)
    bool buffered() const { return off_ < len_; }  // bytes of it were read ahead
    // > 0: bytes read; 0: the client closed; −1: an error, a timeout or a bound (refusal() says which).
    ssize_t read(char* out, size_t n);
    // Bytes written (possibly fewer than n), or −1: the client is gone or did not take them within the timeout.
    ssize_t write(const char* data, size_t n);
    bool readable() const;  // bytes can be read now or within the read timeout (and the deadline)
    bool writable() const;  // the client is there and takes bytes within the write timeout

    int fd() const { return fd_; }
    ConnRefusal refusal() const { return refusal_; }
    bool head_done() const { return !in_head_; }
    size_t bytes_written() const { return written_; }
    const ConnLimits& limits() const { return lim_; }
    // Set when the request was answered without its body being read: the connection must close after the answer.
    bool close_after = false;

private:
    bool account(const char* p, size_t n);  // the bounds on bytes handed to the parser; false: refused
    int ms_left() const;                    // until the deadline (≤ 0: past it)

    int fd_;
    ConnLimits lim_;
    std::chrono::steady_clock::time_point deadline_;
    char buf_[4096];
    size_t off_ = 0, len_ = 0;
    bool in_head_ = true;
    size_t head_bytes_ = 0, lines_ = 0, line_bytes_ = 0, body_bytes_ = 0;
    char prev_ = 0;
    size_t written_ = 0;
    ConnRefusal refusal_ = ConnRefusal::NONE;
};

// Whether the peer of a connected socket is still there, without blocking and without consuming anything: false
// once it has closed or shut down its side (FIN or RST), as cpp-httplib's own is_socket_alive and llama-server
// judge it. (A client that half-closes after sending its request therefore counts as gone.)
bool peer_connected(int fd);

// Waits for the first byte of the next request on a connection, at most idle_ms, looking at `stopping` every 50 ms.
// true: something to read (or the peer closed: the read will say so); false: idle for idle_ms, or stopping.
bool wait_for_request(int fd, int idle_ms, const std::function<bool()>& stopping);

// Closes a connection whose request was answered before it was read to its end: first stops writing and discards
// what the client still sends, for at most linger_ms or until it closes, so that the unread bytes do not make the
// kernel reset the connection and throw away the answer before the client has read it (nginx's lingering close).
void lingering_close(int fd, int linger_ms);

// The numeric address and port of a socket's peer (peer) or of its own end; "" and −1 when unknown.
void socket_address(int fd, bool peer, std::string& ip, int& port);

}  // namespace ember::server
