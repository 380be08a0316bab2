#!/usr/bin/env bash
# Installs what flashcore needs and a fresh machine may lack, pinned, into the machine (Debian
# packages) or the git-ignored .deps/ (header-only PyPI wheels). Safe to run again: it skips what
# is there. --headers-only skips the system packages (for a pip build of the Python package on a
# machine whose compiler toolchain is already in place and that cannot reach Debian's mirrors).
set -euo pipefail
headers_only=0
[ "${1:-}" = "--headers-only" ] && headers_only=1
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps="$root/.deps"

# The version constraints.txt pins for a distribution.
pin() { sed -n "s/^$1==//p" "$root/constraints.txt"; }
CUTLASS_VERSION=$(pin nvidia-cutlass)                # CUTLASS/CuTe: cutlass_library/source/include
CUDNN_FRONTEND_VERSION=$(pin nvidia-cudnn-frontend)  # cuDNN frontend C++ headers (the lab's peer)

need_apt=()
[ $headers_only = 1 ] || {
command -v cmake >/dev/null || need_apt+=(cmake)
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v g++ >/dev/null || need_apt+=(g++)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
[ -f /usr/include/nlohmann/json.hpp ] || need_apt+=(nlohmann-json3-dev)  # the lab's JSON
[ -f /usr/include/CLI/CLI.hpp ] || need_apt+=(libcli11-dev)              # the lab's CLI
command -v clang-format >/dev/null || need_apt+=(clang-format)  # scripts/check_format.sh
command -v pkg-config >/dev/null || need_apt+=(pkgconf)         # scripts/test_consumer.sh
}
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "install_deps: missing ${need_apt[*]} and cannot apt-get install them here" >&2
    exit 1
  fi
  echo "install_deps: apt-get install ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install_deps: nvcc not found; install the CUDA toolkit (12.x or 13.x)" >&2
  exit 1
fi

pip_headers() {  # name version target-subdir marker-file
  local name=$1 version=$2 target="$deps/$3" marker=$4
  if [ -f "$target/$marker" ] && [ -f "$target/.version-$version" ]; then return; fi
  echo "install_deps: $name==$version -> $target"
  rm -rf "$target"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$target" \
    "$name==$version"
  touch "$target/.version-$version"
}
pip_headers nvidia-cutlass "$CUTLASS_VERSION" cutlass cutlass_library/source/include/cute/tensor.hpp
pip_headers nvidia-cudnn-frontend "$CUDNN_FRONTEND_VERSION" cudnn_frontend include/cudnn_frontend.h
