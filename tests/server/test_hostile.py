# Hostile input: at least 500 malformed or adversarial requests — random JSON, wrong types, huge strings, invalid
# UTF-8, oversized bodies (by length, chunked, compressed), broken HTTP, too many or too long header lines, slow and
# trickling clients — each answered with a 4xx, and the server keeps serving.
import json
import random
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ENDPOINTS = ["/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"]
VALID = {
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "temperature": 0},
    "/v1/completions": {"prompt": "hi", "max_tokens": 1, "temperature": 0},
    "/tokenize": {"prompt": "hi"},
    "/detokenize": {"tokens": [1, 2]},
}
# Each field with values of a type it never accepts.
WRONG = {
    "messages": [5, "hi", {"role": "user"}, [1], [{"role": 7, "content": "x"}], [{"role": "user", "content": {}}],
                 [{"role": "user", "content": [{"type": "image_url"}]}], True],
    "prompt": [True, {}, [[1], [2]], [-1], [1.5], ["a", "b"], [[]]],
    "tokens": ["x", [True], [-3], [{}], 7],
    "max_tokens": ["1", -5, 0, 1.5, [], {}, True],
    "temperature": ["0", [], {}, -1, 7, True],
    "top_p": ["x", 2, -0.5, [], False],
    "top_k": [1.5, "k", [], {}],
    "stop": [5, [1], {}, [None], ["x" * 5000]],
    "stream": ["yes", 1, [], {}],
    "seed": ["s", 1.5, [], {}],
    "logprobs": ["x", [], {}, -1],
    "n": [2, 5, "1"],
    "model": [5, [], {}, "m" * 1000, "no-such-model"],
    "tools": [[{"type": "function", "function": {"name": "f"}}], 5, [5], [{"type": "function"}],
              [{"type": "function", "function": {"name": "bad name!"}}],
              [{"type": "function", "function": {"name": "f", "parameters": 5}}]],
    "tool_choice": ["sometimes", 5, {"type": "function"}, {"type": "function", "function": {"name": "nope"}}],
    "response_format": [{"type": "json_object", "x": 1}, {"type": "json_schema"}, {"type": "yaml"}, 5,
                        {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "frob"}}},
                        {"type": "json_schema", "json_schema": {"name": "n", "schema": {"not": {}}}},
                        {"type": "json_schema", "json_schema": {"name": "n", "schema": {"$ref": "#/nowhere"}}},
                        {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "string", "pattern": "(("}}}],
    "grammar": [5, "root ::= (", "root ::= undefined", "root ::= root \"a\"", "x" * 300000],
    "json_schema": [5, "s", {"type": 5}, {"type": "object", "properties": {"a": {"$ref": "#/x"}}}],
    "logit_bias": [{"1": 5}],
    "chat_template_kwargs": [5, "x", {"messages": []}, {"enable_thinking": "yes"}],
    "stream_options": [5, {"include_usage": "yes"}, {"x": 1}],
    "unknown_field": [1, "x", None],
}


def read_until(s, marker):
    """Reads from socket s until `marker` has arrived or the peer closes; what arrived."""
    buf = b""
    while marker not in buf:
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
    return buf


