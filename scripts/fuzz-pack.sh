#!/usr/bin/env bash
# Packs the fuzz binaries of build-fuzz/ (scripts/fuzz.sh --build), stripped (a sanitizer report there shows
# addresses; the saved input reproduces it here with symbols), the shared libraries they link (lib/) and the corpora
# found so far (build-fuzz/corpus) into .devfuzz/fuzz.tar.xz, for long runs on a machine with more cores: there,
# unpack into build-fuzz/ and run scripts/fuzz-all.sh SECONDS (libraries: below). Git-ignored.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .devfuzz/stage && mkdir -p .devfuzz/stage/tests/fuzz .devfuzz/stage/lib build-fuzz/corpus
for f in build-fuzz/tests/fuzz/fuzz_*; do [ -x "$f" ] && strip -o ".devfuzz/stage/tests/fuzz/$(basename "$f")" "$f"; done
# The shared libraries they link beyond the C/C++ runtime (a GPU image lacks PCRE2, utf8proc, cpp-httplib's
# OpenSSL and Brotli, clang's OpenMP). There: LD_LIBRARY_PATH=build-fuzz/lib.
ldd build-fuzz/tests/fuzz/fuzz_* | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  grep -v -E '^(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt)\.so' |
  while read -r name path; do cp "$(readlink -f "$path")" ".devfuzz/stage/lib/$name"; done
cp -r build-fuzz/corpus .devfuzz/stage/
tar -C .devfuzz/stage -cf - . | xz -T2 --lzma2=preset=6,dict=64MiB > .devfuzz/fuzz.tar.xz
rm -rf .devfuzz/stage
ls -la .devfuzz/fuzz.tar.xz
