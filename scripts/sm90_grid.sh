#!/usr/bin/env bash
# A slice of the FA3 grid (16k tokens, hidden 2048: H = 2048 / D, B = 16384 / S), one shape per
# flashcore-bench call with cuDNN in the same call, printed as one line per shape:
#   D causal S dtype  sm90-TFLOP/s cuDNN-TFLOP/s ratio
# Usage: scripts/sm90_grid.sh BENCH_BINARY OUT_DIR
# Environment: GRID_D, GRID_S, GRID_CAUSAL, GRID_DTYPE (space-separated lists; the whole grid by
# default); anything else (e.g. FLASHCORE_SM90_SCHEDULE) passes through to the benchmark.
set -uo pipefail
bench="$1"
out="$2"
mkdir -p "$out"
for dtype in ${GRID_DTYPE:-bf16}; do
  for d in ${GRID_D:-64 128 256}; do
    for causal in ${GRID_CAUSAL:-0 1}; do
      for s in ${GRID_S:-512 1024 2048 4096 8192 16384}; do
        FLASHCORE_BACKEND=sm90 FLASHCORE_B=$((16384 / s)) FLASHCORE_H=$((2048 / d)) \
          FLASHCORE_S=$s FLASHCORE_D=$d FLASHCORE_CAUSAL=$causal FLASHCORE_DTYPE=$dtype \
          "$bench" run --targets labs/flashattention:optimized_flashattention --profile minimal --labs-root . \
          --out "$out/run" > "$out/last.log" 2>&1
        # "done ... provider P p50 X us Y TFLOP/s": ours first, then cuDNN's.
        tflops=$(grep -E 'done .*(optimized|cudnn)' "$out/last.log" |
          sed -nE 's/.* ([0-9.]+) TFLOP\/s.*/\1/p' | paste -sd' ')
        printf 'D%-4s causal %s S%-6s %s  %s\n' "$d" "$causal" "$s" "$dtype" \
          "$(echo "$tflops" | awk '{ if (NF == 2) printf "%7.1f %7.1f  %.2f", $1, $2, $1 / $2;
                                     else print "FAILED: " $0 }')"
      done
    done
  done
done
rm -rf "$out/run"
