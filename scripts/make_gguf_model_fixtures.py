#!/usr/bin/env python3
"""Tiny GGUF model fixtures made by llama.cpp's own converter, with oracle logits.

Usage:  /opt/venv/bin/python scripts/make_gguf_model_fixtures.py [--only CASE ...] [--out DIR]
Needs:  /opt/venv (torch CPU, transformers 5.24, tokenizers, gguf) and the peer from scripts/setup-peer.sh
        (llama-cpp-python venv + its extracted sdist, whose vendor/llama.cpp/convert_hf_to_gguf.py is used).

For every case, tests/fixtures/gguf_models/<case>/ gets
  model-<t>.gguf       written by vendor/llama.cpp/convert_hf_to_gguf.py (f32 / bf16 / q8_0) or by llama.cpp's
                       quantizer (llama_cpp.llama_model_quantize: q4_k_m, q4_0) from an uncommitted F32 conversion
  prompt.json          {"tokens": [...]}, the fixed token sequence all logits are for (Qwen3.5 cases made from
                       tests/fixtures/qwen35/<src> point to that fixture's prompt.json / ref_logits.bin instead)
  ref_logits.bin       transformers fp32 (eager) logits of the original HF weights: the oracle for F32/BF16 files
                       (same values). All *.bin: raw little-endian float32 [n_tokens, vocab].
  dequant_logits_<t>.bin   (llama, qwen2, qwen3) transformers fp32 on the weights dequantized from model-<t>.gguf by
                       PyPI gguf-py (llama q/k rows un-permuted): the fp32 oracle for a quantized file
  llama_f32dequant_logits_<t>.bin  (qwen35) llama.cpp's F32 path on model-<t>.gguf dequantized to an F32 GGUF by
                       gguf-py: the fp32 oracle for a quantized Qwen3.5 file (this route matches
                       dequant_logits to ~7e-7 on the llama/qwen3 cases)
  llama_logits_<t>.bin llama.cpp's own logits on a quantized file (CPU, F32 KV cache, no flash attention); differs
                       from the fp32 oracles by llama.cpp's activation quantization (q8_0/q8_1/q8_K)
  tokenize.json        ids of a few texts by HF tokenizers with the tokenizer embedded in the files
  meta.json            dims, files (type, size, sha256, tensor types), agreement numbers (max/mean rel. L2 per
                       position, top-1) between all of the above and llama.cpp on each file.

Cases: llama_gqa_untied, llama_mqa_tied, qwen3_qknorm, qwen2_bias (F32 + Q8_0); llama_rope_linear, qwen2_yarn (F32,
RoPE linear / YaRN scaling); llama_kquant (Q4_K_M + Q4_0, hidden 256 so
K-quants apply); qwen35_flat_untied_gqa3_bf16 / qwen35_mm_tied_bf16 / qwen35_mm_tied_q8_0 (from
tests/fixtures/qwen35/*); qwen35_flat_gqa3_dkdv (BF16 + Q8_0, made here: flat, untied, nv = 3 nk, dk == dv).
The tiny tokenizers are byte-level BPEs trained here (HF tokenizers) with the pre-tokenizer regex of the
llama.cpp pre-type written into the file (llama-bpe, qwen2, qwen35). Deterministic (fixed seeds).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import gguf  # noqa: E402  (PyPI gguf-py: the independent dequantizer)
from gguf import quants as gquants  # noqa: E402
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "peer_llama_cpp"))
from paths import CACHE, llama_cpp_dir, peer_python, peer_src  # noqa: E402

transformers.logging.set_verbosity_error()
ROOT = HERE.parent
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "gguf_models"
QWEN35_FIX = ROOT / "tests" / "fixtures" / "qwen35"
N_TOKENS = 40
MARGIN_MIN = 0.05

# pre-tokenizer regexes (those of the model families; llama.cpp implements each under the given name)
PAT_LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")
PAT_QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
PAT_QWEN35 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")

TOK_TEXTS = [
    "Hello world! This is a test.",
    "We hold these truths to be self-evident, that all men are created equal.",
    "def f(x):\n    return x * 2  # comment\n",
    "Numbers: 1 12 123 1234 12345 3.14159",
    "  leading and   multiple   spaces\n\n\ttabs",
    "Unicode: café naïve Zürich — “quotes” 日本語 😀",
    "<|im_start|>user\nhi<|im_end|>\n",
]

CASES: dict[str, dict] = {
    "llama_gqa_untied": dict(arch="llama", hidden=64, heads=4, kv=2, head_dim=16, inter=160, layers=2, vocab=384,
                             tied=False, rope_theta=10000.0, eps=1e-5, pre="llama-bpe", add_bos=True,
                             outtypes=["f32", "q8_0"], seed=11),
    "llama_mqa_tied": dict(arch="llama", hidden=96, heads=3, kv=1, head_dim=32, inter=192, layers=2, vocab=320,
                           tied=True, rope_theta=500000.0, eps=1e-6, pre="llama-bpe", add_bos=True,
                           outtypes=["f32", "q8_0"], seed=12),
    "qwen3_qknorm": dict(arch="qwen3", hidden=64, heads=4, kv=2, head_dim=32, inter=128, layers=2, vocab=352,
                         tied=True, rope_theta=1000000.0, eps=1e-6, pre="qwen2", add_bos=False,
                         outtypes=["f32", "q8_0"], seed=13),
    # Qwen2: q/k/v biases (head dim 32, so the GPU attention runs it too).
    "qwen2_bias": dict(arch="qwen2", hidden=128, heads=4, kv=2, head_dim=32, inter=256, layers=2, vocab=352,
                       tied=True, rope_theta=1000000.0, eps=1e-6, pre="qwen2", add_bos=False,
                       outtypes=["f32", "q8_0"], seed=15),
    # RoPE context scaling (llama.cpp's converter writes rope.scaling.{type, factor, original_context_length}).
    "llama_rope_linear": dict(arch="llama", hidden=64, heads=2, kv=1, head_dim=32, inter=128, layers=2, vocab=320,
                              tied=True, rope_theta=10000.0, eps=1e-5, pre="llama-bpe", add_bos=True,
                              outtypes=["f32"], seed=18, rope={"rope_type": "linear", "factor": 4.0}),
    "qwen2_yarn": dict(arch="qwen2", hidden=64, heads=2, kv=1, head_dim=32, inter=128, layers=2, vocab=320,
                       tied=True, rope_theta=10000.0, eps=1e-6, pre="qwen2", add_bos=False, outtypes=["f32"],
                       seed=19, rope={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}),
    # K-quants need rows that are multiples of 256: hidden 256, ffn 256. F32 source is not committed.
    "llama_kquant": dict(arch="llama", hidden=256, heads=4, kv=2, head_dim=64, inter=256, layers=2, vocab=384,
                         tied=False, rope_theta=10000.0, eps=1e-5, pre="llama-bpe", add_bos=True,
                         outtypes=[], quantize=["Q4_K_M", "Q4_0"], seed=14),
    # Qwen3.5. flat_untied_gqa3 (dk 32 != dv 16) converts, but llama.cpp at this commit cannot load it (it
    # sizes attn_qkv as if dv == dk); its BF16 file is kept (oracle: transformers), its Q8_0 is not (no oracle).
    # flat_untied_gqa3 has no MTP layer and no mtp_num_hidden_layers, which the converter then must be told
    # (--no-mtp); mm_tied's MTP layer is converted (blk.<n_layer>.nextn.*). qwen35_flat_gqa3_dkdv is made
    # here (make_fixtures.py's randomization): flat, untied, nv = 3 nk, dk == dv, explicit layer_types, so
    # that llama.cpp runs a flat nv != nk model. One directory per file type where a pair would pass ~2 MB.
    "qwen35_flat_untied_gqa3_bf16": dict(arch="qwen35", src="flat_untied_gqa3", vocab=512, pre="qwen35",
                                         add_bos=False, outtypes=["bf16"], seed=15, convert_args=("--no-mtp",),
                                         measure_f32=True),
    "qwen35_mm_tied_bf16": dict(arch="qwen35", src="mm_tied", vocab=512, pre="qwen35", add_bos=False,
                                outtypes=["bf16"], seed=16, measure_f32=True),
    "qwen35_mm_tied_q8_0": dict(arch="qwen35", src="mm_tied", vocab=512, pre="qwen35", add_bos=False,
                                outtypes=["q8_0"], seed=16),
    "qwen35_flat_gqa3_dkdv": dict(arch="qwen35", src=None, vocab=512, pre="qwen35", add_bos=False,
                                  outtypes=["bf16", "q8_0"], seed=17, convert_args=("--no-mtp",),
                                  measure_f32=True, n_tokens=80),
}


# ------------------------------------------------------------------------------------------------
def write_json(p: Path, obj) -> None:
    p.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def rel_l2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """per-row ||a-b|| / ||b||"""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    return np.linalg.norm(a - b, axis=-1) / np.linalg.norm(b, axis=-1)


def agreement(a: np.ndarray, ref: np.ndarray) -> dict:
    r = rel_l2(a, ref)
    return {"max_rel_l2": float(r.max()), "mean_rel_l2": float(r.mean()),
            "top1_agree": float((a.argmax(-1) == ref.argmax(-1)).mean())}


def train_tokenizer(pattern: str, vocab: int, specials: list[str], bos: str | None, d: Path) -> Tokenizer:
    """Byte-level BPE over the committed perplexity text + the tokenizer corpus (deterministic)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    texts = [(ROOT / "tests" / "fixtures" / "smollm2" / "ppl.txt").read_text(encoding="utf-8")]
    corpus = ROOT / "tests" / "fixtures" / "tokenizer" / "corpus.json"
    if corpus.exists():
        c = json.loads(corpus.read_text(encoding="utf-8"))
        texts += [t for t in (c.get("texts", c) if isinstance(c, dict) else c) if isinstance(t, str)]
    texts += TOK_TEXTS
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    if bos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    assert tok.get_vocab_size() <= vocab, tok.get_vocab_size()
    tok.save(str(d / "tokenizer.json"))
    return tok


