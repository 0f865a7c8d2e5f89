#!/usr/bin/env bash
# The tests of `ember serve` (tests/server, pytest): the official openai client against SmolLM2-135M and the Qwen3.5
# fixture, hostile input, a load test, and the web chat page in headless Chromium. Installs what they need: Debian
# chromium + chromium-driver, and a venv with the PyPI packages below (in $EMBER_CACHE, default ~/.cache/ember).
# Needs build/bin/ember (scripts/build.sh). Extra arguments go to pytest (e.g. -k load).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${EMBER_CACHE:-$HOME/.cache/ember}"
VENV="$CACHE/venv-server"
PKGS=(openai==3.57.0 pytest==9.2.0 selenium==4.51.0 jsonschema==4.26.0)

missing=()
for p in chromium chromium-driver; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! "$VENV/bin/python" -c "import openai, pytest, selenium, jsonschema" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "${PKGS[@]}"
fi
export EMBER_SMOLLM2="${EMBER_SMOLLM2:-$(bash scripts/fetch-smollm2.sh)}"
export EMBER_BIN="${EMBER_BIN:-$PWD/build/bin/ember}"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/server "$@"
