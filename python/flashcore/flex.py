"""FlexAttention on flashcore's kernels: flex_attention, create_block_mask, BlockMask and
attention_varlen (docs/flex.md). The mods are flashcore's built-ins (flashcore.mods), which run
fused in the sm80 flex kernels that auto picks for these problems on any sm_80+ GPU, or a
score_mod of your own compiled at run time (flashcore.jit_score_mod, flashcore/jit.py).

Eager calls launch directly; under torch.compile, and whenever q, k or v requires grad,
flex_attention and attention_varlen become the custom op flashcore::flex_attention (_flex_ops.py),
so a compiled model keeps one graph, and both are differentiable in q, k and v with the built-in
mods (the sm80 flex backward, docs/backward.md).
"""

from . import _core, jit
from .mods import MaskMod, ScoreMod

__all__ = ["BlockMask", "create_block_mask", "flex_attention", "attention_varlen"]

_DEFAULT_BLOCK_SIZE = 128  # PyTorch's
# flashcore/_flex_ops.py and flashcore/_ops.py, set by flashcore/__init__.py where torch is
# installed (this module imports without torch).
_flex_ops = None
_ops = None


# A BlockMask's fields that say what it masks: assigning one makes it no longer a window's own.
_MASK_FIELDS = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
                "BLOCK_SIZE", "seq_lengths", "mask_mod")


class BlockMask:
    """A block-sparse mask in PyTorch's layout (int32 kv_num_blocks [B, H, Mq], kv_indices
    [B, H, Mq, Mk], optional full_* of the same shapes), its block sizes, the lengths it was
    built for and the mask_mod that partial blocks evaluate. torch's BlockMask has the same
    fields, and flex_attention takes either."""

    def __init__(self, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices,
                 BLOCK_SIZE, seq_lengths, mask_mod, buffer=None):
        values = (kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, BLOCK_SIZE,
                  seq_lengths, mask_mod)
        for name, value in zip(_MASK_FIELDS, values):
            setattr(self, "_" + name, value)
        self._buffer = buffer  # keeps the arrays' memory alive
        # The window (left, right) whose block range the lists are, set by create_block_mask for
        # a window-only mask_mod (see _is_window_own); None once a field is assigned.
        self._window_own = None

    def __repr__(self):
        return (f"flashcore.BlockMask(shape={tuple(self.kv_indices.shape)}, "
                f"BLOCK_SIZE={self.BLOCK_SIZE}, seq_lengths={self.seq_lengths})")


def _block_sizes(block_size):
    if isinstance(block_size, int):
        return block_size, block_size
    if isinstance(block_size, (tuple, list)) and len(block_size) == 2:
        return int(block_size[0]), int(block_size[1])
    raise TypeError(f"BLOCK_SIZE must be an int or a (q, kv) pair, got {block_size!r}")


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device="cuda", BLOCK_SIZE=_DEFAULT_BLOCK_SIZE):
    """PyTorch's create_block_mask for flashcore's built-in mask_mods and jit_mask_mods, built on
    the GPU in one launch on the current stream. B or H None broadcasts (1). Needs torch."""
    if not isinstance(mask_mod, (MaskMod, jit.JitMaskMod)):
        raise TypeError(
            f"mask_mod is a {type(mask_mod).__name__}; flashcore builds masks of its built-in "
            "mask_mods (flashcore.mods.causal(), documents(...), ...) and of CUDA snippets "
            "(flashcore.jit_mask_mod(\"return kv_idx <= q_idx;\"))"
        )
    import torch

    q_block, kv_block = _block_sizes(BLOCK_SIZE)
    B = 1 if B is None else int(B)
    H = 1 if H is None else int(H)
    shape = (B, H, Q_LEN, KV_LEN, q_block, kv_block)
    if _flex_ops.compiling():
        # Traced by torch.compile: the custom op builds the buffer, its views are traced.
        if isinstance(mask_mod, jit.JitMaskMod):
            raise TypeError(
                "create_block_mask of a jit_mask_mod runs eagerly: build the BlockMask outside "
                "the compiled function (the built-in mods can be built inside it)"
            )
        buffer = _flex_ops.create_block_mask(_mask_mod_fields(mask_mod), shape, device)
        return _block_mask_of(buffer, block_mask_offsets(B, H, Q_LEN, KV_LEN, q_block, kv_block),
                              shape, mask_mod)
    native = _core.native()
    nbytes = native.block_mask_bytes(*shape)
    buffer = torch.empty(nbytes, dtype=torch.uint8, device=device)
    stream = _stream_of(buffer)
    if isinstance(mask_mod, jit.JitMaskMod):
        # The library checks and places the mask; the snippet's object launches the builder.
        offsets = jit.block_mask(mask_mod, buffer.device.index, lambda entry, captures: (
            native.create_block_mask(buffer, dict(window_left=-1, window_right=-1), *shape,
                                     stream, entry, captures)))
    else:
        offsets = native.create_block_mask(buffer, _mask_mod_fields(mask_mod), *shape, stream)
    if list(offsets) != block_mask_offsets(B, H, Q_LEN, KV_LEN, q_block, kv_block):
        raise RuntimeError(f"flashcore's BlockMask layout changed ({list(offsets)}): "
                           "block_mask_offsets must follow src/flex/block_mask.cpp")
    return _block_mask_of(buffer, offsets, shape, mask_mod)


