#!/usr/bin/env bash
# A/B of binaries and environment settings in one device call (timings compare only within one call and one GPU):
#   scripts/gpu-ab.sh OUT ROUNDS "BENCH ARGS" "label|binary|VAR=1 VAR2=0" ...
# runs `binary bench BENCH ARGS` for every variant, ROUNDS times interleaved (variant order rotating per round, so
# that clock or thermal drift does not favour one), logs under OUT/ab-<label>-<round>.md, and prints the table rows
# of every run last, labelled. Binaries: paths relative to the repository root (e.g. build-gpu/bin/ember and a
# baseline built from an older commit, carried in .devbin).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=$1 ROUNDS=$2 ARGS=$3
shift 3
mkdir -p "$OUT"
variants=("$@")
n=${#variants[@]}
for ((r = 1; r <= ROUNDS; ++r)); do
  for ((i = 0; i < n; ++i)); do
    v=${variants[$(((i + r - 1) % n))]}
    IFS='|' read -r label bin envs <<< "$v"
    # shellcheck disable=SC2086
    env $envs "$bin" bench $ARGS > "$OUT/ab-$label-$r.md" 2> "$OUT/ab-$label-$r.err"
    echo "[$label round $r rc=$?]" >> "$OUT/ab-$label-$r.err"
  done
done
for v in "${variants[@]}"; do
  IFS='|' read -r label bin envs <<< "$v"
  for ((r = 1; r <= ROUNDS; ++r)); do
    echo "== $label ($bin $envs) round $r"
    grep -E '^\|' "$OUT/ab-$label-$r.md" | grep -vE '^\|( *model| *-)' || tail -3 "$OUT/ab-$label-$r.err"
  done
done
