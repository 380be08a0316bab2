"""The native extensions and the per-thread record of which kernel ran. Imports no framework,
except torch right before the cuBLAS baseline is loaded (see _plug_unfused)."""

import importlib.util
import threading

try:
    from . import _flashcore as _native

    _load_error = None
except ImportError as error:  # e.g. no CUDA runtime library on this machine
    _native = None
    _load_error = error

_state = threading.local()

# How torch tensors reach the extension (set by flashcore/__init__.py through take_torch_tensors;
# this module imports no framework). The extension takes its arrays through DLPack. Where torch
# publishes DLPack's C exchange API (torch 2.10 on), the extension describes an exact torch.Tensor
# through it in C (python/src/dlpack_arrays.hpp), and the tensors are passed as they are: None
# here. Otherwise this is (torch.Tensor, torch.utils.dlpack.to_dlpack): nanobind's import would
# run torch's Tensor.__dlpack__, which is Python code (5.7 us a call on the H200 machine's host
# against 0.3-0.65 us for to_dlpack's capsule, made in C), and a call passes 5 to 16 arrays
# (docs/flex.md, "The host side of a flex call"), so tensors go as capsules, each imported once
# (python/src/flex_args.cpp reads each flex array once). Only exact torch.Tensor objects either
# way: a subclass keeps its own __dlpack__.
torch_capsules = None


def take_torch_tensors(tensor_type, to_dlpack):
    """Picks how tensors of tensor_type reach the extension: torch's C exchange API where it has
    one, else to_dlpack's capsules."""
    global torch_capsules
    if _native is not None and _native.use_exchange_api(tensor_type):
        torch_capsules = None
    else:
        torch_capsules = (tensor_type, to_dlpack)


def _native_array(a):
    if torch_capsules is not None and type(a) is torch_capsules[0]:
        return torch_capsules[1](a)
    return a


def _native_arrays(*arrays):
    if torch_capsules is None:
        return arrays
    return tuple(_native_array(a) for a in arrays)


def _native_flex(flex):
    """The flex fields with their torch tensors (and a BlockMask tuple's) as capsules."""
    if torch_capsules is None or not flex:
        return flex
    return {key: tuple(_native_array(e) for e in value) if isinstance(value, tuple)
            else _native_array(value) for key, value in flex.items()}


def native():
    """The extension module; raises a RuntimeError that says why when it could not be loaded."""
    if _native is None:
        raise RuntimeError(
            f"flashcore's native extension could not be loaded: {_load_error}. flashcore needs the "
            "CUDA runtime (libcudart) and an NVIDIA GPU (sm_80 or newer) to run attention."
        ) from _load_error
    return _native


def _plug_unfused():
    """Loads flashcore._unfused, the cuBLAS baseline, and plugs it into the extension (once)."""
    if getattr(_plug_unfused, "done", False):
        return
    # Both torch and _unfused need libcublas.so.13 and the first one loaded wins the soname. torch
    # running on another cuBLAS than its own crashed (segfault on the H100 machine), while the
    # baseline runs fine on torch's: so torch, where installed, is imported first.
    if importlib.util.find_spec("torch") is not None:
        import torch  # noqa: F401
    try:
        from . import _unfused
    except ImportError as error:
        raise RuntimeError(
            f"backend 'unfused' needs cuBLAS (libcublas), which could not be loaded: {error}. "
            "Import torch first, or put a CUDA toolkit's lib directory on the loader's path."
        ) from error
    native().plug_unfused(_unfused.backend())
    _plug_unfused.done = True


def run(
    q, k, v, out, lse, softmax_scale, causal, window, softcap, kernel, stream, workspace=None,
    flex=None, heads_major=False,
):
    """Validates and launches on `stream` (an int cudaStream_t); records the provider that ran.

    kernel: (backend, num_splits, tile, enable_pdl). workspace: a device array of at least
    workspace_size(...) bytes; a callable that takes that size and returns one, called only when
    it is not 0 (torch's caching allocator: _ops.workspace_allocator); or None to let the library
    allocate it stream-ordered (its pool is cheap while warm, but gives memory back at a sync,
    which costs large allocations most). flex: the flex keyword fields of
    python/src/flex_args.hpp (flashcore.flex builds them), or None. heads_major: q, k, v and out
    are [B, H, S, D] rather than [B, S, H, D]."""
    if kernel[0] == "unfused":
        _plug_unfused()
    provider = native().attention(
        *_native_arrays(q, k, v, out, lse), softmax_scale, causal, window[0], window[1], softcap,
        *kernel, stream, _native_array(workspace), _native_flex(flex), heads_major,
    )
    _state.provider = provider
    return provider


def workspace_size(q, k, v, out, lse, softmax_scale, causal, window, softcap, kernel):
    """Bytes of device workspace that run() needs for these arguments (0 for most kernels)."""
    if kernel[0] == "unfused":
        _plug_unfused()
    return native().workspace_size(
        *_native_arrays(q, k, v, out, lse), softmax_scale, causal, window[0], window[1], softcap,
        *kernel
    )


def run_backward(
    q, k, v, out, lse, d_o, dq, dk, dv, softmax_scale, causal, window, softcap, deterministic,
    stream, workspace=None, flex=None, d_sinks=None,
):
    """Writes dq, dk and dv of the forward that made out and lse, on `stream` (an int
    cudaStream_t). workspace: at least backward_workspace_size(...) bytes, or None to let the
    library allocate it stream-ordered. flex: the forward's flex fields, or None. d_sinks: float32
    [heads_q] that gets the sink logits' gradient (with flex["sinks"]), or None."""
    native().attention_backward(
        *_native_arrays(q, k, v, out, lse, d_o, dq, dk, dv), softmax_scale, causal, window[0],
        window[1], softcap, deterministic, stream, _native_array(workspace), _native_flex(flex),
        _native_array(d_sinks),
    )


def backward_workspace_size(
    q, k, v, out, lse, d_o, dq, dk, dv, softmax_scale, causal, window, softcap, deterministic,
    flex=None,
):
    """Bytes of device workspace run_backward() needs for these arguments."""
    return native().backward_workspace_size(
        *_native_arrays(q, k, v, out, lse, d_o, dq, dk, dv), softmax_scale, causal, window[0],
        window[1], softcap, deterministic, _native_flex(flex),
    )


def last_provider():
    return getattr(_state, "provider", None)
