#!/usr/bin/env bash
# The test command: installs what is missing, checks formatting (scripts/check_format.sh), builds
# (sm_80 + sm_90a), runs every C++ test suite, installs the build and builds the examples/cpp
# consumer against it both ways (scripts/test_consumer.sh), then builds the Python package with pip
# over that same installed library and runs pytest (scripts/test_python.sh). Each kernel is
# compiled once (the add_subdirectory consumer adds one, hd64 fp16 for sm_80). Without a GPU the GPU suites are reported as skipped, with the reason. Ends with
# the time each phase took.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset="${FLASHCORE_PRESET:-default}"

phases=()
started=$(date +%s)
phase_start=$started
phase_done() {  # name: records the time since the previous phase ended
  local now
  now=$(date +%s)
  phases+=("$(printf '%-34s %5d s' "$1" $((now - phase_start)))")
  phase_start=$now
}
summary() {
  echo "test: time per phase ($(nproc) cores, preset $preset)"
  printf '  %s\n' "${phases[@]}"
  printf '  %-34s %5d s\n' total $(($(date +%s) - started))
}
trap summary EXIT

scripts/install_deps.sh
phase_done "install_deps"
scripts/check_format.sh
phase_done "check_format"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
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
