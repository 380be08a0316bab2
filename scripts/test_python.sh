#!/usr/bin/env bash
# The Python package's test: installs the pinned build and test tools where missing (from .whl/
# when it exists, for machines without internet), builds and installs flashcore with pip, and runs
# pytest on tests/python. Without torch or a GPU the GPU tests are reported as skipped, with the
# reason. FLASHCORE_CUDA_ARCHITECTURES=90a builds for the H100 only (half the compile time).
# FLASHCORE_PREBUILT_PREFIX=PREFIX (scripts/test.sh sets it) links the flashcore installed under
# PREFIX, built from this tree, instead of compiling the kernels again (cmake/prebuilt.cmake).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${PYTHON:-python3}"

pin() { sed -n "s/^$1==//p" constraints.txt; }  # the version constraints.txt pins

scripts/install_deps.sh --headers-only

installed_version() {  # distribution -> its version, or nothing
  "$python" -c 'import importlib.metadata as m, sys
try: print(m.version(sys.argv[1]))
except m.PackageNotFoundError: pass' "$1"
}
need=()
for tool in scikit-build-core nanobind pytest matplotlib pyparsing; do
  [ "$(installed_version "$tool")" = "$(pin "$tool")" ] || need+=("$tool")
done
[ -n "$(installed_version numpy)" ] || need+=(numpy)
if [ ${#need[@]} -gt 0 ]; then
  source_args=()
  # scripts/download_python_wheels.sh fills .whl/ for machines that cannot reach PyPI.
  [ -d .whl ] && source_args=(--no-index --find-links .whl)
  echo "test_python: pip install ${need[*]}"
  "$python" -m pip install --quiet --disable-pip-version-check -c constraints.txt \
    "${source_args[@]}" "${need[@]}"
fi

# No build isolation: the pinned tools above build it, offline, and build/python/ is reused.
start=$(date +%s)
wheels=build/python/wheels
rm -rf "$wheels"
"$python" -m pip wheel --quiet --disable-pip-version-check --no-build-isolation --no-deps \
  --wheel-dir "$wheels" .
wheel=$(ls "$wheels"/flashcore-*.whl)
"$python" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall "$wheel"
library="the library built here"
[ -z "${FLASHCORE_PREBUILT_PREFIX:-}" ] || library="the library in $FLASHCORE_PREBUILT_PREFIX"
echo "test_python: building and installing $(basename "$wheel") ($library) took" \
  "$(( $(date +%s) - start )) s"

# The wheel is relocatable: installed into a fresh venv in another directory, its modules carry
# no rpath (into this machine's toolkit or the build tree) and need no shared CUDA runtime, and
# the package imports and lists its providers there.
scripts/check_wheel.sh "$python" "$wheel"

# -rs prints every skip with its reason. Run from tests/python so that the installed package,
# not the source tree, is imported.
cd tests/python
exec "$python" -m pytest -rs -p no:cacheprovider .
