#!/usr/bin/env python3
# prepare_llama_vocab_tests.py: turns llama.cpp's own tokenizer test data (models/ggml-vocab-NAME.gguf with
# NAME.gguf.inp texts and NAME.gguf.out ids from HF tokenizers; shipped in the llama-cpp-python sdist under
# vendor/llama.cpp/models) into what src/tokenizer/gguf_llama_cpp_test.cpp reads when EMBER_LLAMA_VOCAB_DIR is set:
# OUT/NAME.json (scripts/gguf_vocab_dump.py format) + OUT/NAME.inp + OUT/NAME.out, for the byte-level BPE
# ("gpt2") and SentencePiece ("llama") vocabularies.
#
#   /opt/venv/bin/pip download llama-cpp-python --no-deps --no-binary :all: -d /tmp/lcp
#   tar xzf /tmp/lcp/*.tar.gz -C /tmp/lcp
#   /opt/venv/bin/python scripts/prepare_llama_vocab_tests.py /tmp/lcp/llama_cpp_python-*/vendor/llama.cpp/models OUT
#   EMBER_LLAMA_VOCAB_DIR=OUT build/bin/test_tokenizer --gtest_filter='GgufLlamaCpp.LlamaCppVocabTests'
import argparse
import glob
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gguf_vocab_dump import dump  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("models_dir")
    ap.add_argument("out")
    ap.add_argument("--only", nargs="*", help="names (e.g. qwen35 llama-bpe) to keep")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(a.models_dir, "ggml-vocab-*.gguf"))):
        name = os.path.basename(path)[len("ggml-vocab-"):-len(".gguf")]
        if a.only and name not in a.only:
            continue
        if not (os.path.exists(path + ".inp") and os.path.exists(path + ".out")):
            continue
        v = dump(path)
        if v["model"] not in ("gpt2", "llama"):
            print(f"skip {name}: tokenizer.ggml.model {v['model']}")
            continue
        with open(os.path.join(a.out, name + ".json"), "w", encoding="utf-8") as f:
            json.dump(v, f, ensure_ascii=False)
        shutil.copy(path + ".inp", os.path.join(a.out, name + ".inp"))
        shutil.copy(path + ".out", os.path.join(a.out, name + ".out"))
        print(f"{name}: pre={v['pre']} tokens={len(v['tokens'])}")


if __name__ == "__main__":
    main()