def tokenizer_setup(case: dict, d: Path) -> tuple[Tokenizer, dict]:
    if case["pre"] == "llama-bpe":
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|im_start|>", "<|im_end|>"]
        bos, eos, pat = "<|begin_of_text|>", "<|end_of_text|>", PAT_LLAMA3
    else:
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        bos, eos, pat = None, "<|im_end|>", PAT_QWEN2 if case["pre"] == "qwen2" else PAT_QWEN35
    tok = train_tokenizer(pat, case["vocab"], specials, bos if case["add_bos"] else None, d)
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos, "add_bos_token": case["add_bos"],
           "add_eos_token": False, "bos_token": bos, "model_max_length": 4096,
           "pad_token": "<|endoftext|>" if bos is None else "<|end_of_text|>"}
    write_json(d / "tokenizer_config.json", cfg)
    ids = {s: tok.token_to_id(s) for s in specials}
    return tok, {"pre": case["pre"], "regex": pat, "specials": ids, "bos": bos, "eos": eos,
                 "add_bos": case["add_bos"], "n_vocab_used": tok.get_vocab_size()}


def tokenize_golden(tok: Tokenizer) -> list[dict]:
    out = []
    for t in TOK_TEXTS:
        out.append({"text": t, "ids": tok.encode(t, add_special_tokens=False).ids,
                    "ids_add_special": tok.encode(t, add_special_tokens=True).ids})
    return out


