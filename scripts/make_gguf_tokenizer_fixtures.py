#!/usr/bin/env python3
# make_gguf_tokenizer_fixtures.py: llama.cpp (llama-cpp-python, the oracle) tokenizations of GGUF vocabularies,
# for src/tokenizer/gguf_*_test.cpp.
#
#   PY=/opt/peer-venv/bin/python   # a Python with llama_cpp and gguf
#   $PY scripts/make_gguf_tokenizer_fixtures.py --smollm2 SmolLM2-135M-Instruct.Q4_1.gguf
#
# Writes
#   tests/fixtures/smollm2/vocab.json           the tokenizer metadata of the GGUF (scripts/gguf_vocab_dump.py)
#   tests/fixtures/smollm2/llama_cpp_tokens.json  for every text: llama_tokenize(add_special=False) ids with
#                                               parse_special true and false, and llama.cpp's detokenization
#                                               (token_to_piece per id, special true / false) of the first.
#   tests/fixtures/gguf_tokenizer/presets.json  the same ids under other tokenizer.ggml.pre values (vocab-only
#                                               GGUFs written here with gguf-py) for two vocabularies: SmolLM2's
#                                               (token types of ids 11..16 changed to user-defined so that both
#                                               special-token kinds are exercised) and qwen35_like_vocab.json,
#                                               tests/fixtures/tokenizer/qwen35_like's tokenizer.json as GGUF
#                                               metadata (trained with the Qwen3.5 regex, so its merges cross
#                                               letter/mark boundaries and tell the qwen35 and qwen2 presets apart).
# Texts: tests/fixtures/tokenizer/corpus.json plus EXTRA_TEXTS below.
import argparse
import ctypes
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402
import llama_cpp  # noqa: E402
from gguf_vocab_dump import dump  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRESETS = ["default", "gpt-2", "llama-bpe", "smaug-bpe", "qwen2", "qwen35", "smollm", "starcoder", "refact",
           "command-r", "mpt", "falcon", "deepseek-llm", "deepseek-coder"]
USER_DEFINED_IDS = range(11, 17)  # <jupyter_start> .. <empty_output> in the SmolLM2 vocabulary
EXTRA_TEXTS = [
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
    "<|im_start|>assistant\n",
    "<|endoftext|><|endoftext|>x<|im_end|>",
    "<repo_name>ember<reponame>x<file_sep>a.cpp<filename>b<gh_stars>10",
    "<jupyter_start><jupyter_code>print(1)<jupyter_output>1<empty_output>",
    "<|im_start<|im_start|>|>",
    "Numbers 1234567890 12,345.678 ٣٤٥ ²³ ½ and 'S 'll 'VE 'd's",
    "   \t\n\n  \r\n x  y   \u00a0\u2003z\u3000",
    "a\u0301e\u0308o\u0303 \u0915\u093f \u0e01\u0e34 combining marks",
    "",
    " ",
    "\n",
    # code points whose classes differ between regex engines / Unicode versions
    "unassigned \u0378\u0378 private \ue000\ue001 fffd \ufffd\ufffd ctrl \x00\x01\x7f\x85\x9f end",
    "zw \u200b\u200c\u200d bidi \u200e\u200f soft\u00adhyphen mongol\u180esep ls\u2028ps\u2029 \u0300lead",
    "'\u017f 'K Kelvin\u212a \u0130stanbul \u1e9e \ufb01x \u2460\u2461 \u00b2\u00b3\u00b9\u00bc 12\u0663\u0664",
    "emoji \U0001F600\U0001F44D\U0001F3FD \U0001F469\u200d\U0001F4BB \U0001F1E9\U0001F1EA \u2764\ufe0f "
    "\U0001D400\U0001D401 \U00020000\U0002A6D6",
    "tabs\t\t\tand\u3000ideographic\u3000\u3000spaces \u00a0\u00a0nbsp\r\r\n\n\u000b\u000cvt",
    "a" * 300 + " " + "9" * 40 + " " + "!?" * 50 + "   " * 30,
]


def texts():
    with open(os.path.join(ROOT, "tests/fixtures/tokenizer/corpus.json"), encoding="utf-8") as f:
        return json.load(f) + EXTRA_TEXTS


def tokenize(llm, text, special):
    return llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)


