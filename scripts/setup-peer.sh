#!/usr/bin/env bash
# setup-peer.sh — builds the independent peer: llama.cpp through PyPI llama-cpp-python, compiled from its
# sdist, CPU only, into a venv with numpy, gguf (gguf-py) and jinja2. Also keeps the sdist extracted
# (its vendor/llama.cpp has convert_hf_to_gguf.py, gguf-py and tools/perplexity) under
# ~/.cache/ember/src/, and with PEER_TOOLS=1 builds the llama-perplexity binary from it.
#   venv:  $PEER_VENV, default /opt/peer-venv, or ~/.venvs/peer if /opt is not writable
#   pin:   LLAMA_CPP_PYTHON_VERSION (default 0.3.36 — the version the committed goldens were made with)
# Idempotent; the pip build takes ~35 min on 2 cores (JOBS=2), llama-perplexity another ~30 min.
# Usage: scripts/setup-peer.sh   (e.g. nohup scripts/setup-peer.sh > /tmp/peer-build.log 2>&1 &)
set -euo pipefail

VER="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CACHE="${EMBER_CACHE:-$HOME/.cache/ember}"
if [[ -z "${PEER_VENV:-}" ]]; then
  if [[ -w /opt ]]; then PEER_VENV=/opt/peer-venv; else PEER_VENV="$HOME/.venvs/peer"; fi
fi
PY="${PYTHON:-python3}"
JOBS="${JOBS:-2}"
# CPU only, no BLAS/CUDA/Metal/curl. GGML_NATIVE=OFF: the same build on any x86-64 (AVX2/FMA variant).
CPU_ARGS="-DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_BLAS=OFF -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF"

mkdir -p "$CACHE/pip" "$CACHE/src"
sdist="$CACHE/pip/llama_cpp_python-$VER.tar.gz"
if [[ ! -s "$sdist" ]]; then
  "$PY" -m pip download -q --no-binary :all: --no-deps "llama-cpp-python==$VER" -d "$CACHE/pip"
fi
src="$CACHE/src/llama_cpp_python-$VER"
if [[ ! -d "$src/vendor/llama.cpp" ]]; then
  tar -xzf "$sdist" -C "$CACHE/src"
fi

if [[ ! -x "$PEER_VENV/bin/python" ]]; then
  "$PY" -m venv "$PEER_VENV"
fi
"$PEER_VENV/bin/pip" install -q --upgrade pip
"$PEER_VENV/bin/pip" install -q numpy gguf jinja2

have=$("$PEER_VENV/bin/python" -c "import llama_cpp; print(llama_cpp.__version__)" 2>/dev/null || true)
if [[ "$have" == "$VER" ]]; then
  echo "llama-cpp-python $VER already installed in $PEER_VENV"
else
  CMAKE_ARGS="$CPU_ARGS" CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
    "$PEER_VENV/bin/pip" install -v --no-cache-dir --no-binary llama-cpp-python "$sdist"
fi

if [[ "${PEER_TOOLS:-0}" == "1" && ! -x "$src/build-tools/bin/llama-perplexity" ]]; then
  cmake -S "$src/vendor/llama.cpp" -B "$src/build-tools" -G Ninja -DCMAKE_BUILD_TYPE=Release $CPU_ARGS \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF
  ninja -C "$src/build-tools" -j"$JOBS" llama-perplexity
fi

"$PEER_VENV/bin/python" - "$src" <<'PY'
import sys, re, llama_cpp, importlib.metadata as md
log = open(sys.argv[1] + "/CHANGELOG.md").read()
m = re.search(r"## \[" + re.escape(llama_cpp.__version__) + r"\].*?llama\.cpp@([0-9a-f]+)", log, re.S)
print("llama-cpp-python", llama_cpp.__version__, "vendored llama.cpp", m.group(1) if m else "?")
print("gguf", md.version("gguf"), "numpy", md.version("numpy"), "jinja2", md.version("jinja2"))
PY
echo "peer venv: $PEER_VENV   sdist: $src"
