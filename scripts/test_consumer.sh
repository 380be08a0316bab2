#!/usr/bin/env bash
# Builds and runs examples/cpp against flashcore both ways an embedding project would: through
# find_package on an install tree (of the build scripts/test.sh just made), with flex_functor
# instantiating the flex kernel from the installed kernel headers (flashcore::flex_kernels), and
# through add_subdirectory of this source tree (library only: no tests, no lab); and, without
# CMake, with the flags of the install tree's pkg-config file.
# Usage: scripts/test_consumer.sh [BUILD_DIR [INSTALL_PREFIX]]
#   BUILD_DIR (default build/default) is installed into INSTALL_PREFIX (default
#   build/consumer/install), which this script removes first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build/default}"
prefix="${2:-build/consumer/install}"
work="build/consumer"
rm -rf "$work" "$prefix"
cmake --install "$build" --prefix "$prefix" > /dev/null
prefix="$(cd "$prefix" && pwd)"
# flex_functor compiles one flex kernel, for sm_80 alone (with its PTX, which the driver compiles
# for newer GPUs). Its include paths must come from the install tree, not from this source tree.
cmake -S examples/cpp -B "$work/find_package" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DFLEX_FUNCTOR_ARCHITECTURES=80 > /dev/null
cmake --build "$work/find_package" -j "$(nproc)" > /dev/null
echo "consumer (find_package): $("$work/find_package/consumer")"
if grep -E "INCLUDES.*$PWD/(src|\.deps)([/ ]|$)" "$work/find_package/build.ninja"; then
  echo "test_consumer: flex_functor compiled with the source tree's headers" >&2
  exit 1
fi
echo "consumer (find_package, flex_functor): $("$work/find_package/flex_functor")"
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
  -DFLASHCORE_CUDA_ARCHITECTURES=80 -DFLASHCORE_HEAD_DIMS=64 -DFLASHCORE_DTYPES=fp16 \
  -DFLASHCORE_LINEINFO=OFF > /dev/null
cmake --build "$work/add_subdirectory" -j "$(nproc)" --target consumer > /dev/null
echo "consumer (add_subdirectory, pruned to hd64 fp16): $("$work/add_subdirectory/consumer")"
