#!/usr/bin/env bash
# On a lent GPU machine, runs binaries built elsewhere and carried as .device/bin/*.xz (see
# scripts/pack_device.sh): unpacks them into build/prebuilt and runs the steps named on the command
# line, each under a time limit, logging to $OUT (or lab-out/device). Steps:
#   tests[=FILTER]  the GPU suite (gtest filter, default every case)
#   cpu             the CPU suite
#   bench           flashcore-bench run with the arguments in FLASHCORE_BENCH_ARGS
#   profile         flashcore-bench profile with the arguments in FLASHCORE_PROFILE_ARGS (needs ncu)
#   robust          flashcore-bench robust with the arguments in FLASHCORE_ROBUST_ARGS
#   report          flashcore-bench report over every results/profile/robust file of this run's
#                   earlier steps (in $OUT), into $OUT/report
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
      # Line-buffered, so that a suite stopped by the time limit still leaves the lines it printed.
      timeout "${FLASHCORE_STEP_TIMEOUT:-420}" stdbuf -oL build/prebuilt/flashcore_gpu_tests --gtest_brief=1 ${filter:+--gtest_filter="$filter"} \
        > "$out/gpu_tests_$index.log" 2>&1 || status=$?
      grep -E "FAILED|PASSED|SKIPPED|Failure|error" "$out/gpu_tests_$index.log" | tail -40 ;;
    cpu)
      timeout 120 build/prebuilt/flashcore_cpu_tests --gtest_brief=1 > "$out/cpu_tests_$index.log" 2>&1 || status=$?
      tail -3 "$out/cpu_tests_$index.log" ;;
    bench)
      # shellcheck disable=SC2086
      timeout "${FLASHCORE_STEP_TIMEOUT:-420}" build/prebuilt/flashcore-bench run --labs-root . --out "$out/bench_$index" \
        ${FLASHCORE_BENCH_ARGS:-} > "$out/bench_$index.log" 2>&1 || status=$?
      tail -60 "$out/bench_$index.log" ;;
    profile)
      # shellcheck disable=SC2086
      timeout "${FLASHCORE_STEP_TIMEOUT:-420}" build/prebuilt/flashcore-bench profile --labs-root . --out "$out/profile_$index" \
        ${FLASHCORE_PROFILE_ARGS:-} > "$out/profile_$index.log" 2>&1 || status=$?
      tail -40 "$out/profile_$index.log" ;;
    robust)
      # shellcheck disable=SC2086
      timeout "${FLASHCORE_STEP_TIMEOUT:-420}" build/prebuilt/flashcore-bench robust --out "$out/robust_$index" \
        ${FLASHCORE_ROBUST_ARGS:-} > "$out/robust_$index.log" 2>&1 || status=$?
      grep -E "FAILED|cells|artifacts" "$out/robust_$index.log" | tail -40 ;;
    report)
      mapfile -t inputs < <(ls "$out"/*/results.json "$out"/*/profile.json "$out"/*/robust.json 2>/dev/null)
      build/prebuilt/flashcore-bench report --labs-root . --out "$out/report" --inputs "${inputs[@]}" \
        > "$out/report.log" 2>&1 || status=$?
      cat "$out/report.log" ;;
    sanitize)
      FLASHCORE_GPU_TESTS=build/prebuilt/flashcore_gpu_tests scripts/sanitize.sh "$out" || status=$? ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
exit $status
