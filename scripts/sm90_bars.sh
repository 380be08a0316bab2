#!/usr/bin/env bash
# The sm90 issue's measurements that the FA3 grid does not cover, each with cuDNN in the same run:
# the head-dim table (every multiple of 16, 32..256, B4 H16 S4096 bf16), GQA 8:1 against MHA at
# hd128 S8k, and the launch-bound shapes auto leaves to the small-grid tiles (decode and the
# canonical shape).
# Usage: scripts/sm90_bars.sh BENCH_BINARY OUT_DIR
set -uo pipefail
bench="$1"
out="$2"
mkdir -p "$out"
line() {  # label, then the environment for one flashcore-bench case
  local label="$1"
  shift
  env "$@" "$bench" run --targets labs/flashattention:optimized_flashattention --profile minimal \
    --labs-root . --out "$out/run" > "$out/last.log" 2>&1
  printf '%-34s %s\n' "$label" "$(grep -E 'done .*(optimized|cudnn)' "$out/last.log" |
    sed -E 's/.*provider ([a-z0-9]+) +p50 ([0-9.]+ us) +([0-9.]+ TFLOP\/s).*/\1 \2 \3/;
            s/.*(SKIPPED|FAILED).*/\1/' | paste -sd' ')"
}
for d in 32 48 64 80 96 112 128 144 160 176 192 208 224 240 256; do
  line "hd$d B4 H16 S4096" FLASHCORE_BACKEND=sm90 FLASHCORE_B=4 FLASHCORE_H=16 FLASHCORE_S=4096 \
    FLASHCORE_D=$d FLASHCORE_CAUSAL=0
done
for hkv in 32 4; do
  line "hd128 B2 H32 HKV$hkv S8192" FLASHCORE_BACKEND=sm90 FLASHCORE_B=2 FLASHCORE_H=32 \
    FLASHCORE_HKV=$hkv FLASHCORE_S=8192 FLASHCORE_D=128 FLASHCORE_CAUSAL=0
done
rm -rf "$out/run"
# Launch-bound shapes: the flashcore chapter's canonical and decode cases, auto against sm90
# (results.json in journey_<backend>/).
for backend in auto sm90; do
  FLASHCORE_BACKEND=$backend "$bench" run --targets flashcore:optimized --profile minimal \
    --labs-root . --out "$out/journey_$backend" > "$out/journey_$backend.log" 2>&1
  rm -f "$out/journey_$backend"/*.svg "$out/journey_$backend"/*.md
done
