#!/usr/bin/env bash
# Installs the Debian packages ember builds with (idempotent; needs root or sudo).
set -euo pipefail
pkgs=(cmake ninja-build g++ pkg-config libgtest-dev libgmock-dev nlohmann-json3-dev libpcre2-dev libutf8proc-dev)
pkgs+=(libcpp-httplib-dev)  # ember serve (src/server)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
