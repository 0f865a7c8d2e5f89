#!/usr/bin/env python3
# make_spm_fixtures.py: a small SentencePiece (tokenizer.ggml.model "llama") vocabulary and llama.cpp's
# tokenizations of it (llama-cpp-python, the oracle), for src/tokenizer/gguf_spm_test.cpp.
#
#   PY=/opt/peer-venv/bin/python   # a Python with llama_cpp, gguf and sentencepiece
#   $PY scripts/make_spm_fixtures.py
#
# 1. Trains a SentencePiece BPE model (byte fallback, digits split, identity normalization, user-defined
#    symbols) on tests/fixtures/gguf_tokenizer/spm_train.txt — the settings of Llama-style tokenizer.model
#    files — with a small vocabulary so that many characters fall back to bytes.
# 2. Converts it to GGUF metadata as llama.cpp's convert_hf_to_gguf.py does for tokenizer.model (piece, score,
#    type: unknown / control / unused / byte / user-defined / normal) and writes vocab-only GGUFs with
#    add_space_prefix true and false.
# 3. Records llama.cpp's llama_tokenize ids (add_bos false; parse_special true and false; and add_bos true) and
#    token_to_piece decodes for every text of make_gguf_tokenizer_fixtures.py's set plus SPM-specific ones.
# Writes tests/fixtures/gguf_tokenizer/spm_vocab.json (scripts/gguf_vocab_dump.py format + scores,
# add_space_prefix) and tests/fixtures/gguf_tokenizer/spm_tokens.json.
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402
import llama_cpp  # noqa: E402
import sentencepiece as spm  # noqa: E402
from gguf_vocab_dump import dump  # noqa: E402
from make_gguf_tokenizer_fixtures import (detok, dump_json, finish_writer, load, texts, tokenize,  # noqa: E402
                                          vocab_only_writer)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USER_DEFINED = ["<tool>", "</tool>", "[INST]"]
SPM_TEXTS = [
    "Hello world", " Hello world", "  leading spaces", "trailing spaces  ", "Hello\nworld\n\n",
    "<s>after bos</s> x <unk> y", "<s><s>", "[INST] Hi [/INST] Hello", "<tool>call()</tool>x",
    "\u2581already escaped \u2581\u2581", "12345 67.89", "ünïcödé ©®™ €", "日本語のテキスト", "x",
]


def train(tmp):
    # The training text is committed (spm_train.txt: the tokenizer corpus plus a snapshot of this repository's
    # README and docs/architecture.md), so that the vocabulary does not change when those files do.
    corpus = os.path.join(ROOT, "tests/fixtures/gguf_tokenizer/spm_train.txt")
    prefix = os.path.join(tmp, "spm")
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, model_type="bpe", vocab_size=700, byte_fallback=True,
        split_digits=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        add_dummy_prefix=True, character_coverage=0.98, user_defined_symbols=USER_DEFINED,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
    return spm.SentencePieceProcessor(model_file=prefix + ".model")


def vocab_of(sp):
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        piece = sp.id_to_piece(i)
        t = 1  # normal
        if sp.is_unknown(i):
            t = 2
        elif sp.is_control(i):
            t = 3
        elif sp.is_unused(i):
            t = 5
        elif sp.is_byte(i):
            t = 6
        elif piece in USER_DEFINED:
            t = 4
        tokens.append(piece)
        scores.append(float(sp.get_score(i)))
        types.append(t)
    return tokens, scores, types


def write_gguf(path, tokens, scores, types, space_prefix):
    w = vocab_only_writer(path)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_space_prefix(space_prefix)
    finish_writer(w)


def main():
    all_texts = texts() + SPM_TEXTS
    out = {"llama_cpp_python_version": llama_cpp.__version__, "sentencepiece_version": spm.__version__,
           "texts": all_texts, "variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tokens, scores, types = vocab_of(train(tmp))
        for space_prefix in (True, False):
            path = os.path.join(tmp, f"spm-{int(space_prefix)}.gguf")
            write_gguf(path, tokens, scores, types, space_prefix)
            if space_prefix:
                v = dump(path)
                r = gguf.GGUFReader(path)
                v["scores"] = [float(s) for s in r.fields["tokenizer.ggml.scores"].contents()]
                v["add_space_prefix"] = True
                dump_json(os.path.join(ROOT, "tests/fixtures/gguf_tokenizer/spm_vocab.json"), v)
            m = load(path)
            cases = []
            for t in all_texts:
                ids = tokenize(m, t, True)
                cases.append({"ids": ids, "ids_plain": tokenize(m, t, False),
                              "ids_bos": m.tokenize(t.encode("utf-8"), add_bos=True, special=True),
                              "decoded": detok(m, ids, True), "decoded_skip_special": detok(m, ids, False)})
            out["variants"]["space_prefix" if space_prefix else "no_space_prefix"] = cases
            del m
    dump_json(os.path.join(ROOT, "tests/fixtures/gguf_tokenizer/spm_tokens.json"), out)


if __name__ == "__main__":
    main()
