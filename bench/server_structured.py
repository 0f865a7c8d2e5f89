#!/usr/bin/env python3
"""Decode speed of `ember serve` with and without a JSON Schema (issue 16: "with a schema ≥ 95 % of the tok/s without
one"), through HTTP, standard library only (it runs on the GPU machine as it is).

Starts `ember serve -m MODEL --device D`, then alternates R times: a free completion (ignore_eos, --tokens tokens)
and a `response_format: json_schema` one (the schema below); completion tokens / elapsed seconds of each, every
constrained reply checked with json.loads and the schema's required key. Prints a markdown table.

  python3 bench/server_structured.py --ember build/bin/ember -m MODEL.gguf [--device cuda] [--tokens 256] [-r 3]
"""
import argparse
import http.client
import json
import re
import subprocess
import sys
import threading
import time

SCHEMA = {"type": "object", "properties": {"story": {"type": "string"}, "words": {"type": "integer"}},
          "required": ["story", "words"]}


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = json.loads(r.read())
    dt = time.perf_counter() - t0
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {data}")
    return data, dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("-r", type=int, default=3)
    a = ap.parse_args()
    p = subprocess.Popen([a.ember, "serve", "-m", a.model, "--port", "0", "--device", a.device],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port = None
    t_end = time.time() + 120
    while port is None and time.time() < t_end:
        line = p.stdout.readline()
        if not line:
            break
        m = re.search(r"127\.0\.0\.1:(\d+)", line) or re.search(r"port (\d+)", line)
        if m:
            port = int(m.group(1))
    if port is None:
        p.kill()
        sys.exit("server did not report its port")
    threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()  # keep its log pipe drained
    msgs = [{"role": "user", "content": "Write a short story as JSON."}]
    rows, bad = [], 0
    try:
        post(port, {"messages": msgs, "max_tokens": 8})  # warm-up
        for _ in range(a.r):
            d, dt = post(port, {"messages": msgs, "max_tokens": a.tokens, "temperature": 0, "ignore_eos": True})
            rows.append(("free", d["usage"]["completion_tokens"], dt, "-"))
            d, dt = post(port, {"messages": msgs, "max_tokens": a.tokens, "temperature": 0,
                                "response_format": {"type": "json_schema",
                                                    "json_schema": {"name": "s", "schema": SCHEMA, "strict": True}}})
            text = d["choices"][0]["message"]["content"]
            try:
                ok = all(k in json.loads(text) for k in SCHEMA["required"])
            except ValueError:
                ok = False
            bad += not ok
            rows.append(("json_schema", d["usage"]["completion_tokens"], dt,
                         f"{'valid' if ok else 'INVALID'}, finish {d['choices'][0]['finish_reason']}"))
    finally:
        p.terminate()
        p.wait(timeout=30)
    print(f"`ember serve --device {a.device}` on {a.model}: chat completion, temperature 0, max_tokens {a.tokens}\n")
    print("| request | completion tokens | seconds | tok/s (incl. prefill and HTTP) | reply |")
    print("|---|---|---|---|---|")
    for kind, n, dt, note in rows:
        print(f"| {kind} | {n} | {dt:.3f} | {n / dt:.1f} | {note} |")
    free = [n / dt for k, n, dt, _ in rows if k == "free"]
    js = [n / dt for k, n, dt, _ in rows if k != "free"]
    print(f"\nwith a schema: {sum(js) / len(js) / (sum(free) / len(free)) * 100:.1f} % of the free tok/s; "
          f"{bad} invalid replies")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
