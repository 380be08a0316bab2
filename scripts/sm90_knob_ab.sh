#!/usr/bin/env bash
# A/B of sm90 schedule steps in one binary (a -DFLASHCORE_SM90_SCHEDULE_VARIANTS=ON build): for
# each round, each variant in turn runs every shape through scripts/sm90_grid.sh (cuDNN in the same
# call), so clock and thermal drift hit every variant. Prints one line per (round, variant, shape).
# A variant is a FLASHCORE_SM90_SCHEDULE value, "all" for production (every knob unset), or
# comma-separated assignments of the lab build's knobs (FLASHCORE_SM90_TILE=narrow,
# FLASHCORE_SM90_EXP2=4, ...).
# Usage: scripts/sm90_knob_ab.sh BENCH OUT_DIR ROUNDS "VARIANT..." "D S CAUSAL"...
set -uo pipefail
bench="$1"
out="$2"
rounds="$3"
read -r -a variants <<< "$4"
shift 4
for round in $(seq "$rounds"); do
  for variant in "${variants[@]}"; do
    for shape in "$@"; do
      read -r d s causal <<< "$shape"
      printf 'round %s %-48s ' "$round" "$variant"
      if [ "$variant" = all ]; then
        env -u FLASHCORE_SM90_SCHEDULE GRID_D=$d GRID_S=$s GRID_CAUSAL=$causal \
          scripts/sm90_grid.sh "$bench" "$out/$variant"
      elif [[ "$variant" == *=* ]]; then
        IFS=, read -r -a assignments <<< "$variant"
        env -u FLASHCORE_SM90_SCHEDULE "${assignments[@]}" GRID_D=$d GRID_S=$s GRID_CAUSAL=$causal \
          scripts/sm90_grid.sh "$bench" "$out/${variant//[=,]/_}"
      else
        FLASHCORE_SM90_SCHEDULE=$variant GRID_D=$d GRID_S=$s GRID_CAUSAL=$causal \
          scripts/sm90_grid.sh "$bench" "$out/$variant"
      fi
    done
  done
done
