"""The flex functions under torch.compile and CUDA graphs: the custom op flashcore::flex_attention,
imported only with torch. Eager calls launch directly (flashcore/flex.py); under torch.compile
flex_attention and attention_varlen call this op instead, which the compiler sees as one opaque
node with a fake (meta) implementation, so a compiled model keeps a single graph.

A custom op's schema takes tensors and scalars, not Python objects, so the flex fields (the mods'
arrays, the BlockMask, varlen's cu_seqlens) travel as optional tensors and a list of ints, and a
jit_score_mod as a token of its process-wide registry (jit.JitScoreMod.token) plus its tensor
captures, in its signature's order (a jit_mask_mod likewise, its tensors first): passing them to the op is what lets the compiler order the
op after whatever wrote them.

The op is differentiable in q, k, v and the sink logits (register_autograd below): it saves its
inputs, out and lse (never P) and its backward is the custom op flashcore::flex_attention_backward
(run_backward: the sm90 backward on sm_90a for varlen batches and sinks, else the sm80 flex
backward), which also returns the sink logits' gradient. The other mods' tensors (ALiBi slopes,
the bias table) get no gradient, and a jit_score_mod / jit_mask_mod has no backward (a CUDA
snippet has no derivative): the backward refuses them."""

from typing import Optional

import torch

from . import _core, _ops, flex, jit

# The array fields of python/src/flex_args.hpp, in the op's argument order.
_ARRAY_FIELDS = ("doc_ids_q", "doc_ids_k", "prefix_lengths", "alibi_slopes", "rel_bias", "sinks",
                 "kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
                 "cu_seqlens_q", "cu_seqlens_k")
# The integer fields; -1 stands for "not set" (none of them is negative when set).
_INT_FIELDS = ("prefix_length", "q_block", "kv_block", "max_seqlen_q", "max_seqlen_k")
_UNSET = -1


@torch.library.custom_op("flashcore::flex_attention", mutates_args=())
def flex_attention_op(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    doc_ids_q: Optional[torch.Tensor],
    doc_ids_k: Optional[torch.Tensor],
    prefix_lengths: Optional[torch.Tensor],
    alibi_slopes: Optional[torch.Tensor],
    rel_bias: Optional[torch.Tensor],
    sinks: Optional[torch.Tensor],
    kv_num_blocks: Optional[torch.Tensor],
    kv_indices: Optional[torch.Tensor],
    full_kv_num_blocks: Optional[torch.Tensor],
    full_kv_indices: Optional[torch.Tensor],
    cu_seqlens_q: Optional[torch.Tensor],
    cu_seqlens_k: Optional[torch.Tensor],
    int_fields: list[int],
    jit_captures: list[torch.Tensor],
    scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    heads_major: bool,
    jit_mask: str,
    jit_score: str,
    backend: str,
    deterministic: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, lse) of flex attention over q, k, v ([batch, seqlen, heads, head_dim] views, as the
    library takes them). out is [batch, heads, seqlen, head_dim] contiguous when heads_major
    (flex_attention's BHSD), else like q contiguous (varlen's packed rows); lse is float32
    [batch, heads, seqlen]. scale 0 means 1/sqrt(head_dim). deterministic is the backward's (the
    forward is deterministic either way): it travels with the op so that autograd hands it on."""
    arrays = (doc_ids_q, doc_ids_k, prefix_lengths, alibi_slopes, rel_bias, sinks, kv_num_blocks,
              kv_indices, full_kv_num_blocks, full_kv_indices, cu_seqlens_q, cu_seqlens_k)
    fields = _unpack_fields(arrays, int_fields)
    out, lse = _empty_outputs(q, heads_major)
    out_view = out.transpose(1, 2) if heads_major else out
    program = _program(jit_mask, jit_score, list(jit_captures))
    flex.launch(q, k, v, out_view, lse, scale, causal, (window_left, window_right), softcap, fields,
                program, backend)
    return out, lse


@flex_attention_op.register_fake
def _flex_attention_fake(
    q, k, v, doc_ids_q, doc_ids_k, prefix_lengths, alibi_slopes, rel_bias, sinks, kv_num_blocks,
    kv_indices, full_kv_num_blocks, full_kv_indices, cu_seqlens_q, cu_seqlens_k, int_fields,
    jit_captures, scale, causal, window_left, window_right, softcap, heads_major, jit_mask,
    jit_score, backend, deterministic,
):
    return _empty_outputs(q, heads_major)


@torch.library.custom_op("flashcore::flex_attention_backward", mutates_args=())
def flex_attention_backward_op(
    d_o: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    doc_ids_q: Optional[torch.Tensor],
    doc_ids_k: Optional[torch.Tensor],
    prefix_lengths: Optional[torch.Tensor],
    alibi_slopes: Optional[torch.Tensor],
    rel_bias: Optional[torch.Tensor],
    sinks: Optional[torch.Tensor],
    kv_num_blocks: Optional[torch.Tensor],
    kv_indices: Optional[torch.Tensor],
    full_kv_num_blocks: Optional[torch.Tensor],
    full_kv_indices: Optional[torch.Tensor],
    cu_seqlens_q: Optional[torch.Tensor],
    cu_seqlens_k: Optional[torch.Tensor],
    int_fields: list[int],
    scale: float,
    causal: bool,
    window_left: int,
    window_right: int,
    softcap: float,
    heads_major: bool,
    deterministic: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv, d_sinks) of the flex_attention_op call that made out and lse: dq, dk, dv like
    q, k and v, d_sinks float32 [heads_q] with sinks (empty without); d_o is shaped like out and
    contiguous. deterministic: bitwise-identical gradients run to run."""
    arrays = (doc_ids_q, doc_ids_k, prefix_lengths, alibi_slopes, rel_bias, sinks, kv_num_blocks,
              kv_indices, full_kv_num_blocks, full_kv_indices, cu_seqlens_q, cu_seqlens_k)
    fields = _unpack_fields(arrays, int_fields)
    out_view, d_o_view = (out.transpose(1, 2), d_o.transpose(1, 2)) if heads_major else (out, d_o)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    d_sinks = _sink_grad_buffer(sinks, q.device)
    args = (q, k, v, out_view, lse, d_o_view, dq, dk, dv, scale, causal,
            (window_left, window_right), softcap, deterministic)
    size = _core.backward_workspace_size(*args, flex=fields)
    workspace = torch.empty(size, dtype=torch.uint8, device=q.device)
    _core.run_backward(*args, _ops.current_stream(q), workspace,
                       flex=fields, d_sinks=d_sinks if sinks is not None else None)
    return dq, dk, dv, d_sinks


