#!/usr/bin/env python3
"""Run the llama.cpp converter (vendor/llama.cpp/convert_hf_to_gguf.py of the llama-cpp-python sdist)
on a tiny HF checkpoint whose tokenizer llama.cpp does not know.

The converter identifies a BPE pre-tokenizer by hashing the ids of a fixed probe string; a tokenizer we
trained ourselves has no known hash, so the converter refuses it. This wrapper only replaces that lookup
by the name given with --pre (e.g. llama-bpe, qwen2, qwen35: the pre-tokenizer regex the tokenizer was
built with); everything else is the unmodified converter. Needs torch + transformers (/opt/venv).

Usage: python convert_hf.py --pre NAME -- HF_DIR --outtype f32 --outfile OUT.gguf
"""
from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paths import llama_cpp_dir  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pre", required=True)
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    rest = a.rest[1:] if a.rest and a.rest[0] == "--" else a.rest
    root = llama_cpp_dir()
    # the converter's own gguf-py, not the PyPI one (the converter is written against it)
    sys.path.insert(0, str(root / "gguf-py"))
    sys.path.insert(0, str(root))
    import conversion.base as base  # noqa: E402
    base.TextModel.get_vocab_base_pre = lambda self, tokenizer: a.pre
    sys.argv = [str(root / "convert_hf_to_gguf.py"), *rest]
    runpy.run_path(str(root / "convert_hf_to_gguf.py"), run_name="__main__")


if __name__ == "__main__":
    main()
