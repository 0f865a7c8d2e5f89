#!/usr/bin/env bash
# Runs every fuzz target at once, each for SECONDS (scripts/fuzz.sh TARGET SECONDS with EMBER_FUZZ_PREBUILT=1: the
# binaries must be in build-fuzz/ already), and prints one summary line per target; exits non-zero if any found
# something. Logs: build-fuzz/logs/TARGET.log; new inputs: build-fuzz/corpus/TARGET.
#   scripts/fuzz-all.sh SECONDS [TARGET..]
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:?usage: scripts/fuzz-all.sh SECONDS [TARGET..]}
shift
if [ $# -eq 0 ]; then mapfile -t all < <(bash scripts/fuzz.sh --list); set -- "${all[@]}"; fi
mkdir -p build-fuzz/logs
pids=()
for t in "$@"; do
  EMBER_FUZZ_PREBUILT=1 bash scripts/fuzz.sh "$t" "$seconds" >"build-fuzz/logs/$t.summary" 2>&1 &
  pids+=($!)
done
rc=0
for i in "${!pids[@]}"; do wait "${pids[$i]}" || rc=1; done
for t in "$@"; do tail -1 "build-fuzz/logs/$t.summary"; done
exit $rc
