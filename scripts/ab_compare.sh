#!/usr/bin/env bash
# A/B timing of two flashcore-bench builds on the same shapes in one session, alternating A and B
# so that clock and thermal drift hit both: prints one line per (round, build, shape).
# Usage: scripts/ab_compare.sh BENCH_A BENCH_B OUT_DIR ROUNDS "D S CAUSAL"...
set -uo pipefail
bench_a="$1"
bench_b="$2"
out="$3"
rounds="$4"
shift 4
for round in $(seq "$rounds"); do
  for label in A B; do
    bench="$bench_a"
    [ "$label" = B ] && bench="$bench_b"
    for shape in "$@"; do
      read -r d s causal <<< "$shape"
      printf 'round %s %s ' "$round" "$label"
      GRID_D=$d GRID_S=$s GRID_CAUSAL=$causal scripts/sm90_grid.sh "$bench" "$out/$label"
    done
  done
done