# ------------------------------------------------------------------------------------------------
def make_hf_model(case: dict):
    from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                              Qwen3ForCausalLM)
    common = dict(vocab_size=case["vocab"], hidden_size=case["hidden"], intermediate_size=case["inter"],
                  num_hidden_layers=case["layers"], num_attention_heads=case["heads"],
                  num_key_value_heads=case["kv"], head_dim=case["head_dim"], rms_norm_eps=case["eps"],
                  max_position_embeddings=4096, tie_word_embeddings=case["tied"], hidden_act="silu",
                  rope_parameters=dict(case.get("rope", {"rope_type": "default"}), rope_theta=case["rope_theta"]),
                  bos_token_id=0, eos_token_id=1, attn_implementation="eager")
    if case["arch"] == "llama":
        cfg, cls = LlamaConfig(attention_bias=False, mlp_bias=False, **common), LlamaForCausalLM
    elif case["arch"] == "qwen2":  # q/k/v biases are built in
        cfg, cls = Qwen2Config(use_sliding_window=False, **common), Qwen2ForCausalLM
    else:
        cfg, cls = Qwen3Config(attention_bias=False, use_sliding_window=False, **common), Qwen3ForCausalLM
    torch.manual_seed(case["seed"])
    model = cls(cfg).eval()
    g = torch.Generator().manual_seed(case["seed"] + 1000)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):  # norms around identity
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):  # qwen2 q/k/v biases: O(1), so they matter
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            else:  # linear: N(0, 1/fan_in)
                p.copy_(torch.randn(p.shape, generator=g) / np.sqrt(p.shape[1]))
    return model


