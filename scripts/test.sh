#!/usr/bin/env bash
# The test command: installs what is missing, checks formatting (scripts/check_format.sh), builds
# (sm_80 + sm_90a), runs every C++ test suite,
# then builds the Python package with pip and runs pytest. Without a GPU the GPU suites are
# reported as skipped, with the reason.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
preset="${FLASHCORE_PRESET:-default}"
scripts/install_deps.sh
scripts/check_format.sh
start=$(date +%s)
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
echo "build time: $(( $(date +%s) - start )) s (preset $preset, $(nproc) cores)"
status=0
ctest --preset "$preset" || status=$?
# ctest hides the output of skipped suites; say why the GPU suite was skipped.
log="build/$preset/Testing/Temporary/LastTest.log"
if grep -q "GPU test skipped" "$log" 2>/dev/null; then
  echo "GPU suite skipped: $(grep -m1 -o 'GPU test skipped: .*' "$log")"
fi
[ $status -eq 0 ] || exit $status

# An embedding project's view: examples/cpp through find_package and through add_subdirectory.
scripts/test_consumer.sh "build/$preset"

# The C++ build above already compiled every kernel for sm_80 and sm_90a; the Python build
# compiles them again, so here for sm_90a only unless the caller asks otherwise.
FLASHCORE_CUDA_ARCHITECTURES="${FLASHCORE_CUDA_ARCHITECTURES:-90a}" scripts/test_python.sh
