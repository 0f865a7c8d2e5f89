#!/usr/bin/env bash
# Packs the CUDA binaries built on this machine (build-cuda/, sm_90a) for the GPU machine: stripped and
# xz-compressed into .devbin/bins.tar.xz (lib/: the shared libraries the GPU image lacks; git-ignored; name
# .devbin in the device call's carry, then EMBER_PREBUILT=.devbin bash scripts/gpu-check.sh OUT there).
# EMBER_BASE: see below.
set -euo pipefail
cd "$(dirname "$0")/.."
# PACK_BINS overrides the list (the carry limit: 64 MiB with the tracked files, ≈ 38 MiB of them fixtures).
read -r -a bins <<< "${PACK_BINS:-bin/ember test_cuda gemv_bench gemm_bench}"
[ -x build-cuda/bin/grammar_decode_bench ] && bins+=(bin/grammar_decode_bench)
rm -rf .devbin && mkdir -p .devbin/stage
for b in "${bins[@]}"; do mkdir -p ".devbin/stage/$(dirname "$b")"; strip -o ".devbin/stage/$b" "build-cuda/$b"; done
# EMBER_BASE=PATH: a baseline ember (built from an older commit in a worktree) packed as ember_base, for
# scripts/gpu-ab.sh in the same call.
[ -n "${EMBER_BASE:-}" ] && strip -o .devbin/stage/ember_base "$EMBER_BASE"
# GEMV_BASE=PATH: a baseline gemv_bench likewise (gemv_bench_base). VARIANT_DIR=DIR: DIR's ember and gemv_bench (a
# build of the working tree with one constant changed) as ember_var / gemv_bench_var.
[ -n "${GEMV_BASE:-}" ] && strip -o .devbin/stage/gemv_bench_base "$GEMV_BASE"
if [ -n "${VARIANT_DIR:-}" ]; then
  strip -o .devbin/stage/ember_var "$VARIANT_DIR/ember"
  [ "${VARIANT_GEMV:-1}" = 1 ] && strip -o .devbin/stage/gemv_bench_var "$VARIANT_DIR/gemv_bench"
fi
# The shared libraries of ember the GPU image lacks (the server's cpp-httplib and what it links: OpenSSL, Brotli).
# They go into the archive's lib/ (build-gpu/lib there), compressed with the binaries: the carry limit is 64 MiB.
mkdir -p .devbin/stage/lib
for l in libpcre2-8.so.0 libutf8proc.so.2 libgomp.so.1 libcpp-httplib.so.0.11 libssl.so.3 libcrypto.so.3 \
         libbrotlicommon.so.1 libbrotlidec.so.1 libbrotlienc.so.1; do
  cp "/lib/x86_64-linux-gnu/$l" .devbin/stage/lib/
done
# One xz stream with a dictionary larger than a binary: the four share most bytes (the CUDA kernels), ≈ 9 MB in all.
tar -C .devbin/stage -cf - . | xz -T1 --lzma2=preset=6,dict=128MiB > .devbin/bins.tar.xz
rm -rf .devbin/stage
# The commit the binaries were built from (the device's copy of .git can lag behind; gpu-check.sh reports this one).
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src tools include CMakeLists.txt || echo +dirty)" > .devbin/COMMIT
du -sh .devbin
