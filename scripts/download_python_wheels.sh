#!/usr/bin/env bash
# Downloads the pinned wheels that building and testing the Python package needs into .whl/
# (git-ignored), for CPython 3.12 on x86-64 Linux, so they can be carried to a machine without
# internet. There: scripts/test_python.sh (it installs from .whl/ when it exists), or by hand
#   pip install --no-index --find-links .whl -c constraints.txt scikit-build-core nanobind
#   pip install --no-build-isolation .
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${PYTHON:-python3}"
mkdir -p .whl
# scikit-build-core needs packaging and pathspec on 3.12; pytest brings iniconfig, pluggy,
# packaging and pygments. All are pure Python, so the py3-none-any wheels fit any platform.
# Versions: constraints.txt.
"$python" -m pip download --quiet --disable-pip-version-check --dest .whl \
  --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --platform any \
  -c constraints.txt scikit-build-core packaging pathspec nanobind pytest matplotlib
ls -1 .whl
