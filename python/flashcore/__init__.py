"""flashcore: fused attention on NVIDIA GPUs (sm_80+).

`attention` takes any DLPack arrays (torch, CuPy, JAX) zero-copy; with torch it allocates the
outputs and launches on the current stream, and `torch.ops.flashcore.attention` lets torch.compile
and CUDA graphs see it as one op. Importing needs no GPU and no torch.
"""

import importlib.metadata

from . import _core, flex, jit, mods
from .flex import BlockMask, attention_varlen, check_varlen, create_block_mask, flex_attention
from .jit import JitCompileError, jit_mask_mod, jit_score_mod

__all__ = [
    "attention",
    "attention_varlen",
    "BlockMask",
    "check_varlen",
    "create_block_mask",
    "flex_attention",
    "jit",
    "jit_mask_mod",
    "jit_score_mod",
    "JitCompileError",
    "last_provider",
    "mods",
    "providers",
]
# One version, CMakeLists.txt's project(VERSION), which the wheel's metadata is built from.
__version__ = importlib.metadata.version("flashcore")

try:
    import torch
except ImportError:
    torch = None
else:
    from torch.utils.dlpack import to_dlpack

    from . import _flex_ops, _ops

    flex._flex_ops = _flex_ops
    flex._ops = _ops
    _core.take_torch_tensors(torch.Tensor, to_dlpack)


def providers():
    """Names of the kernels compiled into this build, usable as `backend=`."""
    return list(_core.native().providers())


def last_provider():
    """The provider (kernel) that ran the last successful `attention` call on this thread, or None.

    Calls replayed from a CUDA graph or run inside a compiled graph's replay do not update it.
    """
    return _core.last_provider()


def attention(
    q,
    k,
    v,
    *,
    causal=False,
    softmax_scale=None,
    window=(-1, -1),
    softcap=0.0,
    return_lse=False,
    backend="auto",
    num_splits=0,
    tile="auto",
    enable_pdl=True,
    out=None,
    lse_out=None,
    stream=None,
    deterministic=False,
):
    """Scaled dot-product attention, softmax(q k^T * scale) v, fused in one kernel.

    q: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim] (BSHD;
    a BHSD tensor is passed as `x.transpose(1, 2)`, no copy). float16 or bfloat16 on one CUDA
    device; the last dim contiguous; heads_q a multiple of heads_kv (GQA/MQA).

    causal, window=(left, right) (-1 = unbounded, bottom-right aligned), softcap (0 = off) and
    softmax_scale (None = 1/sqrt(head_dim)) mean what they mean in flash_attn_func.
    return_lse: also return the log-sum-exp, float32 [batch, heads_q, seqlen_q].
    backend: "auto" or one of providers().
    num_splits: split-KV count of the tensor-core kernels (sm90, sm80): 0 picks one from the SM
    count and the sizes, 1 turns splitting off, n > 1 splits the keys across n CTAs per query tile.
    tile: the CTA tile of the tensor-core backends (sm80, sm90; with backend "auto" a forced tile
    runs on the first provider that has it): "auto", "large" (the tile for grids that fill the
    GPU; on sm90 its persistent kernel), "small" (32-row CTAs whose warps split the keys; auto
    takes it when the large tile's grid leaves SMs idle), "medium" (sm90, head dim 64: 64-row CTAs
    whose four key groups split the keys; auto takes it instead of the small tile once that one's
    grid is past one wave) or "cta-pair" (sm90, head dim 64: the keys of each 64-row tile split
    between the two CTAs of a cluster; auto takes it once the medium tile's grid is past one wave;
    num_splits must be 0 or 1). "warpgroup" and "warpgroup-pair" are deprecated names of "medium"
    and "cta-pair". All are for tuning and tests; every choice computes the same attention, and a
    tile the provider, GPU or head dim cannot run raises ValueError.
    enable_pdl: programmatic dependent launch (FlashInfer's enable_pdl) for the sm90 backend's
    small-grid tiles and its flex kernel on grids of one wave: they may start while the previous
    kernel on the stream finishes and wait for it before touching memory, which hides part of a
    launch. Same results either way; no effect on other kernels.
    out / lse_out: arrays to write into; allocated when omitted (torch: torch.empty; other
    arrays: their __array_namespace__'s empty_like / empty).
    stream: the cudaStream_t as an int; default: torch's current stream for torch tensors, else 0
    (the legacy default stream; pass e.g. cupy.cuda.get_current_stream().ptr).

    deterministic: the backward (torch tensors that require grad) gives bitwise-identical
    gradients run to run (docs/backward.md states its cost); no effect on the forward.

    Returns out, or (out, lse). Invalid arguments raise ValueError or TypeError naming the
    argument, before anything is launched. Differentiable for torch tensors (the custom op
    flashcore::attention saves only out and lse; the backward kernels, sm90 on Hopper where they
    implement the problem and sm80 otherwise, head dims 64, 128 and 256, compute dq, dk and dv);
    the lse output itself carries no gradient.
    """
    # Plain checks, no try/except or generators: torch.compile traces this function.
    if not isinstance(window, (tuple, list)) or len(window) != 2:
        raise TypeError(f"window must be a pair of ints (left, right), got {window!r}")
    window = (int(window[0]), int(window[1]))
    if softmax_scale is None:
        scale = 0.0  # the library's "1/sqrt(head_dim)"
    else:
        scale = float(softmax_scale)
        if scale == 0.0:
            raise ValueError("softmax_scale is 0; pass None for the default 1/sqrt(head_dim)")
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a str ('auto' or one of providers()), got {backend!r}")
    if isinstance(num_splits, bool) or not isinstance(num_splits, int):
        raise TypeError(f"num_splits must be an int (0 = heuristic), got {num_splits!r}")
    if not isinstance(tile, str):
        raise TypeError(
            f"tile must be a str ('auto', 'large', 'small', 'medium' or 'cta-pair'), got {tile!r}"
        )
    if not isinstance(enable_pdl, bool):
        raise TypeError(f"enable_pdl must be a bool, got {enable_pdl!r}")
    flex._check_deterministic(deterministic)
    kernel = (backend, int(num_splits), tile, enable_pdl)
    causal = bool(causal)
    softcap = float(softcap)

    if torch is not None and isinstance(q, torch.Tensor):
        return _ops.attention(
            q, k, v, causal, scale, window, softcap, return_lse, kernel, out, lse_out, stream,
            deterministic,
        )

    for name, array in (("q", q), ("k", k), ("v", v)):
        if not hasattr(array, "__dlpack__"):
            raise TypeError(
                f"{name} is a {type(array).__name__}; pass a DLPack array (torch.Tensor, CuPy or "
                "JAX array)"
            )
    if out is None or (return_lse and lse_out is None):
        if not hasattr(q, "__array_namespace__"):
            raise TypeError(
                f"q is a {type(q).__name__} without __array_namespace__, so flashcore cannot "
                "allocate the result: pass out= (and lse_out= with return_lse=True)"
            )
        xp = q.__array_namespace__()
        if out is None:
            out = xp.empty_like(q)
        if return_lse and lse_out is None and q.ndim == 4:
            lse_out = xp.empty(
                (q.shape[0], q.shape[2], q.shape[1]), dtype=xp.float32, device=q.device
            )
    _core.run(
        q,
        k,
        v,
        out,
        lse_out if return_lse else None,
        scale,
        causal,
        window,
        softcap,
        kernel,
        0 if stream is None else int(stream),
    )
    return (out, lse_out) if return_lse else out
