# Load: 32 concurrent streaming clients for a bounded time, a quarter of the streams dropped mid-way, and now and
# then a non-streamed request abandoned by its client (a client timeout). Every reply that completes equals the same
# request run alone (greedy), no request fails, no slot leaks (/metrics), and the resident memory stays flat.
import os
import random
import threading
import time

import openai

PROMPTS = [
    ("chat", "What is the capital of France?"),
    ("chat", "Name three colors."),
    ("chat", "Write a haiku about rain."),
    ("text", "The quick brown fox"),
    ("text", "def add(a, b):\n"),
    ("text", "Paris is a city in"),
]
CLIENTS = 32
SECONDS = float(os.environ.get("EMBER_LOAD_SECONDS", "40"))
MAX_TOKENS = 16


def start(client, kind, prompt, stream):
    kw = dict(model="", temperature=0, max_tokens=MAX_TOKENS, stream=stream)
    if kind == "chat":
        return client.chat.completions.create(messages=[{"role": "user", "content": prompt}], **kw)
    return client.completions.create(prompt=prompt, **kw)


def piece(kind, chunk):
    if not chunk.choices:
        return "", None
    c = chunk.choices[0]
    return (c.delta.content or "") if kind == "chat" else c.text, c.finish_reason


def test_32_streaming_clients_with_disconnects(server, client):
    # The answers alone, one request at a time.
    ref = {}
    for kind, prompt in PROMPTS:
        r = start(client, kind, prompt, stream=False)
        ref[prompt] = (r.choices[0].message.content if kind == "chat" else r.choices[0].text, r.choices[0].finish_reason)
    before = server.idle_metrics()
    stats = {"completed": 0, "dropped": 0, "abandoned": 0, "wrong": [], "errors": []}
    lock = threading.Lock()
    rss = []
    deadline = time.time() + SECONDS

    def worker(seed):
        rng = random.Random(seed)
        while time.time() < deadline:
            kind, prompt = rng.choice(PROMPTS)
            drop_after = rng.randrange(1, 6) if rng.random() < 0.25 else None
            if drop_after is None and rng.random() < 0.1:  # non-streamed, the client gives up after a while
                try:
                    impatient = client.with_options(timeout=rng.uniform(0.1, 1.0))
                    r = start(impatient, kind, prompt, stream=False)
                    got = (r.choices[0].message.content if kind == "chat" else r.choices[0].text,
                           r.choices[0].finish_reason)
                    with lock:  # it finished in time: it must be right
                        stats["completed"] += 1
                        if got != ref[prompt]:
                            stats["wrong"].append((prompt, *got, ref[prompt]))
                except openai.APITimeoutError:
                    with lock:
                        stats["dropped"] += 1
                        stats["abandoned"] += 1
                except Exception as e:
                    with lock:
                        stats["errors"].append(repr(e))
                continue
            try:
                stream = start(client, kind, prompt, stream=True)
                text, finish, n = "", None, 0
                for chunk in stream:
                    p, fr = piece(kind, chunk)
                    text += p
                    finish = fr or finish
                    n += 1
                    if drop_after is not None and n >= drop_after:
                        break
                if drop_after is not None and n >= drop_after:
                    stream.close()  # the client disconnects mid-stream
                    with lock:
                        stats["dropped"] += 1
                    continue
                with lock:
                    stats["completed"] += 1
                    if (text, finish) != ref[prompt]:
                        stats["wrong"].append((prompt, text, finish, ref[prompt]))
            except Exception as e:  # any failure of a request that was not dropped counts
                with lock:
                    stats["errors"].append(repr(e))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        rss.append(server.rss_kb())
        time.sleep(1)
    for t in threads:
        t.join()
    after = server.idle_metrics(timeout=30)
    print(f"load: {stats['completed']} completed, {stats['dropped']} dropped ({stats['abandoned']} not streamed), "
          f"RSS samples (KiB) {rss[:3]} … {rss[-3:]}")
    assert not stats["errors"], stats["errors"][:5]
    assert not stats["wrong"], stats["wrong"][:3]
    assert stats["completed"] >= CLIENTS and stats["dropped"] >= 4 and stats["abandoned"] >= 1
    # No leaked slots or KV: everything back to zero once idle; the dropped streams were cancelled.
    assert after["ember_active_sequences"] == 0 and after["ember_queue_depth"] == 0 and after["ember_kv_tokens"] == 0
    assert after["ember_requests_cancelled_total"] > before["ember_requests_cancelled_total"]
    assert after["ember_requests_cancelled_total"] - before["ember_requests_cancelled_total"] <= stats["dropped"]
    assert after["ember_requests_rejected_queue_full_total"] == before["ember_requests_rejected_queue_full_total"]
    # Resident memory flat: the second half of the run does not grow beyond the first half's peak (+ 8 MiB slack).
    half = len(rss) // 2
    assert max(rss[half:]) <= max(rss[:half]) + 8 * 1024, rss
    # The server still answers correctly after the storm.
    kind, prompt = PROMPTS[0]
    r = start(client, kind, prompt, stream=False)
    assert (r.choices[0].message.content, r.choices[0].finish_reason) == ref[prompt]
