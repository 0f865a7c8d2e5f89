# The OpenAI API contract through the official client: chat and completions (streamed and not) equal to
# `ember generate` and to llama.cpp's greedy goldens, models, usage, stop strings, logprobs, seeds, errors.
import json
import math
import signal
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request

import openai
import pytest

from conftest import EMBER, FIXTURES, SMOLLM2, Server, ember_generate

GOLDEN = json.load(open(FIXTURES / "smollm2/greedy_f32dequant.json"))
EOS = 2  # <|im_end|> of SmolLM2


def golden_text(server, case):
    ids = case["generated_ids"]
    ids = ids[:ids.index(EOS)] if EOS in ids else ids
    status, body = server.post("/detokenize", {"tokens": ids})
    assert status == 200
    return body["prompt"], len(ids), EOS in case["generated_ids"]


def test_models(client, server):
    models = client.models.list().data
    assert len(models) == 1 and models[0].id == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert client.models.retrieve(models[0].id).id == models[0].id


@pytest.mark.parametrize("question", ["What is the capital of France?", "Write one sentence about the moon."])
def test_chat_greedy_equals_ember_generate(client, question):
    r = client.chat.completions.create(model="SmolLM2-135M-Instruct.Q4_1.gguf", temperature=0, max_tokens=48,
                                       messages=[{"role": "user", "content": question}])
    assert r.choices[0].message.content == ember_generate(question, 48, chat=True)
    assert r.choices[0].message.role == "assistant"
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")


def test_chat_greedy_equals_llama_cpp(client, server):
    # llama.cpp (F32 weights dequantized from the same file) greedy on the chat prompts of chat.json [0, 2], rendered
    # by jinja2 and tokenized by llama.cpp: our rendering + tokenization must give the same ids, and the reply the
    # same tokens up to the end-of-sequence token.
    chats = json.load(open(FIXTURES / "smollm2/chat.json"))["cases"]
    checked = 0
    for case in [c for c in GOLDEN["cases"] if c["kind"] == "chat"]:
        msgs = next(c["messages"] for c in chats if c["text"] == case["prompt"])
        status, tok = server.post("/tokenize", {"messages": msgs})
        assert status == 200 and tok["tokens"] == case["prompt_ids"]
        want, n, ended = golden_text(server, case)
        r = client.chat.completions.create(model="", temperature=0, max_tokens=64, messages=msgs)
        assert r.choices[0].message.content == want
        assert r.choices[0].finish_reason == ("stop" if ended else "length")
        assert r.usage.completion_tokens == n + ended
        checked += 1
    assert checked == 2


def test_completions_greedy_equals_llama_cpp(client, server):
    for case in [c for c in GOLDEN["cases"] if c["kind"] == "text"][:3]:
        want, n, ended = golden_text(server, case)
        r = client.completions.create(model="", prompt=case["prompt"], temperature=0, max_tokens=64)
        assert r.choices[0].text == want, case["prompt"]
        assert r.usage.prompt_tokens == len(case["prompt_ids"])
        assert r.usage.completion_tokens == 64
        # The same prompt as token ids.
        r2 = client.completions.create(model="", prompt=case["prompt_ids"], temperature=0, max_tokens=64)
        assert r2.choices[0].text == want


def test_completion_equals_ember_generate(client):
    prompt = "The three primary colors are"
    r = client.completions.create(model="", prompt=prompt, temperature=0, max_tokens=40)
    assert r.choices[0].text == ember_generate(prompt, 40, chat=False)
    assert r.object == "text_completion"


def test_chat_streaming_equals_whole(client):
    kw = dict(model="", temperature=0, max_tokens=40, messages=[{"role": "user", "content": "Name three fruits."}])
    whole = client.chat.completions.create(**kw)
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens
    assert all(c.usage is None for c in chunks[:-1])
    # Without include_usage: no usage chunk.
    plain = list(client.chat.completions.create(stream=True, **kw))
    assert all(c.usage is None and c.choices for c in plain)


