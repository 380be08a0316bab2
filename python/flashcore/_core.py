"""The native extension and the per-thread record of which kernel ran. Imports torch first where
it is installed (see below) and nothing else of a framework."""

import importlib.util
import threading

# Where torch is installed it is imported before the extension. Both need libcublas.so.13: torch
# ships its own, the extension was linked against the CUDA toolkit's. Whichever loads first wins
# the soname, and torch running on the toolkit's cuBLAS crashed (segfault on the H100 machine when
# `import flashcore` came before `import torch`); the extension runs fine on torch's.
if importlib.util.find_spec("torch") is not None:
    import torch  # noqa: F401

try:
    from . import _flashcore as _native

    _load_error = None
except ImportError as error:  # e.g. no CUDA runtime library on this machine
    _native = None
    _load_error = error

_state = threading.local()


def native():
    """The extension module; raises a RuntimeError that says why when it could not be loaded."""
    if _native is None:
        raise RuntimeError(
            f"flashcore's native extension could not be loaded: {_load_error}. flashcore needs the "
            "CUDA runtime (libcudart) and an NVIDIA GPU (sm_80 or newer) to run attention."
        ) from _load_error
    return _native


def run(q, k, v, out, lse, softmax_scale, causal, window, softcap, kernel, stream, workspace=None):
    """Validates and launches on `stream` (an int cudaStream_t); records the provider that ran.

    kernel: (backend, num_splits, tile, enable_pdl). workspace: a device array of at least
    workspace_size(...) bytes, or None to let the library allocate it stream-ordered (slow for
    large sizes: the pool gives it back at every sync)."""
    provider = native().attention(
        q, k, v, out, lse, softmax_scale, causal, window[0], window[1], softcap, *kernel, stream,
        workspace,
    )
    _state.provider = provider
    return provider


def workspace_size(q, k, v, out, lse, softmax_scale, causal, window, softcap, kernel):
    """Bytes of device workspace that run() needs for these arguments (0 for most kernels)."""
    return native().workspace_size(
        q, k, v, out, lse, softmax_scale, causal, window[0], window[1], softcap, *kernel
    )


def last_provider():
    return getattr(_state, "provider", None)
