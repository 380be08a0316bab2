"""torch integration, imported only when torch is: eager calls go straight to the extension on
the current stream; under torch.compile, and whenever q, k or v require grad, they go through the
custom op flashcore::attention, which the compiler and CUDA graphs see as one opaque node with a
fake (meta) implementation. Its autograd formula saves only out and lse (never P) and calls the
custom op flashcore::attention_backward."""

import torch

from . import _core


def _lse_shape(q):
    if q.dim() != 4:
        raise ValueError(
            f"q is {q.dim()}-D; it must be 4-D [batch, seqlen, heads, head_dim] (BSHD; pass BHSD "
            "through strides)"
        )
    return (q.shape[0], q.shape[2], q.shape[1])


def workspace_allocator(device, stream=None):
    """The workspace argument of _core.run: a callable that the extension calls only when the
    chosen kernel needs scratch, with the bytes it needs. The buffer comes from torch's caching
    allocator on the current stream (a graph's pool under capture), so the library never
    allocates with cudaMallocAsync and the call needs no workspace_size() crossing first. stream:
    the int cudaStream_t the kernel runs on when it is not the current one (the buffer is then
    recorded on it, so that the allocator does not hand it out before the kernel is done)."""

    def allocate(nbytes):
        buffer = torch.empty(nbytes, dtype=torch.uint8, device=device)
        if stream is not None:
            buffer.record_stream(torch.cuda.ExternalStream(int(stream), device=device))
        return _core._native_array(buffer)

    return allocate


# torch.cuda.current_stream(device) builds a torch.cuda.Stream object at every call: 3.3-5.2 us of
# host time on the H200 machine against 0.1 us for the raw handle (docs/perf.md, "Session 43"),
# and a short call is host-bound. The raw handle comes from the C function that torch.compile's
# generated code reads (inductor's get_raw_stream); the public call stands in where a build of
# torch lacks it.
_raw_current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def current_stream(x):
    """The int cudaStream_t of torch's current stream on x's device; 0 for a CPU tensor."""
    if not x.is_cuda:
        return 0
    if _raw_current_stream is not None:
        return _raw_current_stream(x.get_device())
    return torch.cuda.current_stream(x.device).cuda_stream


