#!/usr/bin/env bash
# Packs what scripts/lab_device_tune.sh needs on a lent GPU machine into DEST (default
# .device-lab): flashcore-bench from BUILD (default build/lab), this tree's src/ and include/ (the
# headers the tuner's candidates include) and the CUTLASS/CuTe headers of .deps, each xz-compressed
# (a GPU machine's carry is 64 MiB).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build/lab}"
dest="${2:-.device-lab}"
mkdir -p "$dest"
strip -o "$dest/flashcore-bench" "$build/tools/bench/flashcore-bench"
xz -T2 -6 -f "$dest/flashcore-bench"
tar -cJf "$dest/tree.tar.xz" src include
tar -cJf "$dest/cutlass-include.tar.xz" \
  --transform 's,^\.deps/cutlass/cutlass_library/source/include,include-cutlass,' \
  .deps/cutlass/cutlass_library/source/include/cute .deps/cutlass/cutlass_library/source/include/cutlass
cp scripts/lab_device_tune.sh "$dest/"
ls -la "$dest"