# The builder places the four int32 arrays one after another, each 16-byte aligned
# (src/flex/block_mask.cpp, prepare_block_mask); eager calls check this against its offsets.
_ARRAY_ALIGN_BYTES = 16


def block_mask_offsets(B, H, Q_LEN, KV_LEN, q_block, kv_block):
    """Byte offsets of kv_num_blocks, kv_indices, full_kv_num_blocks and full_kv_indices in the
    buffer create_block_mask writes, from the shape alone (torch.compile traces views of them)."""
    mq, mk = -(-Q_LEN // q_block), -(-KV_LEN // kv_block)
    offsets, position = [], 0
    for elements in (B * H * mq, B * H * mq * mk) * 2:
        offsets.append(position)
        position += -(-4 * elements // _ARRAY_ALIGN_BYTES) * _ARRAY_ALIGN_BYTES
    return offsets


def _mask_mod_fields(mask_mod):
    return dict(mask_mod.fields(), window_left=mask_mod.window[0],
                window_right=mask_mod.window[1])


def _block_mask_of(buffer, offsets, shape, mask_mod):
    import torch

    B, H, Q_LEN, KV_LEN, q_block, kv_block = shape
    mq, mk = -(-Q_LEN // q_block), -(-KV_LEN // kv_block)

    def view(offset, dims):
        count = 1
        for d in dims:
            count *= d
        return buffer[offset:offset + 4 * count].view(torch.int32).view(dims)

    block_mask = BlockMask(view(offsets[0], (B, H, mq)), view(offsets[1], (B, H, mq, mk)),
                           view(offsets[2], (B, H, mq)), view(offsets[3], (B, H, mq, mk)),
                           (q_block, kv_block), (Q_LEN, KV_LEN), mask_mod, buffer)
    if isinstance(mask_mod, MaskMod) and not mask_mod.fields():
        block_mask._window_own = mask_mod.window
    return block_mask


def _mask_field(name):
    def get(self):
        return getattr(self, "_" + name)

    def set(self, value):
        self._window_own = None  # the lists may no longer be the window's own
        setattr(self, "_" + name, value)

    return property(get, set)


for _name in _MASK_FIELDS:
    setattr(BlockMask, _name, _mask_field(_name))


def _is_window_own(block_mask):
    """True for a BlockMask that create_block_mask built from a mask_mod with no part but a window
    (causal, sliding_window) and that still holds what it was built with. Its lists are exactly
    the window's block range, which the kernels walk by themselves from the window: flex_attention
    drops the lists, so such a problem runs the dense kernels' window path (with no other flex
    part) or the flex kernel's own walk of the window, not a list walk (docs/flex.md, "A
    window's own BlockMask"). A torch BlockMask is always used as it is: its lists may have been
    edited after they were built. (A flag, not the tensors' identity: torch.compile traces this
    test and must reach eager's answer.)"""
    own = getattr(block_mask, "_window_own", None)
    return own is not None and own == getattr(block_mask.mask_mod, "window", None)


def _is_noop_mask(mask_mod):
    return getattr(mask_mod, "__name__", "") == "noop_mask"


def _swap_seq_heads(x):
    """[B, H, S, D] <-> [B, S, H, D] as a view (no copy)."""
    if hasattr(x, "transpose") and hasattr(x, "is_cuda"):  # torch
        return x.transpose(1, 2)
    return x.__array_namespace__().permute_dims(x, (0, 2, 1, 3))


def _check_rank(name, x, rank, layout):
    if not hasattr(x, "shape") or len(x.shape) != rank:
        raise ValueError(f"{name} must be a {rank}-D array {layout}")


def _block_mask_fields(block_mask, q_len, kv_len):
    """(kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, BLOCK_SIZE, seq_lengths,
    mask_mod) of a flashcore or torch BlockMask."""
    if type(block_mask) is BlockMask:
        # flashcore's own holds every field: read past the properties, a Python frame each, about
        # 3 us of a call (docs/perf.md, "Session 44").
        return (block_mask._kv_num_blocks, block_mask._kv_indices, block_mask._full_kv_num_blocks,
                block_mask._full_kv_indices, block_mask._BLOCK_SIZE, block_mask._seq_lengths,
                block_mask._mask_mod)
    for name in ("kv_num_blocks", "kv_indices", "BLOCK_SIZE", "mask_mod"):
        if not hasattr(block_mask, name):
            raise TypeError(
                f"block_mask is a {type(block_mask).__name__}; pass a flashcore.BlockMask or a "
                "torch.nn.attention.flex_attention.BlockMask"
            )
    return (block_mask.kv_num_blocks, block_mask.kv_indices,
            getattr(block_mask, "full_kv_num_blocks", None),
            getattr(block_mask, "full_kv_indices", None), block_mask.BLOCK_SIZE,
            getattr(block_mask, "seq_lengths", (q_len, kv_len)), block_mask.mask_mod)


def _mask_parts(block_mask, q_len, kv_len):
    """(window, native fields, jit_mask_mod or None) of block_mask: its mask_mod's parts and its
    block lists."""
    if block_mask is None:
        return (-1, -1), {}, None
    kv_num_blocks, kv_indices, full, full_indices, block_size, seq_lengths, mask_mod = (
        _block_mask_fields(block_mask, q_len, kv_len))
    seq_lengths = tuple(seq_lengths)
    if seq_lengths != (q_len, kv_len):
        raise ValueError(
            f"block_mask was built for (Q_LEN, KV_LEN) = {seq_lengths} but q and k have "
            f"({q_len}, {kv_len}); rebuild it with create_block_mask for these lengths"
        )
    jit_mask = None
    if isinstance(mask_mod, MaskMod):
        window, fields = mask_mod.window, mask_mod.fields()
    elif isinstance(mask_mod, jit.JitMaskMod):
        window, fields, jit_mask = (-1, -1), {}, mask_mod
    elif mask_mod is None or _is_noop_mask(mask_mod):
        window, fields = (-1, -1), {}
    else:
        raise TypeError(
            "block_mask.mask_mod is a Python function; flashcore's kernels run its built-in "
            "mask_mods: build the mask from flashcore.mods (e.g. torch's create_block_mask("
            "flashcore.mods.causal(), ...)) so that partial blocks evaluate the same mask"
        )
    if _is_window_own(block_mask):
        return window, fields, jit_mask
    q_block, kv_block = _block_sizes(block_size)
    fields["block_mask"] = (kv_num_blocks, kv_indices, full,
                            full_indices if full is not None else None, q_block, kv_block)
    return window, fields, jit_mask


def _score_fields(score_mod):
    if score_mod is None:
        return 0.0, {}
    if not isinstance(score_mod, ScoreMod):
        raise TypeError(
            f"score_mod is a {type(score_mod).__name__}; flashcore runs its built-in score_mods "
            "(flashcore.mods.alibi, relative_bias, softcap, compose) and CUDA snippets "
            "(flashcore.jit_score_mod(\"return score + bias[h];\", bias=t))"
        )
    return score_mod.cap, score_mod.fields()


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None,
                   enable_gqa=False, return_lse=False, *, sinks=None, backend="auto",
                   deterministic=False):
    """PyTorch's flex_attention on flashcore: query [B, Hq, Sq, D], key/value [B, Hkv, Sk, D]
    (BHSD, as PyTorch), float16 or bfloat16. score_mod: a flashcore.mods score_mod, a
    flashcore.jit_score_mod (compiled at the first call, then cached on disk) or None;
    block_mask: a flashcore or torch BlockMask whose mask_mod is a flashcore.mods mask_mod (or
    torch's noop_mask). sinks: optional float32 [Hq] attention-sink logits (gpt-oss).
    deterministic: the backward gives bitwise-identical gradients run to run.

    Returns out [B, Hq, Sq, D], or (out, lse [B, Hq, Sq] float32, natural log)."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        _check_rank(name, x, 4, "[batch, heads, seqlen, head_dim] (BHSD)")
    if query.shape[1] != key.shape[1] and not enable_gqa:
        raise ValueError(
            f"query has {query.shape[1]} heads and key {key.shape[1]}; pass enable_gqa=True for "
            "grouped-query attention"
        )
    if scale is not None and float(scale) == 0.0:
        raise ValueError("scale is 0; pass None for the default 1/sqrt(head_dim)")
    _check_deterministic(deterministic)
    window, fields, jit_mask = _mask_parts(block_mask, query.shape[2], key.shape[2])
    if sinks is not None:
        fields["sinks"] = sinks
    jit_score, cap = _split_score_mod(score_mod, fields)
    jit_mod = _jit_program(jit_mask, jit_score)
    if _through_op(jit_mod, query, key, value, sinks, fields):
        q, k, v = (_swap_seq_heads(x) for x in (query, key, value))
        out, lse = _flex_ops.flex_attention(q, k, v, scale, False, window, cap, fields, jit_mod,
                                            backend, heads_major=True,
                                            deterministic=deterministic)
        return (out, lse) if return_lse else out
    out, lse = _empty_outputs(query, (query.shape[0], query.shape[1], query.shape[2]), return_lse)
    launch(query, key, value, out, lse, scale, False, window, cap, fields, jit_mod, backend,
           heads_major=True)
    return (out, lse) if return_lse else out


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *,
                     causal=False, softmax_scale=None, window=(-1, -1), softcap=0.0,
                     return_lse=False, score_mod=None, sinks=None, backend="auto",
                     deterministic=False):
    """flash_attn_varlen_func on flashcore: q [total_q, Hq, D], k/v [total_k, Hkv, D] packed
    sequences, cu_seqlens int32 [batch + 1] on the GPU (0 first, nondecreasing, total last),
    max_seqlen_* the longest lengths. causal / window / softcap apply within each sequence,
    bottom-right aligned. deterministic: the backward gives bitwise-identical gradients run to
    run. Returns out [total_q, Hq, D], or (out, lse [Hq, total_q])."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        _check_rank(name, x, 3, "[total, heads, head_dim] (packed sequences)")
    if softmax_scale is not None and float(softmax_scale) == 0.0:
        raise ValueError("softmax_scale is 0; pass None for the default 1/sqrt(head_dim)")
    _check_deterministic(deterministic)
    if not isinstance(window, (tuple, list)) or len(window) != 2:
        raise TypeError(f"window must be a pair of ints (left, right), got {window!r}")
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be the longest sequence's length, an int >= 1")
    fields = {}
    jit_score, cap = _split_score_mod(score_mod, fields)
    jit_mod = _jit_program(None, jit_score)
    if cap and softcap:
        raise ValueError("pass softcap once: as softcap= or in score_mod, not both")
    if jit_mod is not None and softcap:
        raise ValueError("a jit_score_mod replaces softcap: write it into the snippet")
    fields.update(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                  max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)
    if sinks is not None:
        fields["sinks"] = sinks
    window = (int(window[0]), int(window[1]))
    q4, k4, v4 = (x[None] for x in (q, k, v))  # [1, total, H, D] views
    if _through_op(jit_mod, q, k, v, sinks, fields):
        out4, lse = _flex_ops.flex_attention(q4, k4, v4, softmax_scale, bool(causal), window,
                                             float(softcap or cap), fields, jit_mod, backend,
                                             heads_major=False, deterministic=deterministic)
        return (out4[0], lse[0]) if return_lse else out4[0]
    out, lse = _empty_outputs(q, (1, q.shape[1], q.shape[0]), return_lse)
    launch(q4, k4, v4, out[None], lse, softmax_scale, bool(causal), window,
           float(softcap or cap), fields, jit_mod, backend)
    return (out, lse[0]) if return_lse else out


def check_varlen(q, k, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
    """Checks what attention_varlen does not read before its launch (that would cost a copy and a
    synchronization, which CUDA graphs and torch.compile cannot have): cu_seqlens_q and
    cu_seqlens_k, batch + 1 entries each, 0 first, nondecreasing, the packed total (q.shape[0],
    k.shape[0]) last, no sequence above max_seqlen_q / max_seqlen_k. Copies the arrays to the host
    (so it synchronizes on GPU tensors); raises ValueError naming what is wrong. Without it a
    wrong array gives wrong numbers, but the kernels never read or write outside the tensors."""
    for name, x in (("q", q), ("k", k)):
        _check_rank(name, x, 3, "[total, heads, head_dim] (packed sequences)")
    host = {}
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        entries = cu.tolist() if hasattr(cu, "tolist") else list(cu)
        if not isinstance(entries, list) or any(isinstance(e, list) for e in entries):
            raise ValueError(f"{name} must be one-dimensional: [batch + 1] cumulative lengths")
        host[name] = [int(e) for e in entries]
    if len(host["cu_seqlens_q"]) != len(host["cu_seqlens_k"]):
        raise ValueError(f"cu_seqlens_q has {len(host['cu_seqlens_q'])} entries and cu_seqlens_k "
                         f"{len(host['cu_seqlens_k'])}; both are [batch + 1]")
    for name, total, longest in (("cu_seqlens_q", q.shape[0], max_seqlen_q),
                                 ("cu_seqlens_k", k.shape[0], max_seqlen_k)):
        _core.native().check_cu_seqlens(name, host[name], int(total), int(longest))


def launch(q, k, v, out, lse, scale, causal, window, softcap, fields, jit_mod, backend,
           heads_major=False):
    """Runs flex attention on [B, S, H, D] arrays ([B, H, S, D] with heads_major, which the
    extension takes as they are) on the current stream: the built-in mods are in `fields`
    (python/src/flex_args.hpp), jit_mod is a jit.Program (its snippets replace those parts) or
    None. Eager calls and the custom op (_flex_ops.py) both come here."""
    if jit_mod is not None:
        _run_jit(jit_mod, q, k, v, out, lse, scale, causal, window, softcap, fields, backend,
                 heads_major)
        return
    kernel = (backend, 0, "auto", True)
    # No workspace: the library takes the sm90 flex kernel's 256-byte tile counter (or the sm80
    # split's partials) from the stream-ordered pool, which measured 5-8 us a call cheaper than
    # torch's allocator through a workspace callable (docs/flex.md, "The host side of a flex call").
    _core.run(q, k, v, out, lse, 0.0 if scale is None else float(scale), causal, window,
              float(softcap), kernel, _stream_of(q), flex=fields, heads_major=heads_major)


def _jit_program(jit_mask, jit_score):
    """The jit.Program of the snippets among the mods, or None when both are built-ins."""
    if jit_mask is None and jit_score is None:
        return None
    return jit.Program(jit_mask, jit_score)


def _split_score_mod(score_mod, fields):
    """(the jit_score_mod or None, softcap) of score_mod; a built-in's arrays go into fields."""
    if isinstance(score_mod, jit.JitScoreMod):
        return score_mod, 0.0
    if isinstance(score_mod, jit.JitMaskMod):
        raise TypeError("score_mod is a jit_mask_mod; pass it to create_block_mask instead")
    cap, score = _score_fields(score_mod)
    fields.update(score)
    return None, cap


# What the flex backward implements (docs/backward.md, "Varlen and flex"): a call that needs
# gradients is checked against it here, before the forward runs, so that a training step fails
# before doing any work rather than in its backward.
_BACKWARD_HEAD_DIMS = (64, 128, 256)
# The backward's query and key blocks: a BlockMask's blocks must be multiples of them.
_BACKWARD_Q_BLOCK, _BACKWARD_KV_BLOCK = 64, 128


def _check_deterministic(deterministic):
    if not isinstance(deterministic, bool):
        raise TypeError(f"deterministic must be a bool, got {deterministic!r}")


def _check_backward_support(jit_mod, head_dim, fields):
    why = None
    if jit_mod is not None:
        why = ("a jit_score_mod / jit_mask_mod has no backward (a CUDA snippet has no "
               "derivative): use the built-in mods (flashcore.mods) to train")
    elif head_dim not in _BACKWARD_HEAD_DIMS:
        why = (f"the flex and varlen backward has kernels for head_dim 64, 128 and 256 only (got "
               f"{head_dim}): pad the head dim with zeros to one of them to train")
    elif "block_mask" in fields and (fields["block_mask"][4] % _BACKWARD_Q_BLOCK != 0
                                     or fields["block_mask"][5] % _BACKWARD_KV_BLOCK != 0):
        why = (f"the flex backward runs BlockMasks whose q block is a multiple of "
               f"{_BACKWARD_Q_BLOCK} and kv block a multiple of {_BACKWARD_KV_BLOCK} (got "
               f"{fields['block_mask'][4]} x {fields['block_mask'][5]}): build the BlockMask with "
               f"BLOCK_SIZE={_BACKWARD_KV_BLOCK} (PyTorch's default) to train")
    if why is not None:
        raise ValueError(f"q, k or v requires grad but {why}, or call under torch.no_grad()")


def _through_op(jit_mod, q, k, v, sinks, fields):
    """True when a call on torch tensors goes through the custom op: while torch.compile traces
    it, and when q, k, v or sinks requires grad (the op is differentiable; what its backward does
    not implement is refused here, before the forward runs)."""
    if _flex_ops is None or not hasattr(q, "is_cuda"):
        return False
    if _flex_ops.needs_grad(q, k, v, sinks):
        _check_backward_support(jit_mod, q.shape[-1], fields)
        return True
    return _flex_ops.compiling()


def _run_jit(program, q, k, v, out, lse, scale, causal, window, softcap, fields, backend,
             heads_major):
    """flex_attention with jit mods (a jit.Program): their shared object (compiled or cached)
    launches the kernel that the library picks (sm90 where it takes the problem, else sm80) on
    torch's current stream, after the library's checks (python/src/flashcore_ext.cpp)."""
    if backend not in ("auto", "sm90", "sm80"):
        kind = "score_mod" if program.score is not None else "mask_mod"
        raise ValueError(f"backend {backend!r}: a jit_{kind} runs on 'sm90' or 'sm80' (or 'auto')")

    def launch(address, sm90_kernels, replaces_score, captures, fp16, kernel_head_dim):
        _core._state.provider = _core.native().jit_attention(
            address, sm90_kernels, program.mask is not None, replaces_score, fp16, kernel_head_dim,
            captures, *_core._native_arrays(q, k, v, out, lse),
            0.0 if scale is None else float(scale), causal, window[0], window[1],
            float(softcap), backend, _stream_of(q), _core._native_flex(fields), heads_major,
        )

    builtin_score = bool(softcap) or "alibi_slopes" in fields or "rel_bias" in fields
    jit.run(program, q, builtin_score, launch)


def _empty_outputs(like, lse_shape, return_lse):
    """out shaped like `like` (contiguous) and, with return_lse, float32 lse of lse_shape."""
    xp = None if hasattr(like, "is_cuda") else like.__array_namespace__()
    if xp is None:
        import torch

        # empty_like and new_empty rather than torch.empty(shape, dtype=, device=), which parses
        # its keywords: about half the host time a tensor on the H200 machine, where a short flex
        # call is host-bound (docs/perf.md, "Session 43").
        out = torch.empty_like(like, memory_format=torch.contiguous_format)
        lse = like.new_empty(lse_shape, dtype=torch.float32) if return_lse else None
    else:
        out = xp.empty(like.shape, dtype=like.dtype, device=like.device)
        lse = xp.empty(lse_shape, dtype=xp.float32, device=like.device) if return_lse else None
    return out, lse


def _stream_of(x):
    """torch's current stream on x's device, or 0 (the legacy default) for other arrays."""
    if _ops is not None and hasattr(x, "is_cuda"):
        return _ops.current_stream(x)
    return 0