def test_completions_streaming_equals_whole(client):
    kw = dict(model="", prompt="Once upon a time", temperature=0, max_tokens=30)
    whole = client.completions.create(**kw)
    chunks = list(client.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole.choices[0].text
    assert chunks[-1].usage.completion_tokens == 30 and chunks[-1].usage.total_tokens == whole.usage.total_tokens


def test_usage_counts(client, server):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    status, tok = server.post("/tokenize", {"messages": msgs})
    assert status == 200
    r = client.chat.completions.create(model="", temperature=0, max_tokens=5, messages=msgs)
    assert r.usage.prompt_tokens == tok["count"] == len(tok["tokens"])
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 5
    assert r.usage.total_tokens == r.usage.prompt_tokens + 5


def test_stop_strings_across_token_boundaries(client):
    kw = dict(model="", temperature=0, max_tokens=60, messages=[{"role": "user", "content": "Count from 1 to 20."}])
    full = client.chat.completions.create(logprobs=True, **kw)
    text = full.choices[0].message.content
    toks = [t.token for t in full.choices[0].logprobs.content]
    assert "".join(toks).startswith(text[:20])
    # A stop string that starts inside one token and ends inside a later one.
    pos = len(toks[0]) + len(toks[1]) - 1
    stop = text[pos:pos + 4]
    assert len(stop) == 4 and text.find(stop) == pos, (text, stop)
    for stream in (False, True):
        if stream:
            chunks = list(client.chat.completions.create(stream=True, stop=[stop, "zzz"], **kw))
            got = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            fr = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        else:
            r = client.chat.completions.create(stop=stop, **kw)
            got, fr = r.choices[0].message.content, [r.choices[0].finish_reason]
        assert got == text[:pos], (stream, got, text[:pos])
        assert fr == ["stop"]


def log_softmax_rows(ids):
    """Raw logits of every position from `ember logits` (the engine's own forward, outside the server)."""
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        subprocess.run([EMBER, "logits", "-m", SMOLLM2, "--device", "cpu", "--tokens", ",".join(map(str, ids)),
                        "--out", f.name], check=True, capture_output=True)
        raw = open(f.name, "rb").read()
    V = len(raw) // 4 // len(ids)
    rows = []
    for r in range(len(ids)):
        row = struct.unpack_from(f"<{V}f", raw, r * V * 4)
        m = max(row)
        lse = m + math.log(sum(math.exp(x - m) for x in row))
        rows.append([x - lse for x in row])
    return rows


def test_logprobs_are_the_models_log_softmax(client, server):
    prompt = [1, 4093, 198, 57, 5248, 314]  # token ids
    r = client.completions.create(model="", prompt=prompt, temperature=0, max_tokens=6, logprobs=3,
                                  extra_body={"return_tokens_as_token_ids": True})
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 6
    gen = [int(t.split(":")[1]) for t in lp.tokens]  # "token_id:123" (vLLM's form)
    rows = log_softmax_rows(prompt + gen)
    for k, (tok_lp, top) in enumerate(zip(lp.token_logprobs, lp.top_logprobs)):
        want = rows[len(prompt) - 1 + k]
        best = sorted(range(len(want)), key=lambda v: -want[v])[:3]
        assert gen[k] == best[0]  # greedy
        assert abs(tok_lp - want[gen[k]]) < 1e-3
        assert sorted(top) == sorted(f"token_id:{v}" for v in best)
        for v in best:
            assert abs(top[f"token_id:{v}"] - want[v]) < 1e-3
    # Chat format: per-token entries with bytes and top_logprobs, and the token texts spell the reply.
    c = client.chat.completions.create(model="", temperature=0, max_tokens=4, logprobs=True, top_logprobs=2,
                                       messages=[{"role": "user", "content": "Hi"}])
    entries = c.choices[0].logprobs.content
    assert len(entries) == 4
    for e in entries:
        assert e.logprob <= 0 and len(e.top_logprobs) == 2 and bytes(e.bytes).decode(errors="replace") == e.token
        assert e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob and e.top_logprobs[0].token == e.token
    assert "".join(e.token for e in entries) == c.choices[0].message.content


def test_seeded_sampling_repeats(client):
    kw = dict(model="", temperature=0.9, top_p=0.95, seed=1234, max_tokens=24, presence_penalty=0.3,
              frequency_penalty=0.2, extra_body={"repetition_penalty": 1.1, "top_k": 40, "min_p": 0.02},
              messages=[{"role": "user", "content": "Tell me a story."}])
    a = client.chat.completions.create(**kw).choices[0].message.content
    b = client.chat.completions.create(**kw).choices[0].message.content
    assert a == b
    kw["seed"] = 99
    outs = {client.chat.completions.create(**kw).choices[0].message.content for _ in range(2)} | {a}
    assert len(outs) >= 2  # another seed gives another story


def test_refusals_name_the_parameter(client):
    base = dict(model="", messages=[{"role": "user", "content": "x"}], max_tokens=2)
    for extra, param in [(dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}]), "tools"),
                         (dict(response_format={"type": "yaml"}), "response_format"),
                         (dict(n=2), "n"), (dict(logit_bias={"5": 1}), "logit_bias"),
                         (dict(extra_body={"frobnicate": True}), "frobnicate"),
                         (dict(temperature=3), "temperature")]:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(**base, **extra)
        assert e.value.status_code == 400
        assert e.value.body["param"] == param and param in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="", prompt="x", echo=True, max_tokens=2)
    assert e.value.body["param"] == "echo"