def detok(llm, ids, special):
    # llama_token_to_piece per id (Llama.detokenize has a 32-byte buffer and drops a space after BOS).
    out = b""
    buf = ctypes.create_string_buffer(1024)
    for t in ids:
        n = llama_cpp.llama_token_to_piece(llm._model.vocab, t, buf, len(buf), 0, special)
        assert 0 <= n <= len(buf)
        out += buf.raw[:n]
    return out.decode("utf-8", errors="replace")


def load(path):
    return llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)


def vocab_only_writer(path):
    # A GGUF writer with minimal (unused) llama hyper-parameters: llama.cpp loads it with vocab_only=True.
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_layer_norm_rms_eps(1e-5)
    return w


def finish_writer(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_vocab_gguf(path, v, pre):
    w = vocab_only_writer(path)
    w.add_tokenizer_model(v["model"])
    w.add_tokenizer_pre(pre)
    w.add_token_list(v["tokens"])
    w.add_token_types(v["token_types"])
    w.add_token_merges(v["merges"])
    if v["bos_id"] >= 0:
        w.add_bos_token_id(v["bos_id"])
    w.add_eos_token_id(v["eos_id"])
    w.add_add_bos_token(False)
    finish_writer(w)


def vocab_from_tokenizer_json(path):
    # A GGUF-style vocabulary from a small HF tokenizer.json, typed as convert_hf_to_gguf.py does: special added
    # tokens are control, other added tokens user-defined, the rest normal.
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    by_id = {i: (t, 1) for t, i in j["model"]["vocab"].items()}
    for a in j["added_tokens"]:
        by_id[a["id"]] = (a["content"], 3 if a["special"] else 4)
    assert sorted(by_id) == list(range(len(by_id))), "ids are not dense"
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    eos = next(i for i, (t, _) in by_id.items() if t == "<|im_end|>")
    return {"model": "gpt2", "pre": "qwen35", "tokens": [by_id[i][0] for i in range(len(by_id))],
            "token_types": [by_id[i][1] for i in range(len(by_id))], "merges": merges, "bos_id": -1,
            "eos_id": eos, "eot_id": -1, "eom_id": -1, "pad_id": -1, "unk_id": -1, "add_bos": False,
            "add_eos": False, "extra_eos": []}


def dump_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--smollm2", required=True, help="SmolLM2-135M-Instruct GGUF file")
    a = ap.parse_args()
    all_texts = texts()
    version = llama_cpp.__version__

    v = dump(a.smollm2)
    dump_json(os.path.join(ROOT, "tests/fixtures/smollm2/vocab.json"), v)
    llm = load(a.smollm2)
    cases = []
    for t in all_texts:
        ids = tokenize(llm, t, True)
        cases.append({"text": t, "ids": ids, "ids_plain": tokenize(llm, t, False),
                      "decoded": detok(llm, ids, True), "decoded_skip_special": detok(llm, ids, False)})
    dump_json(os.path.join(ROOT, "tests/fixtures/smollm2/llama_cpp_tokens.json"),
              {"llama_cpp_python_version": version, "gguf": os.path.basename(a.smollm2), "cases": cases})

    types = list(v["token_types"])
    for i in USER_DEFINED_IDS:
        types[i] = 4
    qv = vocab_from_tokenizer_json(os.path.join(ROOT, "tests/fixtures/tokenizer/qwen35_like/tokenizer.json"))
    dump_json(os.path.join(ROOT, "tests/fixtures/gguf_tokenizer/qwen35_like_vocab.json"), qv)
    vocabs = {
        "smollm2": {"vocab": "../smollm2/vocab.json", "user_defined_ids": list(USER_DEFINED_IDS),
                    "gguf": dict(v, token_types=types)},
        "qwen35_like": {"vocab": "qwen35_like_vocab.json", "user_defined_ids": [], "gguf": qv},
    }
    out = {"llama_cpp_python_version": version, "texts": all_texts, "vocabs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in vocabs.items():
            presets = {}
            for pre in PRESETS:
                path = os.path.join(tmp, f"{name}-{pre}.gguf")
                write_vocab_gguf(path, spec["gguf"], pre)
                m = load(path)
                presets[pre] = [{"ids": tokenize(m, t, True), "ids_plain": tokenize(m, t, False)} for t in all_texts]
                del m
            out["vocabs"][name] = {"vocab": spec["vocab"], "user_defined_ids": spec["user_defined_ids"],
                                   "presets": presets}
    dump_json(os.path.join(ROOT, "tests/fixtures/gguf_tokenizer/presets.json"), out)

if __name__ == "__main__":
    main()