@torch.no_grad()
def hf_logits(model, tokens: list[int]) -> np.ndarray:
    ids = torch.tensor([tokens], dtype=torch.long)
    return model(input_ids=ids).logits[0].float().numpy()


def pick_prompt(model, vocab: int, seed: int, n: int = N_TOKENS) -> list[int]:
    """random ids; repaired so every position's top-1/top-2 logit gap is >= MARGIN_MIN."""
    rng = np.random.default_rng(seed)
    toks = [int(t) for t in rng.integers(0, vocab, n)]
    for _ in range(400):
        lg = np.sort(hf_logits(model, toks), axis=-1)
        gap = lg[:, -1] - lg[:, -2]
        bad = np.nonzero(gap < MARGIN_MIN)[0]
        if len(bad) == 0:
            return toks
        toks[int(bad[0])] = int(rng.integers(0, vocab))
    raise RuntimeError("could not repair prompt margins")


def run_converter(hf_dir: Path, pre: str, outtype: str, out: Path, extra: tuple[str, ...] = ()) -> None:
    cmd = [sys.executable, str(HERE / "peer_llama_cpp" / "convert_hf.py"), "--pre", pre, "--",
           str(hf_dir), "--outtype", outtype, "--outfile", str(out), *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not out.exists():
        sys.stderr.write(r.stdout[-4000:] + r.stderr[-8000:])
        raise RuntimeError(f"convert failed: {' '.join(cmd)}")


LAST_PEER_ERR = ""


def peer(*args: str) -> str:
    global LAST_PEER_ERR
    cmd = [peer_python(), str(HERE / "peer_llama_cpp" / "llama_eval.py"), *args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        LAST_PEER_ERR = r.stderr
        sys.stderr.write(r.stdout[-2000:] + r.stderr[-2000:])
        raise RuntimeError(f"peer failed: {' '.join(cmd)}")
    return r.stdout


def tensor_types(path: Path) -> dict:
    r = gguf.GGUFReader(str(path))
    counts: dict[str, int] = {}
    for t in r.tensors:
        counts[t.tensor_type.name] = counts.get(t.tensor_type.name, 0) + 1
    return {"counts": counts, "per_tensor": {t.name: t.tensor_type.name for t in r.tensors}}


# ---- dequantized-weights oracle (llama / qwen3 only) -------------------------------------------
GGUF_TO_HF = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}


def unpermute_rope_rows(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's converter stores llama q/k rows per head as (pairs interleaved); HF keeps the two
    rotary halves apart. Row r = 2*i + j of a head (i < hd/2, j in {0,1}) holds HF row j*hd/2 + i."""
    rows = w.shape[0]
    hd = rows // n_head
    return w.reshape(n_head, hd // 2, 2, -1).transpose(0, 2, 1, 3).reshape(rows, -1)


def dequant_state_dict(path: Path, case: dict) -> dict[str, torch.Tensor]:
    r = gguf.GGUFReader(str(path))
    sd = {}
    for t in r.tensors:
        shape = [int(x) for x in reversed(t.shape.tolist())]  # numpy order [rows, cols]
        w = gquants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape)
        name = t.name
        if name == "token_embd.weight":
            hf = "model.embed_tokens.weight"
        elif name == "output_norm.weight":
            hf = "model.norm.weight"
        elif name == "output.weight":
            hf = "lm_head.weight"
        else:
            _, i, kind, what = name.split(".")  # what: weight or bias (qwen2 q/k/v)
            hf = f"model.layers.{i}.{GGUF_TO_HF[kind]}.{what}"
            if case["arch"] == "llama" and kind == "attn_q":
                w = unpermute_rope_rows(w, case["heads"])
            elif case["arch"] == "llama" and kind == "attn_k":
                w = unpermute_rope_rows(w, case["kv"])
        sd[hf] = torch.from_numpy(np.ascontiguousarray(w))
    if case["tied"] or "lm_head.weight" not in sd:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    return sd


@torch.no_grad()
def dequant_logits(model, path: Path, case: dict, tokens: list[int]) -> np.ndarray:
    import copy
    m = copy.deepcopy(model)
    missing, unexpected = m.load_state_dict(dequant_state_dict(path, case), strict=False)
    missing = [k for k in missing if not (case["tied"] and k == "lm_head.weight")]
    assert not missing and not unexpected, (missing, unexpected)
    return hf_logits(m, tokens)


def make_qwen35_dkdv(hf_dir: Path, seed: int):
    """flat Qwen3.5 text model, nv = 3 nk, dk == dv (llama.cpp's constraint), bf16 like a real checkpoint."""
    import math
    import make_fixtures as mf
    from safetensors.torch import save_file
    from transformers import Qwen3_5TextConfig, Qwen3_5ForCausalLM
    tc = mf.flat_text_config()
    tc.update(hidden_size=64, intermediate_size=96, linear_key_head_dim=32, linear_value_head_dim=32)
    cfg = Qwen3_5TextConfig(**tc)
    cfg.architectures = ["Qwen3_5ForCausalLM"]
    torch.manual_seed(seed)
    model = Qwen3_5ForCausalLM(cfg).float()
    mf.randomize_model(model, seed, embed_std=1.0, lm_head_std=2.5 / math.sqrt(tc["hidden_size"]))
    tensors = mf.saved_tensors(model)
    save_file(tensors, str(hf_dir / "model.safetensors"), metadata={"format": "pt"})
    cfg.dtype = torch.bfloat16
    cfg.save_pretrained(str(hf_dir))
    model, _ = mf.hf_load(Qwen3_5ForCausalLM, hf_dir)
    mf.check_loaded_equal(model, tensors, lambda k: k)
    return model


# ------------------------------------------------------------------------------------------------
def build_case(name: str, case: dict, out_root: Path, work: Path) -> dict:
    d = out_root / name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    hf_dir = work / name
    hf_dir.mkdir()
    tok, tok_meta = tokenizer_setup(case, hf_dir)
    write_json(d / "tokenize.json", {"oracle": f"HF tokenizers {__import__('tokenizers').__version__}",
                                     "cases": tokenize_golden(tok)})
    meta: dict = {"case": name, "arch": case["arch"], "tokenizer": tok_meta, "files": {}, "agreement": {},
                  "llama_cpp_settings": "llama_cpp.Llama(n_ctx=512, n_batch=512, n_threads=2, logits_all=True, "
                                        "type_k=type_v=F32, flash_attn=False), CPU build, one llama_decode "
                                        "over all tokens"}
    if case["arch"] == "qwen35" and case["src"] is None:
        model = make_qwen35_dkdv(hf_dir, case["seed"])
        tokens = pick_prompt(model, case["vocab"], case["seed"], case["n_tokens"])
        ref = hf_logits(model, tokens)
        ref.astype("<f4").tofile(d / "ref_logits.bin")
        write_json(d / "prompt.json", {"tokens": tokens})
        meta["prompt"] = "prompt.json"
        meta["ref_logits"] = "ref_logits.bin (transformers fp32 eager, torch fallbacks, on the bf16 weights)"
        meta["dims"] = json.loads((hf_dir / "config.json").read_text())
        lg = np.sort(ref, axis=-1)
        meta["ref_min_top1_margin"] = float((lg[:, -1] - lg[:, -2]).min())
        model = None  # no GGUF -> HF dequant mapping for Qwen3.5: quantized files use llama.cpp as oracle
    elif case["arch"] == "qwen35":
        src = QWEN35_FIX / case["src"]
        for f in src.iterdir():
            if f.suffix in (".json", ".safetensors") and f.name not in ("meta.json", "prompt.json"):
                shutil.copy(f, hf_dir / f.name)
        tokens = json.loads((src / "prompt.json").read_text())["tokens"]
        ref = np.fromfile(src / "ref_logits.bin", dtype="<f4").reshape(len(tokens), -1)
        meta["prompt"] = f"../../qwen35/{case['src']}/prompt.json"
        meta["ref_logits"] = f"../../qwen35/{case['src']}/ref_logits.bin (transformers fp32 on the bf16 weights)"
        model = None
    else:
        model = make_hf_model(case)
        model.save_pretrained(hf_dir, safe_serialization=True)
        tokens = pick_prompt(model, case["vocab"], case["seed"])
        ref = hf_logits(model, tokens)
        ref.astype("<f4").tofile(d / "ref_logits.bin")
        write_json(d / "prompt.json", {"tokens": tokens})
        meta["prompt"] = "prompt.json"
        meta["ref_logits"] = "ref_logits.bin (transformers fp32 eager on the stored fp32 weights)"
        meta["dims"] = {k: case[k] for k in ("hidden", "heads", "kv", "head_dim", "inter", "layers", "vocab",
                                              "tied", "rope_theta", "eps")}
        lg = np.sort(ref, axis=-1)
        meta["ref_min_top1_margin"] = float((lg[:, -1] - lg[:, -2]).min())
    write_json(work / f"{name}.tokens.json", {"tokens": tokens})
    meta["n_tokens"] = len(tokens)

    files: list[tuple[str, Path]] = []  # (type label, path)
    for ot in case["outtypes"]:
        p = d / f"model-{ot}.gguf"
        run_converter(hf_dir, case["pre"], ot, p, case.get("convert_args", ()))
        files.append((ot.upper(), p))
    if case.get("quantize"):
        f32 = work / f"{name}-f32.gguf"
        run_converter(hf_dir, case["pre"], "f32", f32, case.get("convert_args", ()))
        meta["source_f32"] = "converted to F32 (not committed), then quantized by llama_cpp.llama_model_quantize"
        for q in case["quantize"]:
            p = d / f"model-{q.lower()}.gguf"
            peer("quantize", str(f32), str(p), q)
            files.append((q, p))
        files_extra = [("F32(uncommitted)", f32)]
    else:
        files_extra = []
    if case.get("measure_f32"):  # how close llama.cpp gets with no weight rounding at all
        f32 = work / f"{name}-f32.gguf"
        run_converter(hf_dir, case["pre"], "f32", f32, case.get("convert_args", ()))
        files_extra = [("F32(uncommitted)", f32)]

    for label, p in files + files_extra:
        committed = not label.endswith("(uncommitted)")
        lab = label.replace("(uncommitted)", "").lower()
        # llama.cpp's logits are the oracle only for quantized files; for F32/BF16 the oracle is
        # ref_logits.bin (same weight values) and meta.json records llama.cpp's agreement with it.
        keep = committed and lab not in ("f32", "bf16")
        lpath = (d if keep else work) / f"llama_logits_{name}_{lab}.bin"
        if keep:
            lpath = d / f"llama_logits_{lab}.bin"
        try:
            peer("logits", str(p), str(work / f"{name}.tokens.json"), str(lpath))
        except RuntimeError as e:
            if keep:
                raise
            errs = [ln for ln in LAST_PEER_ERR.splitlines() if "error" in ln.lower() and "llama" in ln]
            meta["agreement"][label] = {"llama_cpp_error": errs[:3] or LAST_PEER_ERR[-300:]}
            print(f"   {label}: llama.cpp failed (recorded in meta.json)", flush=True)
            if committed:
                meta["files"][p.name] = {"type": label, "bytes": p.stat().st_size, "sha256": sha256(p),
                                         "tensor_types": tensor_types(p)["counts"]}
            continue
        ll = np.fromfile(lpath, dtype="<f4").reshape(len(tokens), -1)
        ag: dict = {"llama_cpp_vs_ref": agreement(ll, ref)}
        if keep:  # quantized: llama.cpp's F32 path on the gguf-py-dequantized file (exact weight values)
            f32dq = work / f"{name}-{lab}-dequant-f32.gguf"
            peer("dequant-to-f32", str(p), str(f32dq))
            # kept only where transformers cannot be run on the dequantized weights (Qwen3.5: no GGUF -> HF
            # mapping here); elsewhere it is only measured (it matches dequant_logits to ~7e-7)
            fpath = (d if model is None else work) / f"llama_f32dequant_logits_{lab}.bin"
            peer("logits", str(f32dq), str(work / f"{name}.tokens.json"), str(fpath))
            fl = np.fromfile(fpath, dtype="<f4").reshape(len(tokens), -1)
            ag["llama_f32dequant_vs_ref"] = agreement(fl, ref)
            ag["llama_cpp_vs_llama_f32dequant"] = agreement(ll, fl)
            sfl = np.sort(fl, axis=-1)
            ag["f32dequant_min_top1_margin"] = float((sfl[:, -1] - sfl[:, -2]).min())
            if model is None:
                meta["files"][fpath.name] = (
                    f"llama.cpp logits (F32 path) on model-{lab}.gguf with every tensor dequantized to F32 by "
                    "PyPI gguf-py: fp32 oracle for the quantized file, raw LE float32 [n_tokens, vocab]")
        if model is not None:
            dq = dequant_logits(model, p, case, tokens)
            ag["dequant_vs_ref"] = agreement(dq, ref)
            ag["llama_cpp_vs_dequant"] = agreement(ll, dq)
            if keep:
                ag["llama_f32dequant_vs_dequant"] = agreement(fl, dq)
            sdq = np.sort(dq, axis=-1)
            ag["dequant_min_top1_margin"] = float((sdq[:, -1] - sdq[:, -2]).min())
            if committed and lab not in ("f32",):
                dq.astype("<f4").tofile(d / f"dequant_logits_{lab}.bin")
                meta["files"][f"dequant_logits_{lab}.bin"] = (
                    f"transformers fp32 on the weights dequantized from model-{lab}.gguf by PyPI gguf "
                    f"{gguf.__version__ if hasattr(gguf, '__version__') else ''} (oracle for the {label} file)")
        meta["agreement"][label] = ag
        if committed:
            meta["files"][p.name] = {"type": label, "bytes": p.stat().st_size, "sha256": sha256(p),
                                     "tensor_types": tensor_types(p)["counts"]}
            if keep:
                meta["files"][lpath.name] = f"llama.cpp logits on {p.name}, raw LE float32 [n_tokens, vocab]"
        else:
            meta["agreement"][label]["note"] = "file not committed (size); made to measure llama.cpp alone"
    meta["files"]["tokenize.json"] = "HF tokenizers ids of a few texts with the tokenizer embedded in the files"
    if model is not None:
        meta["files"]["ref_logits.bin"] = "transformers fp32 logits, raw LE float32 [n_tokens, vocab]"
    return meta


def versions() -> dict:
    v = {"python": platform.python_version(), "torch": torch.__version__,
         "transformers": transformers.__version__, "gguf (PyPI, dequantizer)": getattr(gguf, "__version__", "?"),
         "tokenizers": __import__("tokenizers").__version__, "numpy": np.__version__,
         "llama_cpp_python_sdist": peer_src().name}
    out = subprocess.run([peer_python(), "-c", "import llama_cpp; print(llama_cpp.__version__)"],
                         capture_output=True, text=True).stdout.strip()
    v["llama_cpp_python (peer)"] = out
    return v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", nargs="*", default=None)
    a = ap.parse_args()
    torch.set_num_threads(2)
    try:
        import importlib.metadata as md
        gguf.__version__ = md.version("gguf")
    except Exception:
        pass
    vers = versions()
    a.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ember-gguf-fix-") as tmp:
        for name, case in CASES.items():
            if a.only and name not in a.only:
                continue
            print(f"== {name}", flush=True)
            meta = build_case(name, case, a.out, Path(tmp))
            meta["versions"] = vers
            meta["made_by"] = "scripts/make_gguf_model_fixtures.py"
            write_json(a.out / name / "meta.json", meta)
            for lab, ag in meta["agreement"].items():
                print(f"   {lab:18s} " + "  ".join(
                    f"{k}: relL2 {v['max_rel_l2']:.2e} top1 {v['top1_agree']:.3f}"
                    for k, v in ag.items() if isinstance(v, dict) and "max_rel_l2" in v), flush=True)
            tot = sum(f.stat().st_size for f in (a.out / name).iterdir())
            print(f"   dir size {tot / 1e6:.2f} MB", flush=True)


if __name__ == "__main__":
    main()
