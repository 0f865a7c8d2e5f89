# EMBER_FUZZ: every library is built with libFuzzer's coverage instrumentation and ASan + UBSan (UB aborts:
# -fno-sanitize-recover), and tests/fuzz builds one libFuzzer binary per target (fuzz_NAME). Clang only;
# scripts/fuzz.sh configures this in build-fuzz/.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "EMBER_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++-14")
endif()
# -O1 -gline-tables-only as OSS-Fuzz builds (fast to compile, symbolized stacks); build type "Fuzz" (scripts/fuzz.sh)
# adds no flags of its own and leaves NDEBUG undefined, so assert()s — nlohmann's among them — stay on.
# EMBER_FUZZ_COVERAGE: source-based coverage instead of the sanitizers, to measure which lines the corpora reach
# (scripts/fuzz.sh --coverage; build-fuzz-cov/).
option(EMBER_FUZZ_COVERAGE "EMBER_FUZZ build with -fprofile-instr-generate -fcoverage-mapping, no sanitizers" OFF)
if(EMBER_FUZZ_COVERAGE)
  add_compile_options(-fprofile-instr-generate -fcoverage-mapping -O1)
  add_link_options(-fprofile-instr-generate)
else()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -O1 -gline-tables-only)
  add_link_options(-fsanitize=address,undefined)
endif()
