#!/usr/bin/env bash
# The main job: set up, build, then describe and run a model. With no argument it uses random weights of
# the Qwen3.5-0.8B shape (no download needed); with a model directory (and optional prompt) it runs that.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
if [ $# -ge 1 ]; then
  build/bin/ember info -m "$1"
  build/bin/ember generate -m "$1" -p "${2:-Why is the sky blue?}" --chat -n "${3:-128}"
else
  build/bin/ember info --synthetic qwen3.5-0.8b
  build/bin/ember generate --synthetic qwen3.5-0.8b --prompt-len 64 -n 16
fi
