#!/usr/bin/env bash
# The sm90 schedule steps of docs/perf.md: one shape timed with each part of the schedule turned
# off in turn, cuDNN in the same run. Needs a flashcore-bench built with
# -DFLASHCORE_SM90_SCHEDULE_VARIANTS=ON (the variants exist for hd128 without softcap).
# Usage: scripts/sm90_schedule_steps.sh BENCH_BINARY OUT_DIR  (shape from FLASHCORE_B/H/S/D/CAUSAL)
set -uo pipefail
bench="$1"
out="$2"
mkdir -p "$out"
export FLASHCORE_BACKEND=sm90 FLASHCORE_D="${FLASHCORE_D:-128}"
export FLASHCORE_B="${FLASHCORE_B:-4}" FLASHCORE_H="${FLASHCORE_H:-16}" FLASHCORE_S="${FLASHCORE_S:-4096}"
# Production is all four parts; "dynamic" (tiles from a counter) applies to masked problems only.
for schedule in "persistent,pingpong,overlap,dynamic" "persistent,pingpong,dynamic" \
                "persistent,overlap,dynamic" "persistent,dynamic" "persistent,pingpong,overlap" \
                "pingpong,overlap"; do
  FLASHCORE_SM90_SCHEDULE="$schedule" "$bench" run --targets labs/flashattention:optimized_flashattention \
    --profile minimal --labs-root . --out "$out/$schedule" > "$out/$schedule.log" 2>&1
  printf '%-36s %s\n' "$schedule" "$(grep -E 'done .*(optimized|cudnn)' "$out/$schedule.log" |
    sed -E 's/.*provider ([a-z0-9]+) +p50 ([0-9.]+ us) +([0-9.]+ TFLOP\/s).*/\1 \2 \3/' | paste -sd' ')"
done
