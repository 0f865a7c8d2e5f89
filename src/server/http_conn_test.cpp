// http_conn_test.cpp: Connection's bounds (head lines and bytes, the request deadline, the body) and peer_connected,
// on a socketpair standing for a client connection.
#include "server/http_conn.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace ember::server {
namespace {

struct Pair {
    int server = -1, client = -1;
    Pair() {
        int fds[2];
        EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
        server = fds[0];
        client = fds[1];
    }
    ~Pair() {
        if (server >= 0) ::close(server);
        if (client >= 0) ::close(client);
    }
    void send(const std::string& s) const { ASSERT_EQ(::send(client, s.data(), s.size(), 0), ssize_t(s.size())); }
};

// Reads as the HTTP parser reads a head (a byte at a time) until an error; the bytes read.
size_t read_bytewise(Connection& c, size_t most) {
    size_t n = 0;
    char b;
    while (n < most && c.read(&b, 1) == 1) ++n;
    return n;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(HttpConn, HeaderLinesAreCounted) {
    ConnLimits lim;
    lim.max_header_lines = 100;
    std::string head = "GET / HTTP/1.1\r\n";
    for (int i = 0; i < 100; ++i) head += "X-" + std::to_string(i) + ": v\r\n";
    {  // exactly the bound: the whole head is read
        Pair p;
        p.send(head + "\r\n");
        Connection c(p.server, lim);
        EXPECT_EQ(read_bytewise(c, head.size() + 2), head.size() + 2);
        EXPECT_TRUE(c.head_done());
        EXPECT_EQ(c.refusal(), ConnRefusal::NONE);
    }
    {  // one line more: refused at that line's end, before the blank line
        Pair p;
        const std::string more = head + "X-100: v\r\n";
        p.send(more + "\r\n");
        Connection c(p.server, lim);
        EXPECT_EQ(read_bytewise(c, more.size() + 2), more.size() - 1);
        EXPECT_EQ(c.refusal(), ConnRefusal::TOO_MANY_HEADER_LINES);
        char b;
        EXPECT_EQ(c.read(&b, 1), -1);  // and stays refused
    }
}

TEST(HttpConn, HeadBytesStopInsideALongLine) {
    ConnLimits lim;
    lim.max_head_bytes = 4096;
    Pair p;
    std::thread w([&] { p.send("GET / HTTP/1.1\r\nX-Long: " + std::string(100'000, 'a')); });
    Connection c(p.server, lim);
    EXPECT_EQ(read_bytewise(c, 200'000), 4096u);  // never more than the bound reaches the parser
    EXPECT_EQ(c.refusal(), ConnRefusal::HEAD_TOO_LARGE);
    ::shutdown(p.server, SHUT_RDWR);  // lets the writer finish
    w.join();
}

TEST(HttpConn, ATricklingClientMeetsTheDeadline) {
    ConnLimits lim;
    lim.read_timeout_ms = 1000;      // each byte comes well within this
    lim.request_timeout_ms = 600;    // but the whole request does not
    Pair p;
    std::atomic<bool> stop{false};
    std::thread w([&] {
        const std::string req = "GET /health HTTP/1.1\r\nX-Slow: " + std::string(100, 'a');
        for (char ch : req) {
            if (stop || ::send(p.client, &ch, 1, MSG_NOSIGNAL) != 1) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    });
    const auto t0 = std::chrono::steady_clock::now();
    Connection c(p.server, lim);
    const size_t got = read_bytewise(c, 1000);
    const double took = seconds_since(t0);
    stop = true;
    w.join();
    EXPECT_EQ(c.refusal(), ConnRefusal::TIMEOUT);
    EXPECT_GT(got, 3u);
    EXPECT_GE(took, 0.55);
    EXPECT_LT(took, 1.5);  // the trickle itself would take 6 s
}

TEST(HttpConn, ASilentClientTimesOutPerRead) {
    ConnLimits lim;
    lim.read_timeout_ms = 200;
    Pair p;
    p.send("GET / HT");
    const auto t0 = std::chrono::steady_clock::now();
    Connection c(p.server, lim);
    EXPECT_EQ(read_bytewise(c, 100), 8u);
    EXPECT_EQ(c.refusal(), ConnRefusal::TIMEOUT);
    EXPECT_LT(seconds_since(t0), 0.6);
}

TEST(HttpConn, BodyBytesAreBounded) {
    ConnLimits lim;
    lim.max_body_bytes = 1000;  // the bytes after the head stop at 2 × 1000 + 64 KiB
    const size_t bound = 2 * 1000 + 65536;
    const std::string head = "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    Pair p;
    std::thread w([&] {
        const std::string all = head + std::string(bound + 5000, 'b');
        for (size_t off = 0; off < all.size();) {
            const ssize_t n = ::send(p.client, all.data() + off, all.size() - off, MSG_NOSIGNAL);
            if (n <= 0) return;
            off += size_t(n);
        }
    });
    Connection c(p.server, lim);
    EXPECT_EQ(read_bytewise(c, head.size()), head.size());
    EXPECT_TRUE(c.head_done());
    size_t body = 0;
    char buf[4096];
    for (ssize_t n; (n = c.read(buf, sizeof(buf))) > 0;) body += size_t(n);
    EXPECT_EQ(c.refusal(), ConnRefusal::BODY_TOO_LARGE);
    EXPECT_LE(body, bound);
    EXPECT_GT(body, bound - sizeof(buf));
    ::shutdown(p.server, SHUT_RDWR);
    w.join();
}

TEST(HttpConn, PipelinedRequestsKeepTheirBytes) {
    Pair p;
    const std::string a = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", b = "GET /v1/models HTTP/1.1\r\n\r\n";
    p.send(a + b);  // one packet, two requests
    Connection c(p.server, ConnLimits{});
    std::string got(a.size(), '\0');
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(c.read(&got[i], 1), 1);
    EXPECT_EQ(got, a);
    EXPECT_TRUE(c.head_done());
    EXPECT_TRUE(c.buffered());  // the second request was read ahead with the first
    c.next_request();
    EXPECT_FALSE(c.head_done());
    got.assign(b.size(), '\0');
    for (size_t i = 0; i < b.size(); ++i) ASSERT_EQ(c.read(&got[i], 1), 1);
    EXPECT_EQ(got, b);
    EXPECT_TRUE(c.head_done() && !c.buffered());
}

TEST(HttpConn, PeerConnectedSeesACloseWithoutConsumingBytes) {
    {
        Pair p;
        EXPECT_TRUE(peer_connected(p.server));
        p.send("GET /next HTTP/1.1\r\n");  // a pipelined request: still there, and the bytes stay readable
        EXPECT_TRUE(peer_connected(p.server));
        Connection c(p.server, ConnLimits{});
        char b[3];
        EXPECT_EQ(c.read(b, 3), 3);
        EXPECT_EQ(std::string(b, 3), "GET");
        ::close(p.client);
        p.client = -1;
        EXPECT_FALSE(peer_connected(p.server));
        EXPECT_EQ(c.write("x", 1), -1);  // nothing is written to a client that left
    }
    {
        Pair p;
        ::shutdown(p.client, SHUT_WR);  // a half-close counts as gone (as cpp-httplib's is_socket_alive)
        EXPECT_FALSE(peer_connected(p.server));
    }
}

TEST(HttpConn, WaitForRequest) {
    Pair p;
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(wait_for_request(p.server, 150, nullptr));  // idle
    EXPECT_GE(seconds_since(t0), 0.14);
    t0 = std::chrono::steady_clock::now();
    std::atomic<bool> stopping{false};
    std::thread s([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        stopping = true;
    });
    EXPECT_FALSE(wait_for_request(p.server, 10'000, [&] { return stopping.load(); }));  // the server stops
    EXPECT_LT(seconds_since(t0), 1.0);
    s.join();
    p.send("G");
    EXPECT_TRUE(wait_for_request(p.server, 1000, nullptr));
}

// Over TCP (a socketpair never resets): the server answers before reading the client's whole body, as a client
// sends it all before it reads (urllib, and most). A plain close with bytes unread makes the kernel reset the
// connection: the client's send fails and it never reads the answer. lingering_close reads them first, so the
// client's send completes and the answer is there to read.
TEST(HttpConn, LingeringCloseLetsTheAnswerArrive) {
    const int lsock = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(lsock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(::listen(lsock, 1), 0);
    socklen_t len = sizeof(addr);
    ASSERT_EQ(::getsockname(lsock, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    const int client = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    const int server = ::accept(lsock, nullptr, nullptr);
    ASSERT_GE(server, 0);
    const std::string body(16 << 20, 'x');  // more than the socket buffers hold; the server never reads it
    size_t sent = 0;
    std::thread sender([&] {
        for (ssize_t n; sent < body.size() && (n = ::send(client, body.data() + sent, body.size() - sent,
                                                          MSG_NOSIGNAL)) > 0;)
            sent += size_t(n);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::string answer = "HTTP/1.1 413 x\r\n\r\n";
    ASSERT_EQ(::send(server, answer.data(), answer.size(), MSG_NOSIGNAL), ssize_t(answer.size()));
    lingering_close(server, 1000);  // (the client reads only after it: the full linger time here)
    sender.join();
    EXPECT_EQ(sent, body.size());
    std::string got;
    char buf[256];
    for (ssize_t n; (n = ::recv(client, buf, sizeof(buf), 0)) > 0;) got.append(buf, size_t(n));
    EXPECT_EQ(got, answer);
    ::close(client);
    ::close(lsock);
}

}  // namespace
}  // namespace ember::server