def _sink_grad_buffer(sinks, device):
    """The op's d_sinks output: float32 [heads_q] with sinks; empty without (an op's outputs are
    tensors, never None)."""
    return torch.empty(0 if sinks is None else sinks.shape[0], dtype=torch.float32, device=device)


@flex_attention_backward_op.register_fake
def _flex_attention_backward_fake(d_o, q, k, v, out, lse, *rest):
    sinks = rest[_ARRAY_FIELDS.index("sinks")]
    return (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v),
            _sink_grad_buffer(sinks, q.device))


# flex_attention_op's arguments after q, k, v: the arrays, int_fields and jit_captures, then the
# scalars (scale ... backend).
_NUM_ARRAYS = len(_ARRAY_FIELDS)


def _setup_context(ctx, inputs, output):
    q, k, v = inputs[:3]
    arrays = inputs[3:3 + _NUM_ARRAYS]
    int_fields = inputs[3 + _NUM_ARRAYS]
    scale, causal, window_left, window_right, softcap, heads_major, jit_mask, jit_score = (
        inputs[5 + _NUM_ARRAYS:13 + _NUM_ARRAYS])
    deterministic = inputs[14 + _NUM_ARRAYS]  # after backend
    out, lse = output
    # The inputs, the mods' arrays and the forward's out and lse; the backward recomputes P.
    ctx.save_for_backward(q, k, v, out, lse, *arrays)
    ctx.options = (list(int_fields), scale, causal, window_left, window_right, softcap,
                   heads_major, deterministic)
    ctx.num_captures = len(inputs[4 + _NUM_ARRAYS])
    ctx.jit = jit_mask or jit_score


def _backward(ctx, grad_out, grad_lse):
    if ctx.jit:
        raise RuntimeError(
            "flashcore: a jit_score_mod / jit_mask_mod has no backward (a CUDA snippet has no "
            "derivative); use the built-in mods (flashcore.mods) for training, or detach q, k, v"
        )
    q, k, v, out, lse, *arrays = ctx.saved_tensors
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    # The backward kernels read dO with unit last stride and 16-byte aligned rows, shaped as out.
    grad_out = grad_out.contiguous()
    dq, dk, dv, d_sinks = flex_attention_backward_op(grad_out, q, k, v, out, lse, *arrays,
                                                     *ctx.options)
    grads = [None] * (_NUM_ARRAYS + 12)
    # A list of tensors (jit_captures, empty here) takes a list of gradients; a list of ints None.
    grads[_NUM_ARRAYS + 1] = [None] * ctx.num_captures
    sinks = arrays[_ARRAY_FIELDS.index("sinks")]
    if sinks is not None and ctx.needs_input_grad[3 + _ARRAY_FIELDS.index("sinks")]:
        grads[_ARRAY_FIELDS.index("sinks")] = d_sinks.to(sinks.dtype)
    return (dq, dk, dv, *grads)


flex_attention_op.register_autograd(_backward, setup_context=_setup_context)


