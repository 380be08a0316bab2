#!/usr/bin/env bash
# A/B of sm90 schedule steps in one binary (a -DFLASHCORE_SM90_SCHEDULE_VARIANTS=ON build): for
# each round, each FLASHCORE_SM90_SCHEDULE value in turn runs every shape through
# scripts/sm90_grid.sh (cuDNN in the same call), so clock and thermal drift hit every variant.
# Prints one line per (round, variant, shape). "all" stands for the knob unset (production).
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
      else
        FLASHCORE_SM90_SCHEDULE=$variant GRID_D=$d GRID_S=$s GRID_CAUSAL=$causal \
          scripts/sm90_grid.sh "$bench" "$out/$variant"
      fi
    done
  done
done
