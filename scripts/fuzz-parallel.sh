#!/usr/bin/env bash
# Long fuzz runs on a machine with many cores: WORKERS libFuzzer processes per target, all targets at once, each
# for SECONDS, over the prebuilt binaries of build-fuzz/ (scripts/fuzz.sh --build here, or scripts/fuzz-pack.sh's
# archive unpacked there with LD_LIBRARY_PATH=build-fuzz/lib). The workers of a target share its corpus directory
# (build-fuzz/corpus/TARGET: each picks up what the others add). Same flags as scripts/fuzz.sh: 1-s timeout, 2 GB
# RSS, the target's dictionary, ASan + UBSan options. A timeout counts only if its input is slow alone three times.
# Prints per target: executions summed over the workers, CPU-minutes, final coverage, findings; exits non-zero
# if any worker found something. Logs: build-fuzz/logs/TARGET.wN.log; inputs found: build-fuzz/artifacts/TARGET/.
#   scripts/fuzz-parallel.sh SECONDS WORKERS TARGET..
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?usage: scripts/fuzz-parallel.sh SECONDS WORKERS TARGET..} workers=${2:?workers}
shift 2
[ $# -gt 0 ] || { echo "no targets (scripts/fuzz.sh --list)" >&2; exit 2; }
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0:quarantine_size_mb=64}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
B=build-fuzz
mkdir -p "$B/logs"
for t in "$@"; do
  [ -x "$B/tests/fuzz/fuzz_$t" ] || { echo "no $B/tests/fuzz/fuzz_$t" >&2; exit 2; }
  mkdir -p "$B/corpus/$t" "$B/artifacts/$t"
  dict=()
  for d in "tests/fuzz/dict/$t.dict" "tests/fuzz/dict/${t%%_*}.dict"; do [ -f "$d" ] && { dict=(-dict="$d"); break; }; done
  for w in $(seq 1 "$workers"); do
    "$B/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=1 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$B/artifacts/$t/w$w-" "${dict[@]}" "$B/corpus/$t" "tests/fuzz/corpus/$t" >"$B/logs/$t.w$w.log" 2>&1 &
  done
done
wait
rc=0
for t in "$@"; do
  runs=0 cov=0 bad=()
  for w in $(seq 1 "$workers"); do
    log="$B/logs/$t.w$w.log"
    n=$(awk '/^stat::number_of_executed_units:/ {print $2}' "$log" | tail -1)
    runs=$((runs + ${n:-0}))
    c=$(grep -a -E '^#[0-9]+' "$log" | tail -1 | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
    [ "${c:-0}" -gt "$cov" ] && cov=$c
  done
  for a in "$B/artifacts/$t"/w*-*; do
    [ -e "$a" ] || continue
    case $(basename "$a") in
      w*-timeout-*)  # slow alone three times, or load
        slow=0
        for _ in 1 2 3; do "$B/tests/fuzz/fuzz_$t" -timeout=1 "$a" >/dev/null 2>&1 || slow=$((slow + 1)); done
        [ $slow -eq 3 ] && bad+=("$a") || mv "$a" "$(dirname "$a")/unreproduced-$(basename "$a")" ;;
      *) bad+=("$a") ;;
    esac
  done
  echo "fuzz $t: $runs runs over $workers workers x ${seconds}s ($((workers * seconds / 60)) CPU-min), cov $cov, findings: ${#bad[@]} ${bad[*]:-}"
  [ ${#bad[@]} -eq 0 ] || rc=1
done
exit $rc
