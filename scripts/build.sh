#!/usr/bin/env bash
# Configures and builds ember (CPU) into build/; extra arguments go to cmake (e.g. -DEMBER_CUDA=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
