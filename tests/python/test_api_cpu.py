"""The package without a GPU and without torch: it imports, lists its providers, and rejects bad
arguments with errors that name them. numpy arrays exercise the DLPack path; they live on the
host, so every otherwise valid call ends in the device error, before anything is launched."""

import re
import subprocess
import sys

import numpy as np
import pytest

import flashcore

B, SQ, SK, HQ, HKV, D = 2, 16, 24, 4, 2, 64


def make(shape=None, dtype=np.float16):
    return np.zeros(shape or (B, SQ, HQ, D), dtype=dtype)


def qkv(dtype=np.float16):
    return make((B, SQ, HQ, D), dtype), make((B, SK, HKV, D), dtype), make((B, SK, HKV, D), dtype)


def test_import_and_providers():
    names = flashcore.providers()
    assert names and all(isinstance(name, str) and name for name in names)
    assert "auto" not in names
    # Before any call in a process no provider has run. Asked in a fresh interpreter: this
    # process may have run kernels already (the GPU tests, when pytest collects both).
    fresh = "import flashcore, sys; sys.exit(flashcore.last_provider() is not None)"
    assert subprocess.run([sys.executable, "-c", fresh], check=False).returncode == 0


def test_host_arrays_are_rejected_naming_the_argument():
    q, k, v = qkv()
    provider_before = flashcore.last_provider()
    with pytest.raises(ValueError, match=r"q is on cpu; flashcore runs on CUDA arrays"):
        flashcore.attention(q, k, v)
    with pytest.raises(ValueError, match=r"q is on cpu"):
        flashcore.attention(q, k, v, out=np.empty_like(q), return_lse=True)
    # A rejected call runs no provider.
    assert flashcore.last_provider() == provider_before


def test_outputs_are_allocated_by_the_array_namespace():
    # numpy allocates out and lse (return_lse); the call then fails only for the host device.
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"q is on cpu"):
        flashcore.attention(q, k, v, return_lse=True, causal=True, window=(8, 0), softcap=30.0)


@pytest.mark.parametrize(
    "change, error, message",
    [
        (
            dict(q=make(dtype=np.float32)),
            TypeError,
            r"q has dtype float32; flashcore takes float16 or bfloat16",
        ),
        (
            dict(k=make((B, SK, HKV, D), np.float32)),
            TypeError,
            r"k has dtype float32 but q has float16",
        ),
        (dict(out=make(dtype=np.float32)), TypeError, r"out has dtype float32 but q has float16"),
        (
            dict(q=make((B, SQ, D))),
            ValueError,
            r"q is 3-D; it must be 4-D \[batch, seqlen, heads, head_dim\]",
        ),
        (dict(v=make((B, SK, HKV, D, 1))), ValueError, r"v is 5-D; it must be 4-D"),
        (dict(k=make((B + 1, SK, HKV, D))), ValueError, r"batch sizes differ"),
        (dict(v=make((B, SK, HKV, 32))), ValueError, r"head_dim differs"),
        (
            dict(v=make((B, SK + 1, HKV, D))),
            ValueError,
            r"k \(2, 24, 2, 64\) and v \(2, 25, 2, 64\) must have the same shape",
        ),
        (
            dict(k=make((B, SK, 3, D)), v=make((B, SK, 3, D))),
            ValueError,
            r"q has 4 heads and k, v have 3",
        ),
        (
            dict(out=make((B, SQ, HQ, 32))),
            ValueError,
            r"out has shape \(2, 16, 4, 32\) but q has \(2, 16, 4, 64\)",
        ),
        (
            dict(q=make((B, SQ, HQ, 2 * D))[..., ::2]),
            ValueError,
            r"q has last-dim stride 2; the head dim must be contiguous",
        ),
        (
            dict(lse=make((B, SQ, HQ), np.float32)),
            ValueError,
            r"lse has shape \(2, 16, 4\); it must be \(2, 4, 16\)",
        ),
        (
            dict(lse=make((B, HQ, SQ), np.float16)),
            TypeError,
            r"lse has dtype float16; it must be float32",
        ),
        (
            dict(lse=make((B, SQ, HQ), np.float32).transpose(0, 2, 1)),
            ValueError,
            r"lse must be contiguous",
        ),
    ],
)
def test_bad_arrays_raise_naming_the_argument(change, error, message):
    q, k, v = qkv()
    args = dict(q=q, k=k, v=v, out=np.empty_like(q), lse=None)
    args.update(change)
    with pytest.raises(error, match=message):
        flashcore.attention(
            args["q"],
            args["k"],
            args["v"],
            out=args["out"],
            lse_out=args["lse"],
            return_lse=args["lse"] is not None,
        )


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(backend="fastest"), ValueError, r"backend 'fastest' is unknown; use one of 'auto'"),
        (dict(backend=3), TypeError, r"backend must be a str"),
        (dict(window=5), TypeError, r"window must be a pair of ints"),
        (dict(window=(1, 2, 3)), TypeError, r"window must be a pair of ints"),
        (dict(softmax_scale=0.0), ValueError, r"softmax_scale is 0"),
        (dict(tile="huge"), ValueError, r"tile 'huge' is unknown; use 'auto', 'large', 'small', 'medium' or 'cta-pair'"),
        (dict(tile=1), TypeError, r"tile must be a str"),
        (dict(num_splits=-1), ValueError, r"num_splits is -1; use 0 \(heuristic\)"),
        (dict(num_splits=1.5), TypeError, r"num_splits must be an int"),
        (dict(num_splits=True), TypeError, r"num_splits must be an int"),
        (dict(enable_pdl=1), TypeError, r"enable_pdl must be a bool"),
        (dict(deterministic=1), TypeError, r"deterministic must be a bool"),
    ],
)
def test_bad_options_raise_naming_the_argument(kwargs, error, message):
    q, k, v = qkv()
    with pytest.raises(error, match=message):
        flashcore.attention(q, k, v, **kwargs)


def test_non_arrays_are_rejected():
    q, k, v = qkv()
    with pytest.raises(TypeError, match=r"k is a list; pass a DLPack array"):
        flashcore.attention(q, k.tolist(), v)


def test_every_provider_name_is_accepted_as_backend():
    q, k, v = qkv()
    for name in ["auto", *flashcore.providers()]:
        with pytest.raises(ValueError, match=re.escape("q is on cpu")):
            flashcore.attention(q, k, v, backend=name)
