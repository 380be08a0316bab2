#!/usr/bin/env bash
# On a lent GPU machine, runs binaries built elsewhere and carried as .device/bin/*.xz (see
# scripts/pack_device.sh): unpacks them into build/prebuilt and runs the steps named on the command
# line, each under a time limit, logging to $OUT (or lab-out/device). Steps:
#   tests[=FILTER]  the GPU suite (gtest filter, default every case)
#   cpu             the CPU suite
#   bench           flashcore-bench run with the arguments in FLASHCORE_BENCH_ARGS
#   sanitize        scripts/sanitize.sh on the prebuilt GPU suite
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${OUT:-lab-out/device}"
mkdir -p "$out" build/prebuilt
for packed in .device/bin/*.xz; do
  xz -dc "$packed" > "build/prebuilt/$(basename "$packed" .xz)"
  chmod +x "build/prebuilt/$(basename "$packed" .xz)"
done
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
status=0
index=0
for step in "$@"; do
  index=$((index + 1))
  case "$step" in
    tests*)
      filter="${step#tests}"; filter="${filter#=}"
      timeout "${FLASHCORE_STEP_TIMEOUT:-420}" build/prebuilt/flashcore_gpu_tests --gtest_brief=1 ${filter:+--gtest_filter="$filter"} \
        > "$out/gpu_tests_$index.log" 2>&1 || status=$?
      grep -E "FAILED|PASSED|SKIPPED|Failure|error" "$out/gpu_tests_$index.log" | tail -40 ;;
    cpu)
      timeout 120 build/prebuilt/flashcore_cpu_tests --gtest_brief=1 > "$out/cpu_tests_$index.log" 2>&1 || status=$?
      tail -3 "$out/cpu_tests_$index.log" ;;
    bench)
      # shellcheck disable=SC2086
      timeout "${FLASHCORE_STEP_TIMEOUT:-420}" build/prebuilt/flashcore-bench run --labs-root labs --out "$out/bench_$index" \
        ${FLASHCORE_BENCH_ARGS:-} > "$out/bench_$index.log" 2>&1 || status=$?
      tail -60 "$out/bench_$index.log" ;;
    sanitize)
      FLASHCORE_GPU_TESTS=build/prebuilt/flashcore_gpu_tests scripts/sanitize.sh "$out" || status=$? ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
exit $status