def test_errors_and_codes(client, server):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-17", messages=[{"role": "user", "content": "x"}])
    assert e.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="", prompt="hello " * 3000, max_tokens=2000)
    msg = e.value.body["message"]
    assert e.value.body["code"] == "context_length_exceeded" and "4096" in msg and "2000" in msg
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model="", prompt=[49152 + 5], max_tokens=2)  # outside the vocabulary
    assert server.post("/v1/chat/completions", b"{not json")[0] == 400
    status, body = server.post("/v1/chat/completions", b"[]")
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    assert server.get("/v1/nothing")[0] == 404
    assert server.get("/v1/chat/completions")[0] == 405
    status, body = server.post("/v1/completions", b"x" * 1_100_000)  # --max-body 1000000
    assert status == 413 and "error" in body


def test_sse_framing_on_the_wire(server):
    # The raw stream, as any SSE client sees it: "data: {json}" events (and ": keepalive" comments) separated by blank
    # lines, the role first, the finish_reason, the usage chunk (choices []), then "data: [DONE]".
    body = {"model": "", "messages": [{"role": "user", "content": "Hi"}], "temperature": 0,
            "max_completion_tokens": 5, "stream": True, "stream_options": {"include_usage": True},
            "seed": None, "stop": None}  # a JSON null counts as absent (clients send them for defaults)
    req = urllib.request.Request(server.url + "/v1/chat/completions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.headers["Content-Type"].startswith("text/event-stream")
        raw = r.read().decode()
    assert raw.endswith("data: [DONE]\n\n")
    events = raw.split("\n\n")[:-1]
    assert all(e.startswith("data: ") or e.startswith(":") for e in events), events
    data = [e[len("data: "):] for e in events if e.startswith("data: ")]
    chunks = [json.loads(d) for d in data[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert finish == ["length"]  # max_completion_tokens 5
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5


def test_binds_loopback_by_default(server):
    # The fixture gives no --host: the listening socket is 127.0.0.1 only (/proc/net/tcp, state 0A = LISTEN).
    listening = []
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(path).read().splitlines()[1:]:
            f = line.split()
            addr, port = f[1].split(":")
            if f[3] == "0A" and int(port, 16) == server.port:
                listening.append(addr)
    assert listening == ["0100007F"]


def test_tokenize_detokenize_roundtrip(server):
    status, t = server.post("/tokenize", {"prompt": "Hello, world! ünïcödé"})
    assert status == 200 and t["count"] == len(t["tokens"]) > 3
    status, d = server.post("/detokenize", {"tokens": t["tokens"]})
    assert status == 200 and d["prompt"] == "Hello, world! ünïcödé"
    out = subprocess.run([EMBER, "tokenize", "-m", SMOLLM2, "-p", "Hello, world! ünïcödé"], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert t["tokens"] == [int(x) for x in out.split(",")]  # the same ids as `ember tokenize`


def test_health_and_metrics(client, server):
    status, body = server.get("/health")
    assert status == 200 and json.loads(body)["status"] == "ok"
    before = server.metrics()
    client.completions.create(model="", prompt="Hi", temperature=0, max_tokens=3)
    after = server.idle_metrics()
    key = 'ember_requests_total{endpoint="completions",status="2xx"}'
    assert after[key] == before[key] + 1
    assert after["ember_generation_tokens_total"] >= before["ember_generation_tokens_total"] + 3
    assert after["ember_prompt_tokens_total"] > before["ember_prompt_tokens_total"]
    assert after["ember_time_to_first_token_seconds_count"] > before["ember_time_to_first_token_seconds_count"]
    assert after["ember_inter_token_seconds_count"] >= before["ember_inter_token_seconds_count"] + 2
    assert after["ember_request_duration_seconds_count"] > before["ember_request_duration_seconds_count"]
    assert after["ember_active_sequences"] == 0 and after["ember_queue_depth"] == 0
    assert after["ember_max_sequences"] == 4
    # KV and state pool use while a sequence runs, and back to none after it.
    stream = client.completions.create(model="", prompt="1, 2, 3,", max_tokens=200, temperature=0, stream=True,
                                       extra_body={"ignore_eos": True})
    next(iter(stream))
    t0 = time.time()
    while (during := server.metrics())["ember_kv_tokens"] == 0:  # the gauges are set at the end of the worker's round
        assert time.time() - t0 < 10
        time.sleep(0.02)
    assert during["ember_active_sequences"] >= 1 and during["ember_kv_bytes"] > 0
    assert "ember_state_bytes" in during  # recurrent state (0 for a Llama-family model: it has none)
    stream.close()
    idle = server.idle_metrics(timeout=30)
    assert idle["ember_kv_tokens"] == 0 and idle["ember_active_sequences"] == 0


def test_api_key():
    from conftest import need_smollm2
    need_smollm2()
    s = Server(SMOLLM2, "--api-key", "sekret", name="server-key")
    try:
        assert s.get("/health")[0] == 200  # public
        assert s.get("/")[0] == 200  # the static page (no data; its API calls carry the key typed into it)
        model = "SmolLM2-135M-Instruct.Q4_1.gguf"
        for path in ("/v1/models", "/v1/models/" + model, "/metrics"):  # every other endpoint needs the key
            status, body = s.get(path)
            assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key", path
        for path, body in (("/tokenize", {"prompt": "x"}), ("/detokenize", {"tokens": [1]}),
                           ("/v1/completions", {"prompt": "x", "max_tokens": 1}),
                           ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_tokens": 1})):
            status, err = s.post(path, body)
            assert status == 401 and err["error"]["type"] == "authentication_error", path
            assert s.post(path, body, {"Authorization": "Bearer sekret"})[0] == 200, path
        assert s.get("/v1/models", {"Authorization": "Bearer wrong"})[0] == 401
        assert s.get("/v1/models", {"Authorization": "Bearer sekret"})[0] == 200
        with pytest.raises(openai.AuthenticationError) as e:
            openai.OpenAI(base_url=s.url + "/v1", api_key="nope", max_retries=0).models.list()
        assert e.value.status_code == 401
        ok = openai.OpenAI(base_url=s.url + "/v1", api_key="sekret", max_retries=0)
        r = ok.chat.completions.create(model="", max_tokens=2, messages=[{"role": "user", "content": "Hi"}])
        assert r.usage.completion_tokens >= 1
    finally:
        assert s.stop() == 0


def test_reasoning_split_qwen35(qwen35_dir):
    # Random weights with the real Qwen3.5 template: with thinking on, the prompt ends with an open <think>, so the
    # whole reply is reasoning; with enable_thinking false it is content. Both equal `ember generate --chat`.
    s = Server(qwen35_dir, name="server-qwen35")
    try:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0)
        msgs = [{"role": "user", "content": "Why is the sky blue?"}]

        def generate(*flags):
            out = subprocess.run([EMBER, "generate", "-m", str(qwen35_dir), "-p", msgs[0]["content"], "--chat",
                                  "-n", "12", "--temp", "0", "--device", "cpu", *flags],
                                 capture_output=True, text=True, check=True).stdout
            return out[len(msgs[0]["content"]) + 1:-1]

        def printable(t):  # `ember generate` writes with fputs, which stops at a NUL byte of the random reply
            return t.replace("\0", "")

        think = c.chat.completions.create(model="", temperature=0, max_tokens=12, messages=msgs)
        m = think.choices[0].message
        assert printable(m.model_extra.get("reasoning_content")) == generate() and not m.content
        off = {"chat_template_kwargs": {"enable_thinking": False}}
        plain = c.chat.completions.create(model="", temperature=0, max_tokens=12, messages=msgs, extra_body=off)
        assert printable(plain.choices[0].message.content) == generate("--no-think")
        assert not plain.choices[0].message.model_extra.get("reasoning_content")
        # Streamed: the reasoning arrives in reasoning_content deltas, apart from content.
        chunks = list(c.chat.completions.create(model="", temperature=0, max_tokens=12, messages=msgs, stream=True))
        streamed = "".join(ch.choices[0].delta.model_extra.get("reasoning_content") or "" for ch in chunks if ch.choices)
        assert streamed == m.model_extra["reasoning_content"]
        assert all(not (ch.choices and ch.choices[0].delta.content) for ch in chunks)
        for kw, usage in (({}, think.usage), (off, plain.usage)):
            status, tok = s.post("/tokenize", {"messages": msgs, **kw})
            assert status == 200 and tok["count"] == usage.prompt_tokens
    finally:
        assert s.stop() == 0


def test_queue_full_is_503_with_retry_after():
    from conftest import need_smollm2
    need_smollm2()
    s = Server(SMOLLM2, "--max-seqs", "1", "--max-queue", "0", name="server-full")
    try:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0)
        stream = c.completions.create(model="", prompt="1, 2, 3,", max_tokens=400, temperature=0, stream=True,
                                      extra_body={"ignore_eos": True})
        next(iter(stream))  # the only slot is busy
        with pytest.raises(openai.APIStatusError) as e:
            c.completions.create(model="", prompt="Hi", max_tokens=2)
        assert e.value.status_code == 503 and e.value.response.headers["retry-after"] == "1"
        assert e.value.body["code"] == "queue_full"
        stream.close()  # the disconnect frees the slot: the next request is served
        m = s.idle_metrics(timeout=30)
        assert m["ember_requests_rejected_queue_full_total"] == 1 and m["ember_active_sequences"] == 0
        assert c.completions.create(model="", prompt="Hi", max_tokens=2).usage.completion_tokens == 2
    finally:
        assert s.stop() == 0


def test_a_client_leaving_a_non_streamed_request_cancels_it(server):
    # No byte is written before the end of a non-streamed reply, so the server watches the socket itself: the client
    # closes mid-generation, and its sequence is cancelled and its slot freed within a step or two.
    before = server.idle_metrics()
    body = json.dumps({"prompt": "1, 2, 3,", "max_tokens": 2000, "temperature": 0, "ignore_eos": True}).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    t0 = time.time()
    while server.metrics()["ember_generation_tokens_total"] < before["ember_generation_tokens_total"] + 5:
        assert time.time() - t0 < 60
        time.sleep(0.05)
    s.close()
    after = server.idle_metrics(timeout=5)
    assert after["ember_active_sequences"] == 0 and after["ember_kv_tokens"] == 0
    assert after["ember_requests_cancelled_total"] == before["ember_requests_cancelled_total"] + 1
    assert after["ember_generation_tokens_total"] < before["ember_generation_tokens_total"] + 2000
    key = 'ember_requests_total{endpoint="completions",status="4xx"}'  # 499: the client closed the request
    assert after[key] == before[key] + 1


def test_sigterm_finishes_in_flight_then_exits():
    from conftest import need_smollm2
    need_smollm2()
    s = Server(SMOLLM2, "--grace", "1", name="server-sigterm")
    c = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0)
    short = c.completions.create(model="", prompt="Hi", max_tokens=3, temperature=0, stream=True)
    long = c.completions.create(model="", prompt="1, 2, 3,", max_tokens=3000, temperature=0, stream=True,
                                extra_body={"ignore_eos": True})
    it_long = iter(long)
    next(it_long)
    s.proc.terminate()  # SIGTERM while both stream
    t0 = time.time()
    # The short reply completes within the grace time; the long one is cancelled at its end with an error event.
    assert "".join(ch.choices[0].text for ch in short if ch.choices)
    with pytest.raises(openai.APIError):
        for _ in it_long:
            pass
    assert s.stop(sig_timeout=30) == 0 and time.time() - t0 < 30
    assert "shutting down" in open(s.log_path).read()


def test_sigint_stops_accepting_and_finishes_in_flight():
    from conftest import need_smollm2
    need_smollm2()
    s = Server(SMOLLM2, "--grace", "20", name="server-sigint")
    c = openai.OpenAI(base_url=s.url + "/v1", api_key="x", max_retries=0)
    stream = c.completions.create(model="", prompt="1, 2, 3,", max_tokens=40, temperature=0, stream=True,
                                  extra_body={"ignore_eos": True})
    it = iter(stream)
    text = next(it).choices[0].text
    s.proc.send_signal(signal.SIGINT)  # Ctrl-C
    t0 = time.time()
    while True:  # the listener closes at once: new connections are refused
        try:
            socket.create_connection(("127.0.0.1", s.port), timeout=1).close()
        except ConnectionRefusedError:
            break
        assert time.time() - t0 < 5, "still accepting connections after SIGINT"
        time.sleep(0.05)
    chunks = list(it)  # the reply in flight completes within the grace time
    text += "".join(ch.choices[0].text for ch in chunks if ch.choices)
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason] == ["length"]
    assert text
    assert s.proc.wait(timeout=30) == 0  # exits by itself, cleanly
    s.stop()
    log = open(s.log_path).read()
    assert "SIGINT, shutting down" in log and "ember serve: stopped" in log
