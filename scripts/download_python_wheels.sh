#!/usr/bin/env bash
# Downloads the pinned wheels that building and testing the Python package needs into .whl/
# (git-ignored), for CPython 3.12 on x86-64 Linux, so they can be carried to a machine without
# internet. There: scripts/test_python.sh (it installs from .whl/ when it exists), or by hand
#   pip install --no-index --find-links .whl scikit-build-core==0.11.6 nanobind==2.9.2
#   pip install --no-build-isolation .
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${PYTHON:-python3}"
mkdir -p .whl
# scikit-build-core needs packaging and pathspec on 3.12; pytest brings iniconfig, pluggy,
# packaging and pygments. All are pure Python, so the py3-none-any wheels fit any platform.
"$python" -m pip download --quiet --disable-pip-version-check --dest .whl \
  --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 --platform any \
  scikit-build-core==0.11.6 packaging==25.0 pathspec==0.12.1 nanobind==2.9.2 pytest==8.4.2
ls -1 .whl