@torch.library.custom_op("flashcore::create_block_mask", mutates_args=())
def create_block_mask_op(
    doc_ids_q: Optional[torch.Tensor],
    doc_ids_k: Optional[torch.Tensor],
    prefix_lengths: Optional[torch.Tensor],
    sizes: list[int],
    device: torch.device,
) -> torch.Tensor:
    """The byte buffer of a built-in mask's BlockMask, built on the GPU in one launch (what
    flex.create_block_mask does eagerly). sizes: window_left, window_right, prefix_length (-1:
    none), B, H, Q_LEN, KV_LEN, q_block, kv_block. flex.block_mask_views cuts the four arrays out
    of it."""
    window_left, window_right, prefix_length, *shape = sizes
    fields = dict(window_left=window_left, window_right=window_right)
    for name, array in (("doc_ids_q", doc_ids_q), ("doc_ids_k", doc_ids_k),
                        ("prefix_lengths", prefix_lengths)):
        if array is not None:
            fields[name] = array
    if prefix_length != _UNSET:
        fields["prefix_length"] = prefix_length
    native = _core.native()
    # Zeroed: the builder leaves the index entries past each count and the alignment padding
    # unwritten, and an op's output should be the same bytes every time it runs.
    buffer = torch.zeros(native.block_mask_bytes(*shape), dtype=torch.uint8, device=device)
    stream = _ops.current_stream(buffer)
    native.create_block_mask(buffer, fields, *shape, stream)
    return buffer


@create_block_mask_op.register_fake
def _create_block_mask_fake(doc_ids_q, doc_ids_k, prefix_lengths, sizes, device):
    return torch.empty(_core.native().block_mask_bytes(*sizes[3:]), dtype=torch.uint8,
                       device=device)


def create_block_mask(fields, shape, device):
    """The op's buffer for flex.create_block_mask's arguments (fields: the mask_mod's native
    fields with its window; shape: B, H, Q_LEN, KV_LEN, q_block, kv_block)."""
    prefix_length = fields.get("prefix_length", _UNSET)
    sizes = [int(fields["window_left"]), int(fields["window_right"]), int(prefix_length),
             *(int(x) for x in shape)]
    return create_block_mask_op(fields.get("doc_ids_q"), fields.get("doc_ids_k"),
                                fields.get("prefix_lengths"), sizes, torch.device(device))


def needs_grad(*tensors):
    """True when autograd records a call on these tensors (any of them requires grad)."""
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def _program(mask_token, score_token, tensors):
    """The jit.Program of the op's tokens, each mod taking its share of the tensors in order."""
    mods = []
    for token in (mask_token, score_token):
        if not token:
            mods.append(None)
            continue
        count = jit.tensor_count(token)
        mods.append(jit.registered(token, tensors[:count]))
        tensors = tensors[count:]
    return None if mods == [None, None] else jit.Program(*mods)


def compiling():
    return torch.compiler.is_compiling()


def _empty_outputs(q, heads_major):
    batch, seqlen, heads, head_dim = q.shape
    shape = (batch, heads, seqlen, head_dim) if heads_major else tuple(q.shape)
    out = q.new_empty(shape)
    lse = q.new_empty((batch, heads, seqlen), dtype=torch.float32)
    return out, lse


def _pack_fields(fields):
    """(the array fields in _ARRAY_FIELDS order, the int fields) of flex.py's fields dict."""
    block_mask = fields.get("block_mask")
    arrays = dict(fields)
    ints = {name: fields.get(name, _UNSET) for name in _INT_FIELDS}
    if block_mask is not None:
        counts, indices, full_counts, full_indices, q_block, kv_block = block_mask
        arrays.update(kv_num_blocks=counts, kv_indices=indices, full_kv_num_blocks=full_counts,
                      full_kv_indices=full_indices)
        ints.update(q_block=q_block, kv_block=kv_block)
    return [arrays.get(name) for name in _ARRAY_FIELDS], [int(ints[name]) for name in _INT_FIELDS]


def _unpack_fields(arrays, ints):
    """flex.py's fields dict from the op's arguments (the inverse of _pack_fields)."""
    fields = {name: a for name, a in zip(_ARRAY_FIELDS, arrays) if a is not None}
    values = dict(zip(_INT_FIELDS, ints))
    counts = fields.pop("kv_num_blocks", None)
    indices = fields.pop("kv_indices", None)
    full_counts = fields.pop("full_kv_num_blocks", None)
    full_indices = fields.pop("full_kv_indices", None)
    if counts is not None:
        fields["block_mask"] = (counts, indices, full_counts, full_indices, values["q_block"],
                                values["kv_block"])
    for name in ("prefix_length", "max_seqlen_q", "max_seqlen_k"):
        if values[name] != _UNSET:
            fields[name] = values[name]
    return fields


def flex_attention(q, k, v, scale, causal, window, softcap, fields, program, backend,
                   heads_major, deterministic=False):
    """Calls the op with flex.py's arguments (program: a jit.Program or None); returns (out,
    lse) shaped as the op says."""
    arrays, ints = _pack_fields(fields)
    tokens, captures = [], []
    for mod in (program or (None, None)):
        token, tensors = ("", []) if mod is None else mod.token_and_tensors()
        tokens.append(token)
        captures += tensors
    return flex_attention_op(
        q, k, v, *arrays, ints, captures, 0.0 if scale is None else float(scale), bool(causal),
        int(window[0]), int(window[1]), float(softcap), heads_major, *tokens, backend,
        bool(deterministic),
    )
