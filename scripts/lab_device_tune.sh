#!/usr/bin/env bash
# On a lent GPU machine: one tuning run of the sm90 kernel and one lab run with the CUTLASS FMHA
# peer, from a bundle made by scripts/pack_lab_bundle.sh (flashcore-bench, the src/ and include/
# trees the candidates include, the CUTLASS headers) in BUNDLE (default .device-lab). Everything
# it writes goes to $OUT (default lab-out/device): lab-device.tar.xz with the tuner's folder (without
# the candidates' objects), the lab runs and the logs, plus leaderboard.json, sm90_tuned.json and
# the logs on their own.
#   TUNE_BUDGET   seconds per tuning run (default 300)
#   TUNE_RUNS     tuning runs in a row on one leaderboard, each resuming the last (default 1)
#   TUNE_POPULATION  candidates per generation (default 15: with the shipped config, one wave of
#                 16 nvcc processes on 16 cores)
#   TUNE_SEED     seed of the first run, the next ones count up (default 1)
#   LEADERBOARD_IN  a leaderboard.json to extend (in BUNDLE; default: a new one)
#   TUNE_ONLY=1   skip the lab runs
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
bundle="${BUNDLE:-.device-lab}"
out="${OUT:-lab-out/device}"
work="$bundle/work"
mkdir -p "$out" "$work"
tar -xJf "$bundle/tree.tar.xz" -C "$work"
tar -xJf "$bundle/cutlass-include.tar.xz" -C "$work"
xz -dc "$bundle/flashcore-bench.xz" > "$work/flashcore-bench"
chmod +x "$work/flashcore-bench"
bench="$work/flashcore-bench"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
nvcc --version | tail -1
export PATH="$PATH:/usr/local/cuda/bin"
status=0

mkdir -p "$work/tune"
[ -n "${LEADERBOARD_IN:-}" ] && cp "$bundle/$LEADERBOARD_IN" "$work/tune/leaderboard.json"
for run in $(seq 1 "${TUNE_RUNS:-1}"); do
  "$bench" tune --source-root "$work" --cutlass-include "$work/include-cutlass" \
    --budget "${TUNE_BUDGET:-300}" --population "${TUNE_POPULATION:-15}" \
    --seed "$(( ${TUNE_SEED:-1} + run - 1 ))" --out "$work/tune" --export "$out/sm90_tuned.json" \
    > "$out/tune_$run.log" 2>&1 || status=$?
  head -1 "$out/tune_$run.log"
  tail -4 "$out/tune_$run.log"
  cp "$work/tune/leaderboard.json" "$out/" 2>/dev/null
done
if [ "${TUNE_ONLY:-0}" = 1 ]; then
  tar -cJf "$out/lab-device.tar.xz" -C "$work" --exclude='*.so' --exclude='*.cu' --exclude='*.ok' tune
  exit $status
fi

# flashcore's journey and both peers at the tuner's shapes (B4 H16 S4096 D128 bf16).
for causal in 0 1; do
  "$bench" run --labs-root "$root" --targets flashcore,labs/flashattention,peers/cutlass \
    --batch 4 --heads 16 --seqlen 4096 --head-dim 128 --dtype bf16 --causal "$causal" \
    --out "$work/lab_causal$causal" > "$out/lab_causal$causal.log" 2>&1 || status=$?
  grep -E "done|results" "$out/lab_causal$causal.log"
done
"$bench" run --labs-root "$root" --targets labs/flashattention,peers/cutlass \
  --out "$work/lab_minimal" > "$out/lab_minimal.log" 2>&1 || status=$?
grep -E "done|results" "$out/lab_minimal.log"

tar -cJf "$out/lab-device.tar.xz" -C "$work" --exclude='*.so' --exclude='*.cu' --exclude='*.ok' \
  tune lab_causal0 lab_causal1 lab_minimal
ls -la "$out"
exit $status
