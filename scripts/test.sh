#!/usr/bin/env bash
# The test command: installs what is missing, checks formatting (scripts/check_format.sh), builds
# (sm_80 + sm_90a; fails where ptxas serialized a kernel's wgmmas), runs every C++ test suite, then
# side by side builds the examples/cpp consumer against an install of the build
# (scripts/test_consumer.sh: find_package, pkg-config, add_subdirectory) and builds the Python
# package with pip over another install of it and runs pytest (scripts/test_python.sh). Each kernel
# is compiled once (the add_subdirectory consumer adds the hd64 fp16 ones for sm_80;
# examples/cpp/flex_functor and the JIT compile test one sm_80 flex kernel each). Without a GPU the
# GPU suites are reported as skipped, with the reason (the C++ one runs as one process, which must
# skip every case). Ends with the time each phase took.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset="${FLASHCORE_PRESET:-default}"

# Each phase's wall time, and its CPU time (user + system of its processes), which a shared or
# busy machine does not inflate.
phases=()
times_file=$(mktemp)
cpu_seconds() {  # file -> the CPU seconds of the children in bash's `times` output
  awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/)
                 print int(u[1] * 60 + u[2] + s[1] * 60 + s[2]) }' "$1"
}
started=$(date +%s)
phase_start=$started
phase_cpu=0
phase_done() {  # name: records the time since the previous phase ended
  local now cpu
  now=$(date +%s)
  times > "$times_file"  # in this shell: a subshell's `times` would not count this shell's children
  cpu=$(cpu_seconds "$times_file")
  phases+=("$(printf "%-34s %5d s wall %5d s CPU" "$1" $((now - phase_start)) \
    $((cpu - phase_cpu)))")
  phase_start=$now
  phase_cpu=$cpu
}
summary() {
  times > "$times_file"
  echo "test: time per phase ($(nproc) cores, preset $preset)"
  printf '  %s\n' "${phases[@]}"
  printf '  %-34s %5d s wall %5d s CPU\n' total $(($(date +%s) - started)) \
    "$(cpu_seconds "$times_file")"
  rm -f "$times_file"
}
trap summary EXIT

scripts/install_deps.sh
phase_done "install_deps"
scripts/check_format.sh
phase_done "check_format"
cmake --preset "$preset" >/dev/null
build_log=$(mktemp)
cmake --build --preset "$preset" -j "$(nproc)" 2>&1 | tee "$build_log"
# ptxas compiles a kernel whose wgmmas it cannot keep in flight (a branch or a peeled step around
# a wgmma, too few registers for its pipeline) with every wgmma serialized, and says so only as a
# "Potential Performance Loss" warning (C7510-C7520): the kernel stays correct and gets about a
# quarter slower (docs/perf.md, sm90 v7: hd128 S4k 617 -> 453 TFLOP/s). No kernel of ours may
# build that way.
if grep -E "C75[0-9][0-9]|Potential Performance Loss" "$build_log"; then
  echo "test: ptxas serialized a kernel's wgmmas (the lines above); see docs/perf.md, session 24"
  exit 1
fi
rm -f "$build_log"
phase_done "build ($preset)"
# With a GPU, every case is its own ctest test, one at a time, so that GPU cases never share the
# device. Without one, a GPU case can only start and skip, and a process start costs about 0.1 s
# (the cuBLAS that the unfused baseline links loads with it): the CPU cases run $(nproc) at a time
# under ctest, and the GPU suite runs once, in one process, which must skip every case and pass
# none (a GPU case that passes without a GPU tested nothing).
status=0
if compgen -G '/dev/nvidia[0-9]*' > /dev/null; then
  ctest --preset "$preset" -j 1 || status=$?
else
  ctest --preset "$preset" -j "$(nproc)" -LE gpu || status=$?
  gpu_suite="build/$preset/tests/flashcore_gpu_tests"
  gpu_log="build/$preset/Testing/Temporary/gpu_suite_without_gpu.log"
  if [ -x "$gpu_suite" ]; then
    mkdir -p "$(dirname "$gpu_log")"
    gpu_status=0
    "$gpu_suite" > "$gpu_log" 2>&1 || gpu_status=$?
    skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below:$/\1/p' "$gpu_log")
    if [ $gpu_status -ne 0 ] || ! grep -q '^\[  PASSED  \] 0 tests\.$' "$gpu_log" || [ -z "$skipped" ]; then
      tail -n 40 "$gpu_log"
      echo "test: the GPU suite must skip every case on a machine without a GPU ($gpu_log)"
      status=1
    else
      echo "GPU suite skipped: all $skipped cases, $(grep -m1 -o 'GPU test skipped: .*' "$gpu_log")"
    fi
  fi
fi
phase_done "ctest"
[ $status -eq 0 ] || exit $status

# Two checks of what the build above installs, side by side: neither keeps two cores busy (pytest's
# JIT tests run one nvcc at a time) and they share nothing but the build. The consumer's output is
# printed after the Python package's.
# - An embedding project's view: examples/cpp through find_package on an install tree of the build
#   (build/consumer/install) and through add_subdirectory of this tree.
# - The Python package over the library installed in build/install/$preset
#   (FLASHCORE_PREBUILT_PREFIX, cmake/prebuilt.cmake): only the bindings are compiled, and the
#   wheel holds the sm_80 and sm_90a kernels just tested.
prefix="build/install/$preset"
rm -rf "$prefix"
cmake --install "build/$preset" --prefix "$prefix" > /dev/null
consumer_log=$(mktemp)
scripts/test_consumer.sh "build/$preset" > "$consumer_log" 2>&1 &
consumer=$!
trap 'kill "$consumer" 2> /dev/null || true; summary' EXIT
python_status=0
FLASHCORE_PREBUILT_PREFIX="$PWD/$prefix" scripts/test_python.sh || python_status=$?
consumer_status=0
wait "$consumer" || consumer_status=$?
trap summary EXIT
echo "examples/cpp consumer (run beside the Python tests):"
cat "$consumer_log"
rm -f "$consumer_log"
phase_done "examples/cpp consumer + python"
[ $consumer_status -eq 0 ] || { echo "test: the examples/cpp consumer failed"; exit $consumer_status; }
exit $python_status
