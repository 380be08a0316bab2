#!/usr/bin/env bash
# Builds and runs examples/cpp against flashcore both ways an embedding project would: through
# find_package on an install tree (of the build scripts/test.sh just made) and through
# add_subdirectory of this source tree (library only: no tests, no lab); and, without CMake, with
# the flags of the install tree's pkg-config file.
# Usage: scripts/test_consumer.sh [BUILD_DIR [INSTALL_PREFIX]]
#   BUILD_DIR (default build/default) is installed into INSTALL_PREFIX (default
#   build/consumer/install), which scripts/test.sh then hands to the Python build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build/default}"
prefix="${2:-build/consumer/install}"
work="build/consumer"
rm -rf "$work" "$prefix"
cmake --install "$build" --prefix "$prefix" > /dev/null
prefix="$(cd "$prefix" && pwd)"
cmake -S examples/cpp -B "$work/find_package" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" > /dev/null
cmake --build "$work/find_package" > /dev/null
echo "consumer (find_package): $("$work/find_package/consumer")"
# The core library needs the driver only: no cuBLAS (that is flashcore_unfused), no shared cudart.
if readelf -d "$work/find_package/consumer" | grep -E 'NEEDED.*(cublas|cudart)'; then
  echo "test_consumer: the installed library pulls in a CUDA library it should not need" >&2
  exit 1
fi
# The pkg-config file, for builds without CMake: the same program, compiled and linked by the C++
# compiler with only what `pkg-config --static` says.
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib64/pkgconfig" \
  pkg-config --cflags --libs --static flashcore)
# shellcheck disable=SC2086  # the flags are words
"${CXX:-c++}" -std=c++17 examples/cpp/main.cpp $flags -o "$work/pkg_config_consumer"
echo "consumer (pkg-config): $("$work/pkg_config_consumer")"
# add_subdirectory proves the embedding (options, targets, no leaked settings), not the kernels,
# which the build above compiled and tested: sm_80 only, pruned (cmake/pruning.cmake) to the one
# kernel the example runs, hd64 fp16, so that it compiles in seconds, not minutes.
cmake -S examples/cpp -B "$work/add_subdirectory" -G Ninja -DFLASHCORE_SOURCE_DIR="$PWD" \
  -DFLASHCORE_CUDA_ARCHITECTURES=80 -DFLASHCORE_HEAD_DIMS=64 -DFLASHCORE_DTYPES=fp16 > /dev/null
cmake --build "$work/add_subdirectory" -j "$(nproc)" > /dev/null
echo "consumer (add_subdirectory, pruned to hd64 fp16): $("$work/add_subdirectory/consumer")"
