#!/usr/bin/env bash
# One command for a GPU machine: builds for sm_90a (preset sm90) and runs every test suite on the
# GPU. FLASHCORE_PREBUILT=1 skips the build and runs the binaries already in FLASHCORE_BUILD_DIR
# (default build/sm90; a build made on another machine and carried along). Extra arguments go to
# the GPU suite (e.g. --gtest_filter='BackendTest.*').
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ "${FLASHCORE_PREBUILT:-0}" != 1 ]; then
  scripts/install_deps.sh
  cmake --preset sm90 >/dev/null
  cmake --build --preset sm90 -j "$(nproc)"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
build="${FLASHCORE_BUILD_DIR:-build/sm90}"
"$build/tests/flashcore_cpu_tests" --gtest_brief=1
"$build/tests/flashcore_gpu_tests" --gtest_brief=1 "$@"
