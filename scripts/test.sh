#!/usr/bin/env bash
# The test command: installs what is missing, checks formatting (scripts/check_format.sh), builds
# (sm_80 + sm_90a; fails where ptxas serialized a kernel's wgmmas), runs every C++ test suite,
# installs the build and builds the examples/cpp consumer against it (scripts/test_consumer.sh:
# find_package, pkg-config, add_subdirectory), then
# builds the Python package with pip over that same installed library and runs pytest
# (scripts/test_python.sh). Each kernel is compiled once (the add_subdirectory consumer adds the
# hd64 fp16 ones for sm_80; examples/cpp/flex_functor and the JIT compile test one sm_80 flex kernel
# each). Without a GPU the GPU suites are reported as skipped, with the reason. Ends with the time
# each phase took.
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
# Without a GPU each GPU case only starts and skips, so the cases run $(nproc) at a time; with one,
# one at a time, so that GPU cases never share the device.
jobs=1
compgen -G '/dev/nvidia[0-9]*' > /dev/null || jobs=$(nproc)
status=0
ctest --preset "$preset" -j "$jobs" || status=$?
# ctest hides the output of skipped suites; say why the GPU suite was skipped.
log="build/$preset/Testing/Temporary/LastTest.log"
if grep -q "GPU test skipped" "$log" 2>/dev/null; then
  echo "GPU suite skipped: $(grep -m1 -o 'GPU test skipped: .*' "$log")"
fi
phase_done "ctest"
[ $status -eq 0 ] || exit $status

# An embedding project's view: examples/cpp through find_package on the install tree of the build
# above and through add_subdirectory of this tree.
prefix="build/install/$preset"
scripts/test_consumer.sh "build/$preset" "$prefix"
phase_done "install + examples/cpp consumer"

# The Python package over the library installed above (FLASHCORE_PREBUILT_PREFIX,
# cmake/prebuilt.cmake): only the bindings are compiled, and the wheel holds the sm_80 and sm_90a
# kernels just tested.
FLASHCORE_PREBUILT_PREFIX="$PWD/$prefix" scripts/test_python.sh
phase_done "python: wheel, check_wheel, pytest"
