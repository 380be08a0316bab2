"""A drop-in for flash-attn 2.x's forward functions: swap one import,

    from flash_attn import flash_attn_func           # before
    from flashcore.compat import flash_attn_func     # after

and keep every argument. The functions take flash_attn_interface.py's arguments, positionally and
by name, with its semantics: causal=True sets the window's right side to 0 (flashcore's own API
rejects causal with a positive right window); a window side at or past seqlen_k means unbounded;
masks are bottom-right aligned; softcap <= 0 is off; a head dim that is not a multiple of 8 is
zero-padded (the scale stays 1/sqrt of the real one); return_attn_probs returns (out, lse, None).

Gradients flow as in flash-attn: flashcore.attention and attention_varlen are differentiable in
q, k and v (run_backward; deterministic=True gives bitwise-repeatable gradients, as flash-attn's
deterministic backward). What flashcore cannot honour raises NotImplementedError naming the
argument, before anything is computed: dropout_p > 0, alibi_slopes, rotary embeddings,
cache_batch_idx, cache_leftpad, a paged KV cache (block_table), and gradients through
flash_attn_with_kvcache (an inference call; flash-attn has no backward for it either). The
varlen functions run flashcore.attention_varlen (packed sequences, no padding).
"""

from . import attention, attention_varlen

__all__ = [
    "flash_attn_func",
    "flash_attn_kvpacked_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_varlen_kvpacked_func",
    "flash_attn_varlen_qkvpacked_func",
    "flash_attn_with_kvcache",
]

_HEAD_DIM_ALIGN = 8  # flashcore's rows are 16-byte aligned: D a multiple of 8 two-byte elements


def _unsupported(name, value, why):
    raise NotImplementedError(f"flashcore.compat: {name}={value!r} is not supported ({why})")


def _check_common(dropout_p, alibi_slopes):
    if dropout_p != 0.0:
        _unsupported("dropout_p", dropout_p, "no dropout; pass 0.0, as for evaluation")
    if alibi_slopes is not None:
        _unsupported("alibi_slopes", "<tensor>", "no ALiBi bias")


def _check_no_grad(*tensors):
    if any(getattr(t, "requires_grad", False) for t in tensors) and _torch().is_grad_enabled():
        raise NotImplementedError(
            "flashcore.compat: flash_attn_with_kvcache has no backward (an inference call); run "
            "it under torch.no_grad() or torch.inference_mode()"
        )


def _torch():
    import torch

    return torch


def flash_window(causal, window_size, seqlen_q, seqlen_k):
    """flash-attn's (left, right) for flashcore: a side at or past seqlen_k is unbounded (-1), and
    causal sets right to 0. A single query row is the same causal or not (bottom-right aligned)."""
    if not isinstance(window_size, (tuple, list)) or len(window_size) != 2:
        raise TypeError(f"window_size must be a pair (left, right), got {window_size!r}")
    left, right = (int(side) for side in window_size)
    left = -1 if left >= seqlen_k else left
    right = -1 if right >= seqlen_k else right
    if causal and seqlen_q > 1:
        right = 0
    return left, right


def _pad_head_dim(*tensors):
    """flash-attn accepts any head dim and zero-pads it to a multiple of 8; so does this."""
    head_dim = tensors[0].shape[-1]
    pad = -head_dim % _HEAD_DIM_ALIGN
    if pad == 0:
        return tensors
    functional = _torch().nn.functional
    return tuple(functional.pad(t, (0, pad)) for t in tensors)


def _forward(q, k, v, softmax_scale, causal, window_size, softcap, return_lse, num_splits=0,
             deterministic=False):
    head_dim = q.shape[-1]
    left, right = flash_window(causal, window_size, q.shape[1], k.shape[1])
    scale = head_dim**-0.5 if softmax_scale is None else softmax_scale
    padded_q, padded_k, padded_v = _pad_head_dim(q, k, v)
    result = attention(
        padded_q,
        padded_k,
        padded_v,
        causal=False,  # folded into the window: right == 0 with an unbounded left is causal
        softmax_scale=scale,
        window=(left, right),
        softcap=max(float(softcap), 0.0),
        return_lse=return_lse,
        num_splits=num_splits,
        deterministic=deterministic,
    )
    if return_lse:
        out, lse = result
        return out[..., :head_dim], lse
    return result[..., :head_dim]


