#!/usr/bin/env bash
# The test command (README, CI): build, run every test with CTest, then the loader tests under ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
(cd build && ctest --output-on-failure -j"$(nproc)")
# Loaders and parsers see untrusted input: run their tests under AddressSanitizer as well.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_ASAN=ON >/dev/null
cmake --build build-asan -j"$(nproc)" --target test_io test_tokenizer
for t in test_io test_tokenizer; do ./build-asan/$t --gtest_brief=1; done
