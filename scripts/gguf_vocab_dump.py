#!/usr/bin/env python3
# gguf_vocab_dump.py: dumps the tokenizer metadata of a .gguf file (read with gguf-py's GGUFReader, an
# independent reader) into a compact JSON file with the fields of ember's GgufVocab (src/tokenizer/gguf_vocab.h):
#
#   /opt/venv/bin/python scripts/gguf_vocab_dump.py MODEL.gguf OUT.json
#
# Keys read: tokenizer.ggml.{model, pre, tokens, token_type, merges, bos_token_id, eos_token_id, eot_token_id,
# eom_token_id, padding_token_id, unknown_token_id, add_bos_token, add_eos_token, scores, add_space_prefix}. Absent ids are -1, absent flags
# null, an absent token_type list is written as [] (the C++ side then treats every token as normal). GGUF has no
# key for GgufVocab::extra_eos, so it is written as [].
import argparse
import json

from gguf import GGUFReader

IDS = {"bos_id": "bos_token_id", "eos_id": "eos_token_id", "eot_id": "eot_token_id", "eom_id": "eom_token_id",
       "pad_id": "padding_token_id", "unk_id": "unknown_token_id"}


def field(reader, name):
    f = reader.fields.get("tokenizer.ggml." + name)
    return None if f is None else f.contents()


def dump(path):
    r = GGUFReader(path)
    out = {
        "model": field(r, "model") or "",
        "pre": field(r, "pre") or "",
        "tokens": field(r, "tokens") or [],
        "token_types": [int(t) for t in (field(r, "token_type") or [])],
        "merges": field(r, "merges") or [],
    }
    for key, name in IDS.items():
        v = field(r, name)
        out[key] = -1 if v is None else int(v)
    for key, name in (("add_bos", "add_bos_token"), ("add_eos", "add_eos_token")):
        v = field(r, name)
        out[key] = None if v is None else bool(v)  # null: absent (llama.cpp then uses its per-pre default)
    out["extra_eos"] = []
    scores = field(r, "scores")  # SentencePiece ("llama") vocabularies
    if scores is not None:
        out["scores"] = [float(x) for x in scores]
    v = field(r, "add_space_prefix")
    out["add_space_prefix"] = None if v is None else bool(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("gguf")
    ap.add_argument("out")
    a = ap.parse_args()
    v = dump(a.gguf)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(v, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{a.out}: model={v['model']} pre={v['pre']} tokens={len(v['tokens'])} merges={len(v['merges'])}")


if __name__ == "__main__":
    main()
