#!/usr/bin/env bash
# Installs a flashcore wheel into a fresh venv in a scratch directory (away from the source and
# build trees) and checks that it is relocatable: no RPATH/RUNPATH in its modules, no shared
# cudart (static) and no cuBLAS in the main module (only flashcore._unfused needs it, from the
# loader's path), type stubs, py.typed and the JIT's kernel headers present, and `import flashcore`
# works there.
# Usage: scripts/check_wheel.sh PYTHON WHEEL
set -euo pipefail
python="$1"
wheel="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$python" -m venv "$scratch/venv"
"$scratch/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$wheel"
package=$("$scratch/venv/bin/python" -c 'import importlib.util as u, os
print(os.path.dirname(u.find_spec("flashcore").origin))')
case "$package" in "$scratch"/*) ;; *) echo "check_wheel: flashcore resolved to $package" >&2; exit 1 ;; esac
for module in "$package"/_flashcore.*.so "$package"/_unfused.*.so; do
  if readelf -d "$module" | grep -E 'R(UN)?PATH'; then
    echo "check_wheel: $(basename "$module") has an rpath; the wheel would not relocate" >&2
    exit 1
  fi
done
if readelf -d "$package"/_flashcore.*.so | grep -E 'NEEDED.*(cudart|cublas)'; then
  echo "check_wheel: _flashcore needs a CUDA library it should link statically or not at all" >&2
  exit 1
fi
# flashcore.jit_score_mod compiles against these (cmake/kernel_headers.cmake).
for file in py.typed _flashcore.pyi _unfused.pyi include/flashcore/attention.hpp \
  include/flashcore/kernels/api/run_flex.cuh include/flashcore/cutlass/cute/tensor.hpp; do
  [ -f "$package/$file" ] || { echo "check_wheel: $file missing from the wheel" >&2; exit 1; }
done
(cd "$scratch" && "$scratch/venv/bin/python" -c 'import flashcore
print(f"check_wheel: flashcore {flashcore.__version__} from a fresh venv, providers {flashcore.providers()}")')
