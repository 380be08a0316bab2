#!/usr/bin/env bash
# Builds and runs examples/cpp against flashcore both ways an embedding project would: through
# find_package on an install tree (of the build scripts/test.sh just made) and through
# add_subdirectory of this source tree (library only: sm_80 code, no tests, no lab).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build/default}"
work="build/consumer"
rm -rf "$work"
cmake --install "$build" --prefix "$work/install" > /dev/null
cmake -S examples/cpp -B "$work/find_package" -G Ninja -DCMAKE_PREFIX_PATH="$PWD/$work/install" \
  > /dev/null
cmake --build "$work/find_package" > /dev/null
echo "consumer (find_package): $("$work/find_package/consumer")"
# The core library needs the driver only: no cuBLAS (that is flashcore_unfused), no shared cudart.
if readelf -d "$work/find_package/consumer" | grep -E 'NEEDED.*(cublas|cudart)'; then
  echo "test_consumer: the installed library pulls in a CUDA library it should not need" >&2
  exit 1
fi
test -f "$work/install/lib/pkgconfig/flashcore.pc" || test -f "$work/install/lib64/pkgconfig/flashcore.pc"
cmake -S examples/cpp -B "$work/add_subdirectory" -G Ninja -DFLASHCORE_SOURCE_DIR="$PWD" \
  -DFLASHCORE_CUDA_ARCHITECTURES=80 > /dev/null
cmake --build "$work/add_subdirectory" -j "$(nproc)" > /dev/null
echo "consumer (add_subdirectory): $("$work/add_subdirectory/consumer")"
