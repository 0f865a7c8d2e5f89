#!/usr/bin/env bash
# Packs the CUDA binaries built on this machine (build-cuda/, sm_90a) for the GPU machine: stripped and
# xz-compressed into .devbin/bins.tar.xz with the shared libraries the GPU image lacks (git-ignored; name
# .devbin in the device call's carry, then EMBER_PREBUILT=.devbin bash scripts/gpu-check.sh OUT there).
set -euo pipefail
cd "$(dirname "$0")/.."
bins=(bin/ember test_cuda gemv_bench gemm_bench)
rm -rf .devbin && mkdir -p .devbin/stage
for b in "${bins[@]}"; do strip -o ".devbin/stage/$(basename "$b")" "build-cuda/$b"; done
cp /lib/x86_64-linux-gnu/libpcre2-8.so.0 /lib/x86_64-linux-gnu/libutf8proc.so.2 /lib/x86_64-linux-gnu/libgomp.so.1 .devbin/
# One xz stream with a dictionary larger than a binary: the four share most bytes (the CUDA kernels), ≈ 9 MB in all.
tar -C .devbin/stage -cf - . | xz -T1 --lzma2=preset=6,dict=128MiB > .devbin/bins.tar.xz
rm -rf .devbin/stage
du -sh .devbin
