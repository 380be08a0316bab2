#!/usr/bin/env bash
# The sm80 backend at head dims of its own instantiations and rounded-up ones (B4 H16 S4096 bf16,
# non-causal, each with cuDNN in the same run), and against the scalar kernel that was the only
# fused choice for hd96/hd192 on an sm80 GPU before (B1 H16 S2048 bf16). docs/perf.md, "sm80:
# every head dim".
# Usage: scripts/sm80_head_dims.sh BENCH_BINARY OUT_DIR [HEAD_DIM ...]
set -uo pipefail
bench="$1"
out="$2"
shift 2
dims=("$@")
[ ${#dims[@]} -gt 0 ] || dims=(32 64 80 96 112 128 160 192 224 256)
mkdir -p "$out"
line() {  # label, then the environment for one flashcore-bench case
  local label="$1"
  shift
  env "$@" "$bench" run --targets labs/flashattention:optimized_flashattention --profile minimal \
    --labs-root labs --out "$out/run" > "$out/last.log" 2>&1
  printf '%-30s %s\n' "$label" "$(grep -E 'done .*(optimized|cudnn)' "$out/last.log" |
    sed -E 's/.*provider ([a-z0-9]+) +p50 ([0-9.]+ us) +([0-9.]+ TFLOP\/s).*/\1 \2 \3/;
            s/.*(SKIPPED|FAILED).*/\1/' | paste -sd' ')"
}
for d in "${dims[@]}"; do
  line "sm80 hd$d B4 H16 S4096" FLASHCORE_BACKEND=sm80 FLASHCORE_B=4 FLASHCORE_H=16 \
    FLASHCORE_S=4096 FLASHCORE_D="$d" FLASHCORE_CAUSAL=0
done
for d in 96 192; do
  for backend in sm80 scalar; do
    line "$backend hd$d B1 H16 S2048" FLASHCORE_BACKEND=$backend FLASHCORE_B=1 FLASHCORE_H=16 \
      FLASHCORE_S=2048 FLASHCORE_D="$d" FLASHCORE_CAUSAL=0
  done
done
rm -rf "$out/run"
