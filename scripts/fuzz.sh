#!/usr/bin/env bash
# libFuzzer targets of tests/fuzz (ASan + UBSan), built with Debian's clang into build-fuzz/.
#   scripts/fuzz.sh --list               target names, one per line
#   scripts/fuzz.sh TARGET SECONDS [ARGS] build what TARGET needs, fuzz it for SECONDS from its committed corpus
#                                        (tests/fuzz/corpus/TARGET, read-only) plus build-fuzz/corpus/TARGET (new
#                                        inputs); extra ARGS go to libFuzzer (e.g. -runs=N, -jobs=N)
#   scripts/fuzz.sh --build [TARGET..]   only build (all targets by default)
#   scripts/fuzz.sh --coverage [TARGET..] line coverage of the files each target parses, reached by its corpora
#                                        (committed + build-fuzz/corpus): a -fprofile-instr-generate build in
#                                        build-fuzz-cov/, every input run once, llvm-cov report
# Exits non-zero on any sanitizer report, crash, leak, out-of-memory or input slower than 1 s (the offending
# input is saved as build-fuzz/artifacts/TARGET/{crash,leak,oom,timeout}-*). EMBER_FUZZ_JOBS sets build jobs;
# EMBER_FUZZ_PREBUILT=1 runs the binaries already in build-fuzz/ without building (a machine without apt or a
# compiler: scripts/fuzz-pack.sh, scripts/fuzz-all.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_DIR=tests/fuzz
BUILD=build-fuzz

targets() { sed -n 's/^ember_fuzz(\([a-z0-9_]*\) .*/\1/p' "$FUZZ_DIR/CMakeLists.txt"; }

