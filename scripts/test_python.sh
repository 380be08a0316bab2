#!/usr/bin/env bash
# The Python package's test: installs the pinned build and test tools where missing (from .whl/
# when it exists, for machines without internet), builds and installs flashcore with pip, and runs
# pytest on tests/python. Without torch or a GPU the GPU tests are reported as skipped, with the
# reason. FLASHCORE_CUDA_ARCHITECTURES=90a builds for the H100 only (half the compile time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${PYTHON:-python3}"

SCIKIT_BUILD_CORE_VERSION=0.11.6
NANOBIND_VERSION=2.9.2
PYTEST_VERSION=8.4.2
NUMPY_VERSION=2.2.6  # only installed where numpy is missing; any numpy with DLPack (>= 1.22) works

scripts/install_deps.sh --headers-only

installed_version() {  # distribution -> its version, or nothing
  "$python" -c 'import importlib.metadata as m, sys
try: print(m.version(sys.argv[1]))
except m.PackageNotFoundError: pass' "$1"
}
need=()
[ "$(installed_version scikit-build-core)" = "$SCIKIT_BUILD_CORE_VERSION" ] ||
  need+=("scikit-build-core==$SCIKIT_BUILD_CORE_VERSION")
[ "$(installed_version nanobind)" = "$NANOBIND_VERSION" ] || need+=("nanobind==$NANOBIND_VERSION")
[ "$(installed_version pytest)" = "$PYTEST_VERSION" ] || need+=("pytest==$PYTEST_VERSION")
[ -n "$(installed_version numpy)" ] || need+=("numpy==$NUMPY_VERSION")
if [ ${#need[@]} -gt 0 ]; then
  source_args=()
  # scripts/download_python_wheels.sh fills .whl/ for machines that cannot reach PyPI.
  [ -d .whl ] && source_args=(--no-index --find-links .whl)
  echo "test_python: pip install ${need[*]}"
  "$python" -m pip install --quiet --disable-pip-version-check "${source_args[@]}" "${need[@]}"
fi

# No build isolation: the pinned tools above build it, offline, and build/python/ is reused.
start=$(date +%s)
"$python" -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps .
echo "test_python: pip install . took $(( $(date +%s) - start )) s"

# -rs prints every skip with its reason. Run from tests/python so that the installed package,
# not the source tree, is imported.
cd tests/python
exec "$python" -m pytest -rs -p no:cacheprovider .
