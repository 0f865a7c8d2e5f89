#!/usr/bin/env python3
"""Load generator for `ember serve` (Python standard library only: it runs on the GPU machine as it is).

Starts `ember serve` (or uses --url), sends streaming /v1/completions requests from 1, 8, 32, 64 concurrent clients
(ignore_eos, so every reply is --max-tokens long), and prints a markdown table: aggregate tok/s, TTFT and
inter-token latency p50 / p99, and the server's own cost per generated token — the wall time per token beyond what
the engine spent in model calls (ember_engine_seconds_total of /metrics), and the server process's CPU time per
token (its threads other than the engine worker). Beside it, `ember generate` on the same prompt and length (the batch-1 reference: HTTP vs direct).

  python3 bench/server_load.py --ember build/bin/ember -m MODEL.gguf [--device cuda] [--clients 1,8,32,64]
  python3 bench/server_load.py --url http://127.0.0.1:8080   # a running server (no CPU / generate columns)
"""
import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse

PROMPT = "The history of the city begins"


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def stream_one(host, port, max_tokens, key):
    """One streaming completion: (ttft s, [gaps between text chunks s], completion tokens, first→last chunk s) or
    raises. A chunk carries one token's text (SmolLM2-style tokenizers), fewer when a token ends mid-character."""
    body = json.dumps({"prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                       "stream": True, "stream_options": {"include_usage": True}})
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    conn = http.client.HTTPConnection(host, port, timeout=600)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body, headers)
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    ttft, first, last, gaps, tokens = None, None, None, [], 0
    while True:
        line = resp.readline()
        if not line:
            break
        if not line.startswith(b"data: "):
            continue
        data = line[6:].strip()
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("usage"):
            tokens = chunk["usage"]["completion_tokens"]
        if chunk.get("choices") and chunk["choices"][0].get("text"):
            now = time.perf_counter()
            if ttft is None:
                ttft, first = now - t0, now
            else:
                gaps.append(now - last)
            last = now
    conn.close()
    return ttft, gaps, tokens, (last - first) if first is not None else 0.0


def parse_prometheus(text):
    """Prometheus text → {"name{labels}": value} (comments skipped)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def metrics(host, port, key):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("GET", "/metrics", headers={"Authorization": "Bearer " + key} if key else {})
    text = conn.getresponse().read().decode()
    conn.close()
    return parse_prometheus(text)


def cpu_seconds(pid):
    """CPU seconds (utime + stime) of the server's threads other than the engine worker ("ember-engine", and the
    OpenMP threads it started, which inherit its name): the HTTP, JSON and detokenization work."""
    if not pid:
        return None
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = open(f"/proc/{pid}/task/{tid}/stat").read()
        except OSError:
            continue  # the thread ended
        comm, rest = stat.split("(", 1)[1].rsplit(")", 1)
        if comm != "ember-engine":
            f = rest.split()
            total += int(f[11]) + int(f[12])
    return total / os.sysconf("SC_CLK_TCK")


def run_level(host, port, clients, requests_per_client, max_tokens, key, pid):
    results, errors, lock = [], [], threading.Lock()

    def client():
        for _ in range(requests_per_client):
            try:
                r = stream_one(host, port, max_tokens, key)
                with lock:
                    results.append(r)
            except Exception as e:  # noqa: BLE001 — every failure is reported
                with lock:
                    errors.append(repr(e))

    m0, c0, t0 = metrics(host, port, key), cpu_seconds(pid), time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    m1, c1 = metrics(host, port, key), cpu_seconds(pid)
    tokens = sum(r[2] for r in results)
    engine = m1["ember_engine_seconds_total"] - m0["ember_engine_seconds_total"]
    row = {
        "clients": clients, "requests": len(results), "failed": len(errors), "tokens": tokens, "wall": wall,
        "tps": tokens / wall if wall else 0,
        "ttft50": pct([r[0] for r in results if r[0] is not None], 50) * 1e3,
        "ttft99": pct([r[0] for r in results if r[0] is not None], 99) * 1e3,
        "itl50": pct([g for r in results for g in r[1]], 50) * 1e3,
        "itl99": pct([g for r in results for g in r[1]], 99) * 1e3,
        # Wall time per token the engine did not spend in model calls (the worker runs one sequence step at a
        # time, so the rest is queueing, HTTP, JSON, detokenization — the server's own cost).
        "over_us": (wall - engine) / tokens * 1e6 if tokens else float("nan"),
        "engine_us": engine / tokens * 1e6 if tokens else float("nan"),
        "cpu_us": (c1 - c0) / tokens * 1e6 if tokens and c0 is not None else float("nan"),
        "errors": errors[:3],
        # Per stream, as `ember generate` reports decode speed: (chunks − 1) / (last chunk − first chunk).
        "decode_tps": statistics.fmean([len(r[1]) / r[3] for r in results if r[3] > 0]) if results else 0,
        # The engine worker's own view: mean time between a sequence's tokens (the ember_inter_token histogram).
        "worker_tps": (m1["ember_inter_token_seconds_count"] - m0["ember_inter_token_seconds_count"]) /
                      max(1e-12, m1["ember_inter_token_seconds_sum"] - m0["ember_inter_token_seconds_sum"]),
    }
    return row


def generate_tps(ember, model, device, max_tokens, threads):
    cmd = [ember, "generate", "-m", model, "-p", PROMPT, "-n", str(max_tokens), "--temp", "0", "--ignore-eos",
           "--device", device]
    if threads:
        cmd += ["--threads", str(threads)]
    err = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
    m = re.search(r"generated: (\d+) tokens, ([\d.]+) tok/s", err)
    return float(m.group(2)) if m else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running server (else --ember and -m start one)")
    ap.add_argument("--ember", default="build/bin/ember")
    ap.add_argument("-m", "--model")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads of the engine (0: its default)")
    ap.add_argument("--clients", default="1,8,32,64")
    ap.add_argument("--requests", type=int, default=4, help="requests per client per level")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--api-key", default="")
    ap.add_argument("--out", help="also write the table to this file")
    a = ap.parse_args()
    levels = [int(x) for x in a.clients.split(",")]
    proc, pid = None, None
    if a.url:
        u = urllib.parse.urlparse(a.url)
        host, port = u.hostname, u.port or 80
    else:
        if not a.model:
            ap.error("give --url or -m MODEL")
        cmd = [a.ember, "serve", "-m", a.model, "--port", "0", "--device", a.device, "--max-seqs", str(max(levels)),
               "--max-queue", str(4 * max(levels)), "--timeout", "60"]
        if a.threads:
            cmd += ["--threads", str(a.threads)]
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        line = proc.stderr.readline()
        m = re.search(r"on http://([\d.]+):(\d+)", line)
        if not m:
            proc.kill()
            sys.exit(f"ember serve did not start: {line}{proc.stderr.read()}")
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
        host, port, pid = m.group(1), int(m.group(2)), proc.pid
    try:
        stream_one(host, port, 8, a.api_key)  # warm-up (first-use allocations, graph captures)
        rows = [run_level(host, port, c, a.requests, a.max_tokens, a.api_key, pid) for c in levels]
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=120)
    lines = [f"`ember serve` load, {a.max_tokens} tokens per streamed completion (ignore_eos), prompt {PROMPT!r}, "
             f"{a.requests} requests per client",
             "",
             "| clients | requests | failed | tok/s (all streams) | TTFT p50 ms | TTFT p99 ms | inter-token p50 ms | "
             "inter-token p99 ms | engine µs/token | server µs/token (wall − engine) | server threads CPU µs/token |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['clients']} | {r['requests']} | {r['failed']} | {r['tps']:.1f} | {r['ttft50']:.1f} | "
                     f"{r['ttft99']:.1f} | {r['itl50']:.2f} | {r['itl99']:.2f} | {r['engine_us']:.0f} | "
                     f"{r['over_us']:.1f} | {r['cpu_us']:.0f} |")
    if not a.url:
        g = generate_tps(a.ember, a.model, a.device, a.max_tokens, a.threads)
        one = next((r for r in rows if r["clients"] == 1), None)
        lines += ["", f"`ember generate` (same prompt, {a.max_tokens} tokens): {g:.1f} tok/s decode"]
        if one and one["decode_tps"] > 0:
            lines.append(f"batch 1 through HTTP: {one['decode_tps']:.1f} tok/s decode per stream (first to last token, "
                         f"as `ember generate` counts) = {100 * one['decode_tps'] / g:.1f} % of `ember generate`; "
                         f"{1e3 / one['itl50']:.1f} tok/s from the inter-token p50; {one['tps']:.1f} tok/s end to end "
                         f"(prefill, TTFT and request setup included); the engine worker between tokens: {one['worker_tps']:.1f} tok/s")
    for r in rows:
        if r["errors"]:
            lines.append(f"errors at {r['clients']} clients: {r['errors']}")
    text = "\n".join(lines)
    print(text)
    if a.out:
        open(a.out, "w").write(text + "\n")
    sys.exit(1 if any(r["failed"] for r in rows) else 0)


if __name__ == "__main__":
    main()