def raw_request(port, data, timeout=10.0, read=True):
    """Sends bytes on a fresh connection; returns the status code of the reply (0 if the server closed it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        if not read:
            return 0
        buf = read_until(s, b"\r\n")
        if b"\r\n" not in buf:
            return 0
        line = buf.split(b"\r\n", 1)[0].decode("latin-1")
        return int(line.split()[1])


def post(port, path, body, extra_headers=b""):
    if isinstance(body, str):
        body = body.encode("utf-8", "surrogatepass")
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
            f"Content-Length: {len(body)}\r\n").encode() + extra_headers + b"\r\n"
    return raw_request(port, head + body)


def random_json(rng, depth=0):
    k = rng.randrange(7 if depth < 4 else 4)
    if k == 0:
        return rng.choice([None, True, False])
    if k == 1:
        return rng.choice([0, -1, 2**63, 1e308, -0.0, 3.5, 10**30])
    if k == 2:
        return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x3000)])) for _ in range(rng.randrange(12)))
    if k == 3:
        return rng.choice(["messages", "prompt", "role", "", "\u0000"])
    if k in (4, 5):
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["messages", "prompt", "tokens", "x", "model", "stream"]): random_json(rng, depth + 1)
            for _ in range(rng.randrange(4))}


def hostile_requests(rng):
    """(description, callable → status) pairs."""
    out = []
    for i in range(150):  # random JSON documents (never a valid request: no endpoint accepts these shapes)
        path = rng.choice(ENDPOINTS)
        doc = random_json(rng)
        if isinstance(doc, dict):
            doc["unknown_" + str(i)] = 1  # an unknown field is always refused
        out.append((f"random json {path}", lambda p, path=path, doc=doc: post(p, path, json.dumps(doc))))
    for path, valid in VALID.items():  # one field of a valid body replaced by a value of a type it never takes
        for field, values in WRONG.items():
            if field in ("messages", "prompt", "tokens") and field not in valid:
                continue
            for v in values:
                body = dict(valid, **{field: v})
                if path in ("/tokenize", "/detokenize") and field not in ("model", "unknown_field", "prompt",
                                                                           "tokens", "messages"):
                    body = dict(valid, **{field + "_x": v})  # those endpoints refuse generation fields as unknown
                out.append((f"wrong {field}={str(v)[:20]} {path}", lambda p, path=path, b=body: post(p, path, json.dumps(b))))
    for i in range(40):  # invalid UTF-8 inside JSON strings
        path = rng.choice(ENDPOINTS[:2])
        bad = bytes(rng.choice([0xff, 0xfe, 0xc0, 0x80, 0xed]) for _ in range(1 + rng.randrange(3)))
        body = b'{"messages": [{"role": "user", "content": "a' + bad + b'"}], "prompt": "' + bad + b'"}'
        out.append(("invalid utf-8", lambda p, path=path, b=body: post(p, path, b)))
    for i in range(30):  # broken JSON text
        s = json.dumps(VALID["/v1/completions"])
        cut = rng.randrange(1, len(s) - 1)
        s = rng.choice([s[:cut], s[:cut] + "}" * 3, s.replace(":", "=", 1), "{" * 50000, s + "garbage", "\"\\ud800\""])
        out.append(("broken json", lambda p, b=s: post(p, "/v1/completions", b)))
    for i in range(20):  # huge strings: prompts far past the context, long stop strings, long model names
        n = rng.choice([200_000, 500_000, 900_000])
        kind = rng.randrange(3)
        if kind == 0:
            b = {"prompt": "word " * (n // 5), "max_tokens": 1}
        elif kind == 1:
            b = {"messages": [{"role": "user", "content": "x" * n}], "max_tokens": 1}
        else:
            b = {"prompt": "hi", "stop": ["s" * n], "max_tokens": 1}
        path = "/v1/chat/completions" if "messages" in b else "/v1/completions"
        out.append((f"huge string {kind}", lambda p, path=path, b=b: post(p, path, json.dumps(b))))
    for i in range(15):  # bodies over --max-body (1,000,000)
        out.append(("oversized body", lambda p: post(p, "/v1/completions", b'{"prompt": "' + b"a" * 1_200_000 + b'"}')))
    garbage = [b"GARBAGE\r\n\r\n", b"GET\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n" + b"x" * 10,
               b"POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
               b"POST /v1/completions HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
               b"GET /" + b"a" * 10000 + b" HTTP/1.1\r\n\r\n",
               b"GET / HTTP/1.1\r\nX: " + b"h" * 9000 + b"\r\n\r\n",
               b"GET /v1/models HTTP/1.1\r\n" + b"".join(b"X-%d: %s\r\n" % (k, b"v" * 1000) for k in range(100)) + b"\r\n",
               b"PUT /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}",
               b"DELETE /v1/models HTTP/1.1\r\n\r\n", b"GET /../../etc/passwd HTTP/1.1\r\n\r\n",
               b"GET /v1/models/nope HTTP/1.1\r\n\r\n",
               # many short header lines (431: more than 100), a header line without end (431 at 64 KiB)
               b"GET /health HTTP/1.1\r\n" + b"".join(b"X-%d: v\r\n" % k for k in range(150)) + b"\r\n",
               b"GET /health HTTP/1.1\r\nX: " + b"h" * 70000,
               # bodies the HTTP library would not bound: no length (411), compressed (415), chunked past the limit
               b"POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\n\r\n{\"prompt\": \"hi\"}",
               b"POST /v1/completions HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\n\x1f\x8b\x08\x00",
               b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" +
               b"".join(b"10000\r\n" + b"a" * 0x10000 + b"\r\n" for _ in range(40)) + b"0\r\n\r\n",
               b"POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999999999\r\n\r\n{}",
               b"POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n{}"]
    for i in range(72):  # broken HTTP
        out.append((f"bad http {i % len(garbage)}", lambda p, g=garbage[i % len(garbage)]: raw_request(p, g)))
    return out


def slow_client(port, stall_after, trickle=False):
    """Sends part of a request, then nothing: the server must time the connection out (--timeout 3) with a 408. With
    `trickle`, it then keeps sending a byte a second (each within --timeout): the request's deadline
    (--request-timeout 8) must end it with a 408 all the same."""
    req = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b'{"prompt": "hi"')
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        for k in range(0, stall_after):  # trickle the first bytes
            s.sendall(req[k:k + 1])
            time.sleep(0.05)
        t0 = time.time()
        if trickle:
            s.settimeout(1.0)
            while time.time() - t0 < 25:
                try:
                    if s.recv(4096, socket.MSG_PEEK):
                        break
                except socket.timeout:
                    pass
                try:
                    s.sendall(b"x")
                except OSError:
                    break
            s.settimeout(30)
        buf = read_until(s, b"\r\n")
        waited = time.time() - t0
    status = int(buf.split()[1]) if buf.startswith(b"HTTP/") else 0
    return status, waited, stall_after


def test_hostile_requests_get_4xx_and_the_server_keeps_serving(server, client):
    rng = random.Random(20261201)
    reqs = hostile_requests(rng)
    assert len(reqs) >= 500
    statuses = {}
    bad = []
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda r: (r[0], r[1](server.port)), reqs))
    for desc, status in results:
        statuses[status] = statuses.get(status, 0) + 1
        if not 400 <= status < 500:
            bad.append((desc, status))
    print("statuses:", dict(sorted(statuses.items())), "of", len(results))
    assert not bad, bad[:20]
    # Slow clients (stalled in the headers and in the body) while normal traffic goes on.
    slow = []
    threads = [threading.Thread(target=lambda k=k, t=t: slow.append(slow_client(server.port, k, t)))
               for k, t in ((10, False), (45, False), (60, False), (75, False), (20, True), (70, True))]
    for t in threads:
        t.start()
    time.sleep(0.5)
    t0 = time.time()
    assert server.get("/health")[0] == 200
    r = client.completions.create(model="", prompt="Hi", temperature=0, max_tokens=2)
    assert r.usage.completion_tokens == 2 and time.time() - t0 < 30
    for t in threads:
        t.join()
    slow.sort(key=lambda r: r[2])
    assert len(slow) == 6
    for status, waited, stall in slow:  # in the request line, the headers or the body: 408 after the timeout
        assert status == 408 and waited < 20, slow
    # Still serving, nothing leaked.
    assert server.get("/health")[0] == 200
    m = server.idle_metrics()
    assert m["ember_active_sequences"] == 0 and m["ember_queue_depth"] == 0
    r = client.chat.completions.create(model="", temperature=0, max_tokens=3, messages=[{"role": "user", "content": "Hi"}])
    assert r.choices[0].message.content


def test_pipelined_requests_are_all_answered(server):
    # Three requests in one packet (HTTP/1.1 pipelining): three answers, in order, on the one connection.
    reqs = (b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" +
            b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 16\r\n\r\n{\"prompt\": \"hi\"}" +
            b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(reqs)
        buf = read_until(s, b"no such marker: until the server closes")
    assert buf.count(b"HTTP/1.1 200 OK") == 3, buf
    assert buf.index(b'"status":"ok"') < buf.index(b'"tokens"') < buf.index(b'"object":"list"')


def test_connections_past_the_bound_get_503():
    # --http-threads 2: two connections are served, two more may wait for a thread; the fifth is answered 503 with
    # Retry-After at once (cpp-httplib's own pool would queue it, and any number more, without a bound).
    from conftest import SMOLLM2, Server, need_smollm2
    need_smollm2()
    s = Server(SMOLLM2, "--http-threads", "2", name="server-conns")
    try:
        idle = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(4)]  # they send nothing
        time.sleep(0.5)
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
            t0 = time.time()
            c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            buf = read_until(c, b"\r\n\r\n")
            assert time.time() - t0 < 2
        assert buf.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in buf, buf
        for c in idle:
            c.close()
        t0, shed = time.time(), 1
        while True:  # the threads see the closes and serve again
            status = s.get("/health")[0]
            if status == 200:
                break
            assert status == 503 and time.time() - t0 < 10
            shed += 1
            time.sleep(0.1)
        assert s.metrics()['ember_requests_total{endpoint="other",status="5xx"}'] == shed
    finally:
        assert s.stop() == 0
