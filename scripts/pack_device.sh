#!/usr/bin/env bash
# Packs the binaries of a local build (default build/sm90) into .device/bin/*.xz, small enough to
# travel to a lent GPU machine with the working tree; scripts/device_run.sh unpacks and runs them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build/sm90}"
mkdir -p .device/bin
rm -f .device/bin/*.xz
for binary in tests/flashcore_gpu_tests tests/flashcore_cpu_tests tools/bench/flashcore-bench; do
  [ -x "$build/$binary" ] || continue
  strip -o ".device/bin/$(basename "$binary")" "$build/$binary"
  xz -T2 -6 -f ".device/bin/$(basename "$binary")"
done
ls -la .device/bin
