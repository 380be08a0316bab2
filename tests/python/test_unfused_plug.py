"""The cuBLAS baseline lives in flashcore._unfused: importing flashcore loads no libcublas, and the
first call that asks for backend="unfused" plugs it in (then fails here only for the host arrays)."""

import subprocess
import sys

import numpy as np
import pytest

import flashcore

# torch, when installed, loads its own libcublas as flashcore imports it (for the custom op); keep
# it out so that only what flashcore itself loads is seen.
LOADED_CUBLAS = """
import sys
sys.modules["torch"] = None
import flashcore
with open("/proc/self/maps") as maps:
    print(any("libcublas" in line for line in maps))
"""


def loads_cublas(script):
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip() == "True"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_import_loads_no_cublas():
    assert not loads_cublas(LOADED_CUBLAS)


def test_unfused_is_a_provider_and_plugs_on_demand():
    assert "unfused" in flashcore.providers()
    q = np.zeros((1, 8, 2, 64), dtype=np.float16)
    try:
        flashcore.attention(q, q, q, backend="unfused")
    except RuntimeError as error:  # no libcublas on this machine: the error says so
        assert "needs cuBLAS" in str(error)
    except ValueError as error:  # plugged; the host arrays are what is wrong
        assert "q is on cpu" in str(error)
    else:
        pytest.fail("host arrays were accepted")
