#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/ (plain Python, no packages).

Seeds are small valid inputs that reach deep into each parser; the fuzzer mutates them. They come from the
committed fixtures (tests/fixtures: GGUF sample, vocabularies, tokenizer.json files, real chat templates and
conversations) and from tiny models written here: GGUF files of the llama / qwen2 / qwen3 / qwen35
architectures with a few KB of weights (F32, F16, BF16, Q8_0, Q4_0 blocks) and tokenizer metadata, and
safetensors files. Inputs the fuzzer found (crashes fixed in the library) live beside them as
regress-*; this script never deletes those.

    python3 scripts/make_fuzz_corpus.py
"""
import json
import random
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
OUT = ROOT / "tests" / "fuzz" / "corpus"

# ---------------------------------------------------------------------------------------------------------
# GGUF v3 writer (ggml docs/gguf.md): header, metadata, tensor infos, padding to the alignment, data.
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
              U64: "<Q", I64: "<q", F64: "<d"}


def gguf_str(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gguf_value(t, v):
    if t == STR:
        return gguf_str(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gguf_value(et, x) for x in items)
    return struct.pack(SCALAR_FMT[t], v)


def infer(v):
    """(type, value) of a Python value: bool, int (i32 / u64), float (f32), str, list (of one of those)."""
    if isinstance(v, tuple):
        return v
    if isinstance(v, bool):
        return BOOL, v
    if isinstance(v, int):
        return (I32, v) if -2**31 <= v < 2**31 else (U64, v)
    if isinstance(v, float):
        return F32, v
    if isinstance(v, str):
        return STR, v
    if isinstance(v, list):
        et = infer(v[0])[0] if v else I32
        return ARR, (et, [infer(x)[1] for x in v])
    raise TypeError(v)


# GGML types: id, block elements, block bytes.
GGML = {"F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q8_0": (8, 32, 34), "BF16": (30, 1, 2)}


def tensor_bytes(typ, n, rng):
    """n values of GGML type typ: small random weights as real files have them."""
    if typ == "F32":
        return struct.pack(f"<{n}f", *[rng.uniform(-0.5, 0.5) for _ in range(n)])
    if typ == "F16":
        return struct.pack(f"<{n}e", *[rng.uniform(-0.5, 0.5) for _ in range(n)])
    if typ == "BF16":
        return b"".join(struct.pack("<f", rng.uniform(-0.5, 0.5))[2:] for _ in range(n))
    blocks = n // 32
    if typ == "Q8_0":
        return b"".join(struct.pack("<e", 0.01) + bytes(rng.randrange(256) for _ in range(32)) for _ in range(blocks))
    if typ == "Q4_0":
        return b"".join(struct.pack("<e", 0.02) + bytes(rng.randrange(256) for _ in range(16)) for _ in range(blocks))
    raise ValueError(typ)


def gguf(kvs, tensors=(), alignment=32, version=3, seed=0):
    """kvs: {key: value}; tensors: [(name, ne, type, values or None for random)]."""
    rng = random.Random(seed)
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, v in kvs.items():
        t, val = infer(v)
        out += gguf_str(k) + struct.pack("<I", t) + gguf_value(t, val)
    data, infos = b"", b""
    for name, ne, typ, values in tensors:
        tid, be, bb = GGML[typ]
        n = 1
        for d in ne:
            n *= d
        raw = struct.pack(f"<{n}f", *values) if values is not None else tensor_bytes(typ, n, rng)
        assert len(raw) == n // be * bb, name
        data += b"\0" * (-len(data) % alignment)
        infos += gguf_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        infos += struct.pack("<IQ", tid, len(data))
        data += raw
    out += infos
    out += b"\0" * (-len(out) % alignment)
    return out + data


# ---------------------------------------------------------------------------------------------------------
# Tiny models. Matrices are [rows, cols] with ne = {cols, rows}.

def gpt2_vocab(n_tokens=200):
    """The first n tokens of SmolLM2's vocabulary with the merges among them (llama.cpp's gpt2 + smollm)."""
    v = json.loads((FIX / "smollm2" / "vocab.json").read_text())
    toks = v["tokens"][:n_tokens]
    have = set(toks)
    merges = [m for m in v["merges"] if len(m.split(" ")) == 2 and all(p in have for p in m.split(" "))
              and m.replace(" ", "") in have]
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": v["pre"], "tokenizer.ggml.tokens": toks,
            "tokenizer.ggml.token_type": v["token_types"][:n_tokens], "tokenizer.ggml.merges": merges,
            "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
            "tokenizer.ggml.padding_token_id": 2, "tokenizer.ggml.add_bos_token": False}


def spm_vocab():
    v = json.loads((FIX / "gguf_tokenizer" / "spm_vocab.json").read_text())
    return {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": v["tokens"],
            "tokenizer.ggml.scores": [float(s) for s in v["scores"]], "tokenizer.ggml.token_type": v["token_types"],
            "tokenizer.ggml.bos_token_id": v["bos_id"], "tokenizer.ggml.eos_token_id": v["eos_id"],
            "tokenizer.ggml.unknown_token_id": v["unk_id"], "tokenizer.ggml.add_space_prefix": True,
            "tokenizer.ggml.add_bos_token": True}


def qwen35_like_vocab(n_tokens=400):
    v = json.loads((FIX / "gguf_tokenizer" / "qwen35_like_vocab.json").read_text())
    toks = v["tokens"][:n_tokens] + v["tokens"][-8:]
    have = set(toks)
    merges = [m for m in v["merges"] if all(p in have for p in m.split(" ")) and m.replace(" ", "") in have]
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen35", "tokenizer.ggml.tokens": toks,
            "tokenizer.ggml.token_type": v["token_types"][:n_tokens] + v["token_types"][-8:],
            "tokenizer.ggml.merges": merges, "tokenizer.ggml.eos_token_id": len(toks) - 5,
            "tokenizer.ggml.add_eos_token": False}


def chat_template(name):
    return json.loads((FIX / "templates" / f"real_{name}.json").read_text())["template"]


def llama_like(arch, mat="F32", tied=False, biases=False, qk_norm=False, extra=None, seed=1):
    H, F, V, nh, nkv, d = 32, 32, 32, 4, 2, 8
    a = arch + "."
    kvs = {"general.architecture": arch, "general.name": f"tiny-{arch}", a + "block_count": 1,
           a + "context_length": 64, a + "embedding_length": H, a + "feed_forward_length": F,
           a + "attention.head_count": nh, a + "attention.head_count_kv": nkv,
           a + "attention.layer_norm_rms_epsilon": 1e-5, a + "rope.freq_base": 10000.0}
    kvs.update(extra or {})
    ones = lambda n: [1.0] * n
    t = [("token_embd.weight", [H, V], mat, None), ("output_norm.weight", [H], "F32", ones(H))]
    if not tied:
        t.append(("output.weight", [H, V], mat, None))
    b = "blk.0."
    t += [(b + "attn_norm.weight", [H], "F32", ones(H)), (b + "ffn_norm.weight", [H], "F32", ones(H)),
          (b + "attn_q.weight", [H, nh * d], mat, None), (b + "attn_k.weight", [H, nkv * d], "F32", None),
          (b + "attn_v.weight", [H, nkv * d], "F32", None), (b + "attn_output.weight", [nh * d, H], mat, None),
          (b + "ffn_gate.weight", [H, F], mat, None), (b + "ffn_up.weight", [H, F], mat, None),
          (b + "ffn_down.weight", [F, H], mat, None)]
    if biases:
        t += [(b + "attn_q.bias", [nh * d], "F32", None), (b + "attn_k.bias", [nkv * d], "F32", None),
              (b + "attn_v.bias", [nkv * d], "F32", None)]
    if qk_norm:
        t += [(b + "attn_q_norm.weight", [d], "F32", ones(d)), (b + "attn_k_norm.weight", [d], "F32", ones(d))]
    return gguf(kvs, t, seed=seed)


def qwen35(mat="F32", tied=True, extra=None, seed=2):
    H, I, V, nh, nkv, hd, nk, nv, dk, dv, K = 32, 32, 32, 2, 1, 8, 1, 2, 8, 8, 4
    conv = 2 * nk * dk + nv * dv
    a = "qwen35."
    kvs = {"general.architecture": "qwen35", a + "block_count": 2, a + "context_length": 64,
           a + "embedding_length": H, a + "feed_forward_length": I, a + "attention.head_count": nh,
           a + "attention.head_count_kv": nkv, a + "attention.key_length": hd, a + "attention.value_length": hd,
           a + "attention.layer_norm_rms_epsilon": 1e-6, a + "rope.freq_base": 1e7, a + "rope.dimension_count": 2,
           a + "ssm.conv_kernel": K, a + "ssm.state_size": dk, a + "ssm.group_count": nk,
           a + "ssm.time_step_rank": nv, a + "ssm.inner_size": nv * dv,
           a + "attention.recurrent_layers": [True, False]}
    kvs.update(extra or {})
    ones = lambda n: [1.0] * n
    t = [("token_embd.weight", [H, V], mat, None), ("output_norm.weight", [H], "F32", ones(H))]
    if not tied:
        t.append(("output.weight", [H, V], mat, None))
    for l in range(2):
        b = f"blk.{l}."
        t += [(b + "attn_norm.weight", [H], "F32", ones(H)), (b + "post_attention_norm.weight", [H], "F32", ones(H)),
              (b + "ffn_gate.weight", [H, I], mat, None), (b + "ffn_up.weight", [H, I], mat, None),
              (b + "ffn_down.weight", [I, H], mat, None)]
        if l == 0:  # Gated DeltaNet layer
            t += [(b + "attn_qkv.weight", [H, conv], mat, None), (b + "attn_gate.weight", [H, nv * dv], mat, None),
                  (b + "ssm_beta.weight", [H, nv], "F32", None), (b + "ssm_alpha.weight", [H, nv], "F32", None),
                  (b + "ssm_out.weight", [nv * dv, H], "F32", None), (b + "ssm_conv1d.weight", [K, conv], "F32", None),
                  (b + "ssm_a", [nv], "F32", [-1.0, -0.5]), (b + "ssm_dt.bias", [nv], "F32", None),
                  (b + "ssm_norm.weight", [dv], "F32", ones(dv))]
        else:  # gated attention layer
            t += [(b + "attn_q.weight", [H, nh * hd * 2], mat, None), (b + "attn_k.weight", [H, nkv * hd], mat, None),
                  (b + "attn_v.weight", [H, nkv * hd], mat, None), (b + "attn_output.weight", [nh * hd, H], "F32", None),
                  (b + "attn_q_norm.weight", [hd], "F32", ones(hd)), (b + "attn_k_norm.weight", [hd], "F32", ones(hd))]
    return gguf(kvs, t, seed=seed)


def model_seeds():
    yarn = {"qwen2.rope.scaling.type": "yarn", "qwen2.rope.scaling.factor": 4.0,
            "qwen2.rope.scaling.original_context_length": 16}
    linear = {"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 2.0}
    tok = dict(gpt2_vocab(32), **{"tokenizer.chat_template": chat_template("smollm2-135m-instruct")})
    return {
        "llama_f32.gguf": llama_like("llama"),
        "llama_q8_0_tied_tok.gguf": llama_like("llama", "Q8_0", tied=True, extra=tok),
        "llama_q4_0_rope_linear.gguf": llama_like("llama", "Q4_0", extra=linear),
        "qwen2_f16_bias_yarn.gguf": llama_like("qwen2", "F16", biases=True, extra=yarn),
        "qwen3_bf16_qknorm.gguf": llama_like("qwen3", "BF16", qk_norm=True),
        "qwen35_f32_tied.gguf": qwen35(),
        "qwen35_q8_0_untied.gguf": qwen35("Q8_0", tied=False),
    }


def vocab_seeds():
    tmpl = {"tokenizer.chat_template": chat_template("qwen3")}
    return {
        "vocab_smollm2_200.gguf": gguf(gpt2_vocab(200)),
        "vocab_llama_bpe.gguf": gguf(dict(gpt2_vocab(120), **{"tokenizer.ggml.pre": "llama-bpe"})),
        "vocab_spm.gguf": gguf(spm_vocab()),
        "vocab_qwen35_like.gguf": gguf(dict(qwen35_like_vocab(), **tmpl)),
    }


# ---------------------------------------------------------------------------------------------------------
# safetensors: u64 header length, JSON header, data.

def safetensors(entries, metadata=None, pad_to=8):
    header, data = {}, b""
    sizes = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "I8": 1, "U8": 1, "I64": 8, "F64": 8, "BOOL": 1}
    for name, dtype, shape in entries:
        n = 1
        for d in shape:
            n *= d
        nb = n * sizes[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + nb]}
        data += bytes((i * 37) & 0xFF for i in range(nb))
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % pad_to)
    return struct.pack("<Q", len(h)) + h + data


def safetensors_seeds():
    return {
        "hf_bf16.safetensors": safetensors([("model.embed_tokens.weight", "BF16", [8, 4]),
                                            ("model.norm.weight", "BF16", [4]),
                                            ("lm_head.weight", "F32", [8, 4])], {"format": "pt"}),
        "mlx_q4.safetensors": safetensors([("language_model.model.layers.0.mlp.up_proj.weight", "U32", [4, 1]),
                                           ("language_model.model.layers.0.mlp.up_proj.scales", "F16", [4, 1]),
                                           ("language_model.model.layers.0.mlp.up_proj.biases", "F16", [4, 1])],
                                          {"format": "mlx"}),
        "scalar_and_empty.safetensors": safetensors([("s", "F64", []), ("e", "I64", [0, 3]), ("b", "BOOL", [2])]),
    }


# ---------------------------------------------------------------------------------------------------------
# JSON-based targets.

def tokenizer_json_subset(path, n_vocab=300):
    """A tokenizer.json fixture cut to its first n_vocab tokens and the merges among them (same structure)."""
    j = json.loads(path.read_text())
    vocab = {t: i for t, i in j["model"]["vocab"].items() if i < n_vocab}
    merges = []
    for m in j["model"].get("merges", []):
        a, b = m.split(" ") if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    # Added tokens renumbered after the kept vocabulary (their real ids, ~150k, would make the ids too sparse
    # for the cut vocabulary: the loader refuses that); a vocabulary entry of the same text is dropped.
    added = j.get("added_tokens") or []
    for k, a in enumerate(added):
        vocab.pop(a["content"], None)
        a["id"] = n_vocab + k
    j["model"]["vocab"], j["model"]["merges"] = vocab, merges
    return json.dumps(j, ensure_ascii=False).encode()


def tokenizer_json_seeds():
    out = {}
    for d in sorted((FIX / "tokenizer").iterdir()):
        if (d / "tokenizer.json").exists():
            out[f"{d.name}.json"] = tokenizer_json_subset(d / "tokenizer.json")
    cfg = json.dumps({"eos_token": {"content": "<|im_end|>"}, "bos_token": None}).encode()
    out["qwen35_like_with_config.json"] = out["qwen35_like.json"] + b"\n\0\n" + cfg
    return out


def qwen35_config_seeds():
    out = {}
    for d in sorted((FIX / "qwen35").iterdir()):
        if (d / "config.json").exists():
            out[f"{d.name}.json"] = (d / "config.json").read_bytes()
    flat = {"model_type": "qwen3_5_text", "hidden_size": 64, "num_hidden_layers": 4, "vocab_size": 256,
            "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
            "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
            "linear_value_head_dim": 8, "full_attention_interval": 2, "rms_norm_eps": 1e-6,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25},
            "quantization": {"group_size": 64, "bits": 4, "model.layers.0.mlp.up_proj": {"bits": 8, "group_size": 32},
                             "lm_head": False}}
    out["flat_quantized.json"] = json.dumps(flat).encode()
    return out


def template_sources():
    return {p.stem[len("real_"):]: json.loads(p.read_text())["template"]
            for p in sorted((FIX / "templates").glob("real_*.json"))}


def conversations():
    s = json.loads((FIX / "templates" / "scenarios.json").read_text())["scenarios"]
    return {name: sc for name, sc in s.items()}


def jinja_seeds():
    out = {f"{name}.jinja": src.encode() for name, src in template_sources().items()}
    for i, c in enumerate(json.loads((FIX / "templates" / "stress.json").read_text())["cases"]):
        out[f"stress_{i:03d}.jinja"] = c["template"].encode() + b"\0" + json.dumps(c["context"]).encode()
    ctx = conversations()["multi_turn"]["context"]
    out["with_context.jinja"] = ("{% for m in messages %}{{ m.role }}: {{ m.content | tojson }}\n{% endfor %}"
                                 "{% if add_generation_prompt %}assistant:{% endif %}").encode() + b"\0" + \
        json.dumps(ctx).encode()
    return out


def chat_messages_seeds():
    out = {}
    names = list(template_sources())
    for i, (name, sc) in enumerate(conversations().items()):
        body = dict(sc.get("extra") or {}, messages=sc["messages"], add_generation_prompt=sc["add_generation_prompt"])
        out[f"{name}.bin"] = bytes([i % len(names)]) + json.dumps(body, ensure_ascii=False).encode()
    return out


def tokenizer_encode_seeds():
    texts = json.loads((FIX / "tokenizer" / "corpus.json").read_text())
    texts = texts["texts"] if isinstance(texts, dict) else texts
    out = {}
    for i, t in enumerate(texts[:40]):
        out[f"text_{i:02d}.bin"] = bytes([i % 4]) + t.encode()
    out["specials.bin"] = b"\x00<|im_start|>user\nhi<|im_end|>\n<|endoftext|>"
    return out


def server_request_seeds():
    """Request bodies of every endpoint `ember serve` parses, accepted ones and refused ones."""
    bodies = {
        "chat_stream.json": {"model": "m", "messages": [{"role": "system", "content": "You are terse."},
                                                        {"role": "user", "content": "Hi"}],
                             "max_tokens": 16, "temperature": 0, "stream": True,
                             "stream_options": {"include_usage": True}, "stop": ["\n\n"], "logprobs": True,
                             "top_logprobs": 2, "seed": 7},
        "chat_parts.json": {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                                      {"type": "text", "text": "b"}]},
                                         {"role": "assistant", "content": "c"}, {"role": "user", "content": "d"}],
                            "chat_template_kwargs": {"enable_thinking": False}, "top_p": 0.9, "top_k": 40,
                            "min_p": 0.05, "presence_penalty": 0.5, "frequency_penalty": 0.1,
                            "repetition_penalty": 1.1, "user": "u"},
        "completion.json": {"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0,
                            "ignore_eos": True},
        "completion_ids.json": {"prompt": [1, 2, 3, 4], "max_completion_tokens": 4,
                                "return_tokens_as_token_ids": True},
        "refused.json": {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"},
                         "tools": [], "n": 2},
        "tokenize_chat.json": {"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": True},
        "detokenize.json": {"tokens": [1, 2, 3]},
        "chat_tools.json": {"messages": [{"role": "user", "content": "w"},
                                         {"role": "assistant", "content": None, "tool_calls": [
                                             {"id": "c", "type": "function",
                                              "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
                                         {"role": "tool", "tool_call_id": "c", "content": "2"}],
                            "tools": [{"type": "function", "function": {
                                "name": "f", "description": "d",
                                "parameters": {"type": "object", "properties": {"a": {"type": "integer"}},
                                               "required": ["a"]}}}],
                            "tool_choice": {"type": "function", "function": {"name": "f"}},
                            "parallel_tool_calls": False},
        "chat_response_format.json": {"messages": [{"role": "user", "content": "j"}], "max_tokens": 8,
                                      "response_format": {"type": "json_schema", "json_schema": {
                                          "name": "p", "strict": True,
                                          "schema": {"type": "object", "properties": {"n": {"type": "string"}}}}}},
        "completion_grammar.json": {"prompt": "x", "grammar": "root ::= \"a\" | [0-9]+", "max_tokens": 4},
    }
    return {k: json.dumps(v, separators=(",", ":")).encode() for k, v in bodies.items()}


def grammar_seeds():
    """First byte: bits 0-1 the kind (0 JSON Schema, 1 GBNF, 2 regex), the rest seeds the matcher walk."""
    schemas = {
        "schema_object.bin": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                                               "age": {"type": "integer", "minimum": 0, "maximum": 150},
                                                               "tags": {"type": "array", "items": {"enum": ["a", "b"]},
                                                                        "maxItems": 3}},
                              "required": ["name"], "additionalProperties": False},
        "schema_recursive.bin": {"$defs": {"n": {"anyOf": [{"type": "null"}, {"type": "object", "properties":
                                                                                {"next": {"$ref": "#/$defs/n"}}}]}},
                                 "$ref": "#/$defs/n"},
        "schema_datetime.bin": {"type": "string", "format": "date-time"},
        "schema_number.bin": {"type": "number", "exclusiveMinimum": -1.5, "maximum": 99, "multipleOf": 0.5},
        # allOf merging, oneOf disjointness and enum filtering (json_schema_merge.cpp: 6 % of its lines reached by the
        # corpus of the 2026-12-03 long runs without these)
        "schema_allof.bin": {"allOf": [{"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}},
                                        "required": ["a"]},
                                       {"properties": {"a": {"maximum": 9}, "b": {"enum": ["x", "y", 3]}},
                                        "additionalProperties": False}]},
        "schema_oneof.bin": {"oneOf": [{"type": "string", "enum": ["on", "off"]},
                                       {"type": "integer", "minimum": 1}, {"const": None}]},
    }
    out = {k: bytes([4 * i]) + json.dumps(v).encode() for i, (k, v) in enumerate(schemas.items())}
    out["gbnf_pairs.bin"] = b"\x01" + b'root ::= "{" ws pair ("," ws pair)* "}"\npair ::= [a-z]+ ":" ws [0-9]+\nws ::= [ \\t\\n]*'
    out["gbnf_alt.bin"] = b"\x05" + b'root ::= ("yes" | "no") "." | [A-Z] [a-z]{1,5}'
    out["regex_id.bin"] = b"\x02" + rb"[A-Z][a-z]+ \d{2,4}(-[0-9a-f]{4})?"
    out["regex_alt.bin"] = b"\x06" + rb"(foo|bar)+baz?\."
    return out


def write(target, files):
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    for old in d.iterdir():
        if not old.name.startswith("regress-"):
            old.unlink()
    for name, data in files.items():
        (d / name).write_bytes(data)
    print(f"{target}: {len(files)} seeds, {sum(len(v) for v in files.values())} bytes")


def main():
    models, vocabs = model_seeds(), vocab_seeds()
    write("gguf", dict({"sample.gguf": (FIX / "gguf" / "sample.gguf").read_bytes(),
                        "v2_aligned64.gguf": gguf({"general.alignment": (U32, 64), "a": [[1, 2], [3]]},
                                                  [("t", [32, 2], "Q8_0", None)], alignment=64, version=2)},
                       **{k: models[k] for k in ("llama_q8_0_tied_tok.gguf", "qwen35_f32_tied.gguf")}))
    write("gguf_model", models)
    write("gguf_vocab", vocabs)
    write("safetensors", safetensors_seeds())
    write("qwen35_config", qwen35_config_seeds())
    write("tokenizer_json", tokenizer_json_seeds())
    write("tokenizer_encode", tokenizer_encode_seeds())
    write("jinja", jinja_seeds())
    write("chat_messages", chat_messages_seeds())
    write("server_request", server_request_seeds())
    write("grammar", grammar_seeds())


if __name__ == "__main__":
    main()