def flash_attn_func(
    q,
    k,
    v,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """flash_attn.flash_attn_func. q: (batch, seqlen_q, nheads, headdim); k, v: (batch,
    seqlen_k, nheads_k, headdim), nheads a multiple of nheads_k. Returns out, or with
    return_attn_probs (out, softmax_lse [batch, nheads, seqlen_q], None). deterministic: the
    backward's gradients are bitwise-repeatable (the forward is either way)."""
    _check_common(dropout_p, alibi_slopes)
    result = _forward(q, k, v, softmax_scale, causal, window_size, softcap, return_attn_probs,
                      deterministic=deterministic)
    return (*result, None) if return_attn_probs else result


def flash_attn_kvpacked_func(
    q,
    kv,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """flash_attn.flash_attn_kvpacked_func. kv: (batch, seqlen_k, 2, nheads_k, headdim); k and v
    are read in place (strided views, no copy)."""
    return flash_attn_func(
        q,
        kv[:, :, 0],
        kv[:, :, 1],
        dropout_p,
        softmax_scale,
        causal,
        window_size,
        softcap,
        alibi_slopes,
        deterministic,
        return_attn_probs,
    )


def flash_attn_qkvpacked_func(
    qkv,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """flash_attn.flash_attn_qkvpacked_func. qkv: (batch, seqlen, 3, nheads, headdim); q, k and v
    are read in place (strided views, no copy)."""
    return flash_attn_func(
        qkv[:, :, 0],
        qkv[:, :, 1],
        qkv[:, :, 2],
        dropout_p,
        softmax_scale,
        causal,
        window_size,
        softcap,
        alibi_slopes,
        deterministic,
        return_attn_probs,
    )


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
    block_table=None,
):
    """flash_attn.flash_attn_varlen_func. q: (total_q, nheads, headdim), k, v: (total_k,
    nheads_k, headdim), packed sequences; cu_seqlens_* int32 (batch + 1,) on the GPU. Runs
    flashcore.attention_varlen: causal and the window apply within each sequence, bottom-right
    aligned; a window side at or past max_seqlen_k is unbounded. Returns out, or with
    return_attn_probs (out, softmax_lse [nheads, total_q], None)."""
    _check_common(dropout_p, alibi_slopes)
    if block_table is not None:
        _unsupported("block_table", "<tensor>", "no paged KV cache yet")
    head_dim = q.shape[-1]
    left, right = flash_window(causal, window_size, max_seqlen_q, max_seqlen_k)
    scale = head_dim**-0.5 if softmax_scale is None else softmax_scale
    padded_q, padded_k, padded_v = _pad_head_dim(q, k, v)
    result = attention_varlen(
        padded_q,
        padded_k,
        padded_v,
        cu_seqlens_q,
        cu_seqlens_k,
        max_seqlen_q,
        max_seqlen_k,
        causal=False,  # folded into the window, as in _forward
        softmax_scale=scale,
        window=(left, right),
        softcap=max(float(softcap), 0.0),
        return_lse=return_attn_probs,
        deterministic=deterministic,
    )
    if return_attn_probs:
        out, lse = result
        return out[..., :head_dim], lse, None
    return result[..., :head_dim]


def flash_attn_varlen_kvpacked_func(
    q,
    kv,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """flash_attn.flash_attn_varlen_kvpacked_func. kv: (total_k, 2, nheads_k, headdim), read in
    place."""
    return flash_attn_varlen_func(
        q,
        kv[:, 0],
        kv[:, 1],
        cu_seqlens_q,
        cu_seqlens_k,
        max_seqlen_q,
        max_seqlen_k,
        dropout_p,
        softmax_scale,
        causal,
        window_size,
        softcap,
        alibi_slopes,
        deterministic,
        return_attn_probs,
    )


def flash_attn_varlen_qkvpacked_func(
    qkv,
    cu_seqlens,
    max_seqlen,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
):
    """flash_attn.flash_attn_varlen_qkvpacked_func. qkv: (total, 3, nheads, headdim), read in
    place."""
    return flash_attn_varlen_func(
        qkv[:, 0],
        qkv[:, 1],
        qkv[:, 2],
        cu_seqlens,
        cu_seqlens,
        max_seqlen,
        max_seqlen,
        dropout_p,
        softmax_scale,
        causal,
        window_size,
        softcap,
        alibi_slopes,
        deterministic,
        return_attn_probs,
    )


def flash_attn_with_kvcache(
    q,
    k_cache,
    v_cache,
    k=None,
    v=None,
    rotary_cos=None,
    rotary_sin=None,
    cache_seqlens=None,
    cache_batch_idx=None,
    cache_leftpad=None,
    block_table=None,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    rotary_interleaved=True,
    alibi_slopes=None,
    num_splits=0,
    return_softmax_lse=False,
):
    """flash_attn.flash_attn_with_kvcache without paging. k_cache, v_cache: (batch, seqlen_cache,
    nheads_k, headdim). cache_seqlens: int or (batch,) int32, each sequence's length in the cache
    (None: the whole cache). With k and v (batch, seqlen_new, nheads_k, headdim) they are written
    into the caches in place at cache_seqlens, then attention runs over each sequence's first
    cache_seqlens + seqlen_new keys. Returns out, or (out, softmax_lse) with return_softmax_lse.

    A cache_seqlens tensor is read on the host (one synchronize), and sequences of different
    lengths run as one call each; equal lengths run as one call."""
    if rotary_cos is not None or rotary_sin is not None:
        _unsupported("rotary_cos/rotary_sin", "<tensor>", "no rotary embedding; apply it first")
    if cache_batch_idx is not None:
        _unsupported("cache_batch_idx", "<tensor>", "the cache's batch is q's batch")
    if cache_leftpad is not None:
        _unsupported("cache_leftpad", "<tensor>", "sequences start at cache position 0")
    if block_table is not None:
        _unsupported("block_table", "<tensor>", "no paged KV cache yet")
    _check_common(0.0, alibi_slopes)
    _check_no_grad(q, k_cache, v_cache, k, v)
    if (k is None) != (v is None):
        raise ValueError("flash_attn_with_kvcache: pass both k and v, or neither")
    batch, capacity = k_cache.shape[0], k_cache.shape[1]
    new = 0 if k is None else k.shape[1]
    if cache_seqlens is None:
        if k is not None:
            raise ValueError("flash_attn_with_kvcache: appending k and v needs cache_seqlens")
        lengths = [capacity] * batch
    elif isinstance(cache_seqlens, int):
        lengths = [cache_seqlens] * batch
    else:
        lengths = [int(n) for n in cache_seqlens.tolist()]
    if len(lengths) != batch:
        raise ValueError(f"cache_seqlens has {len(lengths)} entries for a batch of {batch}")
    for b, length in enumerate(lengths):
        if length < 0 or length + new > capacity:
            raise ValueError(
                f"sequence {b}: cache_seqlens {length} + {new} new keys does not fit a cache of "
                f"{capacity}"
            )

    uniform = len(set(lengths)) == 1
    if k is not None:
        if uniform:
            k_cache[:, lengths[0] : lengths[0] + new] = k
            v_cache[:, lengths[0] : lengths[0] + new] = v
        else:
            for b, length in enumerate(lengths):
                k_cache[b, length : length + new] = k[b]
                v_cache[b, length : length + new] = v[b]

    def run(rows, length):
        return _forward(
            q[rows],
            k_cache[rows, : length + new],
            v_cache[rows, : length + new],
            softmax_scale,
            causal,
            window_size,
            softcap,
            return_softmax_lse,
            num_splits,
        )

    if uniform:
        return run(slice(None), lengths[0])
    parts = [run(slice(b, b + 1), length) for b, length in enumerate(lengths)]
    torch = _torch()
    if return_softmax_lse:
        return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
    return torch.cat(parts)
