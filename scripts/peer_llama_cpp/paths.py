"""Where the peer (llama.cpp via llama-cpp-python) lives on this machine.

PEER_VENV  venv made by scripts/setup-peer.sh (default /opt/peer-venv, else ~/.venvs/peer)
PEER_SRC   the extracted llama-cpp-python sdist (default: newest ~/.cache/ember/src/llama_cpp_python-*);
           its vendor/llama.cpp holds convert_hf_to_gguf.py, gguf-py and the llama.cpp sources.
"""
from __future__ import annotations

import os
from pathlib import Path

CACHE = Path(os.environ.get("EMBER_CACHE", Path.home() / ".cache" / "ember"))


def peer_venv() -> Path:
    if "PEER_VENV" in os.environ:
        return Path(os.environ["PEER_VENV"])
    for p in (Path("/opt/peer-venv"), Path.home() / ".venvs" / "peer"):
        if (p / "bin" / "python").exists():
            return p
    raise SystemExit("peer venv not found: run scripts/setup-peer.sh (or set PEER_VENV)")


def peer_python() -> str:
    return str(peer_venv() / "bin" / "python")


def peer_src() -> Path:
    if "PEER_SRC" in os.environ:
        return Path(os.environ["PEER_SRC"])
    cands = sorted((CACHE / "src").glob("llama_cpp_python-*"))
    cands = [c for c in cands if (c / "vendor" / "llama.cpp").is_dir()]
    if not cands:
        raise SystemExit(f"no extracted llama-cpp-python sdist under {CACHE / 'src'}: run scripts/setup-peer.sh")
    return cands[-1]


def derived_dir() -> Path:
    """files made from downloaded models (e.g. F32 dequantizations), kept out of models/"""
    d = CACHE / "derived"
    d.mkdir(parents=True, exist_ok=True)
    return d


def llama_cpp_dir() -> Path:
    return peer_src() / "vendor" / "llama.cpp"


def smollm2_gguf() -> Path:
    models = CACHE / "models"
    cands = [c for c in sorted(models.glob("SmolLM2-135M-Instruct*.gguf")) if "dequant" not in c.name]
    if not cands:
        raise SystemExit(f"no SmolLM2 GGUF in {models}: run scripts/fetch-smollm2.sh")
    return cands[0]