need_clang() {
  local pkgs=(clang-14 libclang-rt-14-dev libomp-14-dev) missing=()
  for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    local SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

build() {  # build DIR EXTRA_CMAKE_FLAG TARGET..
  local dir=$1 flag=$2
  shift 2
  bash scripts/install-deps.sh
  need_clang
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Fuzz -DCMAKE_C_COMPILER=clang-14 \
      -DCMAKE_CXX_COMPILER=clang++-14 -DEMBER_FUZZ=ON -DEMBER_TESTS=OFF "$flag" >/dev/null
  fi
  local t=() n
  for n in "$@"; do t+=("fuzz_$n"); done
  cmake --build "$dir" -j"${EMBER_FUZZ_JOBS:-$(nproc)}" --target "${t[@]}"
}

# The library sources a target exercises, for its coverage report.
sources() {
  case $1 in
    gguf) echo src/io/gguf.cpp src/io/gguf_value.cpp ;;
    safetensors) echo src/io/safetensors.cpp src/io/json_file.cpp ;;
    qwen35_config) echo src/models/qwen35_config.cpp src/io/json_file.cpp ;;
    gguf_model) echo src/io/gguf.cpp src/models/llama.cpp src/models/qwen35_gguf.cpp src/models/gguf_weights.cpp \
      src/models/registry.cpp ;;
    gguf_vocab) echo src/tokenizer/gguf_tokenizer.cpp src/tokenizer/gguf_vocab.cpp src/tokenizer/gguf_pre.cpp \
      src/tokenizer/spm.cpp src/tokenizer/bpe.cpp src/tokenizer/special_split.cpp ;;
    tokenizer_json|tokenizer_encode) echo src/tokenizer/tokenizer.cpp src/tokenizer/bpe.cpp \
      src/tokenizer/pretokenize.cpp src/tokenizer/normalize.cpp src/tokenizer/added_tokens.cpp \
      src/tokenizer/utf8.cpp src/tokenizer/stream_decoder.cpp
      if [ "$1" = tokenizer_encode ]; then echo src/tokenizer/spm.cpp; fi ;;  # SentencePiece: GGUF vocabularies only
    jinja|chat_messages) ls src/template/*.cpp | grep -v _test ;;
  esac
}

coverage() {
  local dir=build-fuzz-cov t
  build "$dir" -DEMBER_FUZZ_COVERAGE=ON "$@"
  for t in "$@"; do
    local prof="$dir/prof/$t"
    rm -rf "$prof" && mkdir -p "$prof" "$BUILD/corpus/$t"
    LLVM_PROFILE_FILE="$prof/%p.profraw" "$dir/tests/fuzz/fuzz_$t" -runs=0 "$BUILD/corpus/$t" "$FUZZ_DIR/corpus/$t" \
      >"$prof/run.log" 2>&1 || { tail -20 "$prof/run.log" >&2; exit 1; }
    llvm-profdata-14 merge -sparse "$prof"/*.profraw -o "$prof/merged.profdata"
    echo "== $t: line coverage of its parser files by $(find "$BUILD/corpus/$t" "$FUZZ_DIR/corpus/$t" -type f | wc -l) inputs"
    # shellcheck disable=SC2046
    llvm-cov-14 report "$dir/tests/fuzz/fuzz_$t" -instr-profile="$prof/merged.profdata" -show-region-summary=false \
      -show-branch-summary=false $(sources "$t") | awk '$NF ~ /%$/ {print "  " $1 ": " $(NF-2) " lines, " $NF " covered"}' 
  done
}

case "${1:-}" in
  --list) targets; exit 0 ;;
  --build|--coverage)
    mode=$1; shift
    if [ $# -eq 0 ]; then mapfile -t all < <(targets); set -- "${all[@]}"; fi
    if [ "$mode" = --build ]; then build "$BUILD" -DEMBER_FUZZ_COVERAGE=OFF "$@"; else coverage "$@"; fi
    exit 0 ;;
  ""|-h|--help) sed -n '2,10p' "$0"; exit 2 ;;
esac

target=$1 seconds=${2:?usage: scripts/fuzz.sh TARGET SECONDS}
shift 2
targets | grep -qx "$target" || { echo "unknown fuzz target '$target' (scripts/fuzz.sh --list)" >&2; exit 2; }
if [ -n "${EMBER_FUZZ_PREBUILT:-}" ]; then
  [ -x "$BUILD/tests/fuzz/fuzz_$target" ] || { echo "EMBER_FUZZ_PREBUILT: no $BUILD/tests/fuzz/fuzz_$target" >&2; exit 2; }
else
  build "$BUILD" -DEMBER_FUZZ_COVERAGE=OFF "$target"
fi
work="$BUILD/corpus/$target" art="$BUILD/artifacts/$target"
mkdir -p "$work" "$art"
dict=()  # dict/TARGET.dict, else the dictionary of the family: dict/gguf.dict for gguf_model, ...
for d in "$FUZZ_DIR/dict/$target.dict" "$FUZZ_DIR/dict/${target%%_*}.dict"; do
  [ -f "$d" ] && { dict=(-dict="$d"); break; }
done
# -timeout: an input slower than EMBER_FUZZ_TIMEOUT (1 s) is a finding; -rss_limit_mb also bounds any single malloc
# (malloc_limit_mb defaults to it). The whole libFuzzer log goes to build-fuzz/logs/TARGET.log.
# A smaller quarantine than ASan's 256 MB: recycling it stalls a run long enough to look like a timeout.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0:quarantine_size_mb=64}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
log="$BUILD/logs/$target.log"
mkdir -p "$BUILD/logs"
# One libFuzzer run for the seconds left; returns its exit status. A timeout must reproduce: on a loaded machine a
# stalled process (or ASan's quarantine) can pass 1 s of wall time on an input that runs in a millisecond, so the
# input is replayed alone three times, and only slow every time is a finding (else fuzzing resumes).
segment() {
  local left=$1 rc
  shift
  "$BUILD/tests/fuzz/fuzz_$target" -max_total_time="$left" -timeout="${EMBER_FUZZ_TIMEOUT:-1}" -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$art/" "${dict[@]}" "$@" "$work" "$FUZZ_DIR/corpus/$target" >>"$log" 2>&1
  rc=$?
  if [ $rc -eq 70 ]; then
    local slow reproduced=0
    slow=$(ls -t "$art"/timeout-* | head -1)
    for _ in 1 2 3; do
      "$BUILD/tests/fuzz/fuzz_$target" -timeout="${EMBER_FUZZ_TIMEOUT:-1}" "$slow" >>"$log" 2>&1 || reproduced=$((reproduced + 1))
    done
    if [ $reproduced -lt 3 ]; then
      echo "fuzz $target: a timeout on $slow did not reproduce ($reproduced of 3 replays slow): machine load" >&2
      mv "$slow" "$art/unreproduced-$(basename "$slow")"
      return 75
    fi
  fi
  return $rc
}
: >"$log"
start=$SECONDS
set +e
while :; do
  segment $((seconds - (SECONDS - start))) "$@"
  rc=$?
  [ $rc -eq 75 ] && [ $((seconds - (SECONDS - start))) -gt 5 ] && continue
  [ $rc -eq 75 ] && rc=0
  break
done
set -e
elapsed=$((SECONDS - start))
# libFuzzer's last status line: "#RUNS <kind> cov: C ft: F corp: N/SIZE ... exec/s: E ...".
last=$(grep -a -E '^#[0-9]+' "$log" | tail -1 || true)
runs=$(awk '/^stat::number_of_executed_units:/ {n += $2} END {if (n) print n}' "$log")  # over all segments
cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last") ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<<"$last")
[ -n "$runs" ] || runs=$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$last")
summary="runs ${runs:-?} in ${elapsed}s, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}"
if [ $rc -ne 0 ]; then
  tail -60 "$log" >&2
  echo "fuzz $target: FAILED (exit $rc; $summary); the input is in $art/, the log in $log" >&2
  exit 1
fi
echo "fuzz $target: ok ($summary; no sanitizer report, crash, leak or timeout)"