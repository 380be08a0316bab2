#!/usr/bin/env bash
# Nsight Compute profile of one sm90 kernel launch per shape of the FA3 grid (after a few warm-up
# launches), leaving the clocks alone: tensor-pipe utilisation, issue slots, warp stall reasons
# and memory throughput, as text. Usage: scripts/sm90_profile.sh BENCH_BINARY OUT_DIR "D S CAUSAL"...
set -uo pipefail
bench="$1"
out="$2"
shift 2
mkdir -p "$out"
for shape in "$@"; do
  read -r d s causal <<< "$shape"
  name="D${d}_S${s}_causal${causal}"
  FLASHCORE_BACKEND=sm90 FLASHCORE_B=$((16384 / s)) FLASHCORE_H=$((2048 / d)) FLASHCORE_S=$s \
    FLASHCORE_D=$d FLASHCORE_CAUSAL=$causal FLASHCORE_DTYPE=bf16 \
    ncu --clock-control none --kernel-name-base mangled --kernel-name regex:sm9010fwd_kernel --launch-skip 5 --launch-count 1 \
    --set full --import-source no -f -o "$out/$name" \
    "$bench" run --targets labs/flashattention:optimized_flashattention --profile minimal --labs-root labs \
    --out "$out/run" > "$out/$name.log" 2>&1 || true
  echo "=== $name"
  ncu --import "$out/$name.ncu-rep" --page details \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
    --section SchedulerStats --section Occupancy --section LaunchStats 2>&1 |
    grep -E "Duration|Throughput|Pipe|Issue|Stall|Warp Cycles|Eligible|Active Warps|Registers|Shared Memory Config|Block Size|Grid Size|Executed Ipc" |
    head -60
  python3 "$(dirname "${BASH_SOURCE[0]}")/ncu_summary.py" "$out/$name.ncu-rep"
done
rm -rf "$out/run"