@torch.library.custom_op("flashcore::attention", mutates_args=())
def attention_op(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    softmax_scale: float,
    window_left: int,
    window_right: int,
    softcap: float,
    backend: str,
    num_splits: int = 0,
    tile: str = "auto",
    enable_pdl: bool = True,
    deterministic: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (out, lse): out like q but contiguous BSHD, lse float32 [batch, heads_q, seqlen_q].

    softmax_scale 0 means 1/sqrt(head_dim). Runs on the current stream. deterministic applies to
    the backward only.
    """
    lse = q.new_empty(_lse_shape(q), dtype=torch.float32)
    out = q.new_empty(q.shape)
    window = (window_left, window_right)
    kernel = (backend, num_splits, tile, enable_pdl)
    _core.run(
        q, k, v, out, lse, softmax_scale, causal, window, softcap, kernel, current_stream(q),
        workspace_allocator(q.device),
    )
    return out, lse


@attention_op.register_fake
def _attention_fake(
    q, k, v, causal, softmax_scale, window_left, window_right, softcap, backend, num_splits=0,
    tile="auto", enable_pdl=True, deterministic=False,
):
    return q.new_empty(q.shape), q.new_empty(_lse_shape(q), dtype=torch.float32)


@torch.library.custom_op("flashcore::attention_backward", mutates_args=())
def attention_backward_op(
    d_o: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    causal: bool,
    softmax_scale: float,
    window_left: int,
    window_right: int,
    softcap: float,
    deterministic: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) of the forward that made out and lse, like q, k and v (contiguous BSHD)."""
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    args = (q, k, v, out, lse, d_o, dq, dk, dv, softmax_scale, causal, (window_left, window_right),
            softcap, deterministic)
    size = _core.backward_workspace_size(*args)
    workspace = torch.empty(size, dtype=torch.uint8, device=q.device)
    _core.run_backward(*args, current_stream(q), workspace)
    return dq, dk, dv


@attention_backward_op.register_fake
def _attention_backward_fake(
    d_o, q, k, v, out, lse, causal, softmax_scale, window_left, window_right, softcap,
    deterministic,
):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    q, k, v, causal, softmax_scale, window_left, window_right, softcap = inputs[:8]
    deterministic = inputs[12] if len(inputs) > 12 else False
    out, lse = output
    # Only the inputs and the forward's out and lse: the backward recomputes P tile by tile.
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.options = (causal, softmax_scale, window_left, window_right, softcap, deterministic)


def _rows_readable(t):
    """Whether the backward kernels read t as it is: unit last stride, every other stride of an
    extent above one positive and a whole number of 16-byte rows, a 16-byte aligned start (the
    library's validation and the TMA's rules)."""
    row = 16 // t.element_size()
    strides_fit = all(
        size <= 1 or (stride > 0 and stride % row == 0)
        for size, stride in zip(t.shape[:-1], t.stride()[:-1])
    )
    # The start by its offset into the storage (the caching allocator aligns storages), which fake
    # tensors under torch.compile have too, unlike a data pointer.
    return t.stride(-1) == 1 and strides_fit and t.storage_offset() % row == 0


def _backward(ctx, grad_out, grad_lse):
    q, k, v, out, lse = ctx.saved_tensors
    if grad_out is None:
        grad_out = torch.zeros_like(out)
    # A model that transposes the output back to BHSD hands its gradient in as a strided view of
    # a BHSD tensor, which the kernels read in place: a copy would cost about 4% of the backward
    # at B4 H16 S4096 D128 (scripts/profile_backward_kernels.py).
    if not _rows_readable(grad_out):
        grad_out = grad_out.contiguous()
    dq, dk, dv = attention_backward_op(grad_out, q, k, v, out, lse, *ctx.options)
    return dq, dk, dv, None, None, None, None, None, None, None, None, None, None


attention_op.register_autograd(_backward, setup_context=_setup_context)


def _detached(tensor):
    return tensor.detach() if tensor.requires_grad else tensor


def attention(
    q, k, v, causal, softmax_scale, window, softcap, return_lse, kernel, out, lse_out, stream,
    deterministic=False,
):
    """flashcore.attention for torch tensors (arguments already normalized; kernel is
    (backend, num_splits, tile, enable_pdl))."""
    needs_grad = torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in (q, k, v)
    )
    if torch.compiler.is_compiling() or needs_grad:
        if stream is not None:
            raise ValueError(
                "stream= is not supported under torch.compile or when q, k or v requires grad; "
                "the op runs on the current stream (use torch.cuda.stream(...))"
            )
        if needs_grad and (out is not None or lse_out is not None):
            raise ValueError(
                "out= and lse_out= are not differentiable: drop them when q, k or v requires grad"
            )
        o, lse = attention_op(
            q, k, v, causal, softmax_scale, window[0], window[1], softcap, *kernel, deterministic
        )
        if out is not None:
            o = out.copy_(o)
        if lse_out is not None:
            lse = lse_out.copy_(lse)
        return (o, lse) if return_lse else o

    for name, tensor in (("k", k), ("v", v), ("out", out), ("lse_out", lse_out)):
        if tensor is not None and not isinstance(tensor, torch.Tensor):
            raise TypeError(
                f"{name} is a {type(tensor).__name__} but q is a torch.Tensor; pass "
                "torch tensors throughout"
            )
    # new_empty (contiguous, q's dtype and device) rather than torch.empty(shape, dtype=, device=),
    # which parses its keywords: about half the host time a tensor (docs/perf.md, "Session 43").
    if out is None:
        out = q.new_empty(q.shape)
    if return_lse and lse_out is None:
        lse_out = q.new_empty(_lse_shape(q), dtype=torch.float32)
    # Tensors that require grad (here only under no_grad) go to the extension detached, since a
    # subclass's __dlpack__ refuses them; the others as they are (a detach is about a microsecond
    # of host time each). The caller gets back the very out/lse_out it passed.
    args = (_detached(q), _detached(k), _detached(v), _detached(out),
            _detached(lse_out) if return_lse else None)
    if stream is None:
        workspace = workspace_allocator(q.device)
        stream = current_stream(q)
    else:
        workspace = workspace_allocator(q.device, stream)
    _core.run(*args, softmax_scale, causal, window, softcap, kernel, int(stream), workspace)
    return (out, lse_out) if return_lse else out
