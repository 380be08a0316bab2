#!/usr/bin/env bash
# Nsight Compute profiles of the sm90 kernel at shapes of the FA3 grid: `flashcore-bench profile`
# (ncu --set full, one launch per shape after the parity gate and the timed launches, clocks left
# alone) per "D S CAUSAL" shape, into OUT_DIR/D<d>_S<s>_causal<c>/ (profile.md, profile.json and
# the .ncu-rep for the Nsight Compute GUI); prints each profile's table.
# Usage: scripts/sm90_profile.sh BENCH_BINARY OUT_DIR "D S CAUSAL"...
set -uo pipefail
root="$(dirname "${BASH_SOURCE[0]}")/.."
bench="$1"
out="$2"
shift 2
mkdir -p "$out"
status=0
for shape in "$@"; do
  read -r d s causal <<< "$shape"
  name="D${d}_S${s}_causal${causal}"
  "$bench" profile --targets labs/flashattention:optimized_flashattention --metrics-set full \
    --backend sm90 --batch $((16384 / s)) --heads $((2048 / d)) --seqlen "$s" --head-dim "$d" \
    --causal "$causal" --dtype bf16 --labs-root "$root" --out "$out/$name" > "$out/$name.log" 2>&1 ||
    status=$?
  echo "=== $name"
  grep -E "^\| (target|labs/)" "$out/$name/profile.md" 2>/dev/null || tail -5 "$out/$name.log"
done
exit $status
