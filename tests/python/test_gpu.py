"""flashcore on a GPU through torch: numerics against an fp32 reference (and SDPA's math backend),
LSE, every provider, layouts, torch.compile, CUDA graphs, streams and argument errors."""

import os
import secrets

import pytest

torch = pytest.importorskip(
    "torch", reason="SKIPPED: torch is not installed, so no GPU test of flashcore runs"
)
if not torch.cuda.is_available():
    pytest.skip(
        "SKIPPED: torch sees no CUDA device, so no GPU test of flashcore runs",
        allow_module_level=True,
    )
if torch.cuda.get_device_capability() < (8, 0):
    pytest.skip(
        f"SKIPPED: {torch.cuda.get_device_name()} is older than sm_80; flashcore needs sm_80+",
        allow_module_level=True,
    )

import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import flashcore  # noqa: E402

DTYPES = [torch.float16, torch.bfloat16]
# Fresh inputs every run; every numerics failure names the seed, and FLASHCORE_TEST_SEED=N
# replays that run.
RUN_SEED = int(os.environ.get("FLASHCORE_TEST_SEED", secrets.randbelow(2**31)))


def visible(seqlen_q, seqlen_k, causal, window, device):
    """[Sq, Sk] bool: query i sees key j (bottom-right aligned, as flash_attn)."""
    left, right = window
    if causal:
        right = 0
    i = torch.arange(seqlen_q, device=device)[:, None] + (seqlen_k - seqlen_q)
    j = torch.arange(seqlen_k, device=device)[None, :]
    mask = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    if left >= 0:
        mask &= j >= i - left
    if right >= 0:
        mask &= j <= i + right
    return mask


def reference(q, k, v, causal=False, window=(-1, -1), softcap=0.0, scale=None, upcast=True):
    """(out BSHD, lse [B, H, Sq]) computed the obvious way. upcast=True: fp32 from the rounded
    inputs (the oracle). upcast=False: scores and P rounded to the input dtype, as a naive
    same-precision implementation would; its error sets the tolerance."""
    dtype = torch.float32 if upcast else q.dtype
    qh, kh, vh = (t.to(dtype).transpose(1, 2) for t in (q, k, v))
    group = q.shape[2] // k.shape[2]
    kh, vh = kh.repeat_interleave(group, dim=1), vh.repeat_interleave(group, dim=1)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    scores = (qh @ kh.transpose(-1, -2)).float() * scale
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    mask = visible(q.shape[1], k.shape[1], causal, window, q.device)
    scores = scores.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # fully masked rows: out = 0
    out = (probs.to(dtype) @ vh).transpose(1, 2)
    return out, lse


def sdpa_math(q, k, v, causal, window, scale=None):
    """torch SDPA, math backend, on fp32 upcasts (no softcap there)."""
    mask = visible(q.shape[1], k.shape[1], causal, window, q.device)
    qh, kh, vh = (t.float().transpose(1, 2) for t in (q, k, v))
    with sdpa_kernel(SDPBackend.MATH):
        out = F.scaled_dot_product_attention(
            qh, kh, vh, attn_mask=mask, scale=scale, enable_gqa=q.shape[2] != k.shape[2]
        )
    return out.transpose(1, 2).nan_to_num(0.0)


def inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, seed=0):
    """Random BSHD q, k, v; `seed` offsets this run's RUN_SEED (distinct seeds, distinct data)."""
    generator = torch.Generator(device="cuda").manual_seed(RUN_SEED + seed)
    make = lambda s, h: torch.randn(  # noqa: E731
        batch, s, h, head_dim, device="cuda", dtype=dtype, generator=generator
    )
    return make(seqlen_q, heads_q), make(seqlen_k, heads_kv), make(seqlen_k, heads_kv)


def assert_matches(out, q, k, v, **options):
    """out within 2x a naive same-precision implementation's error (plus a rounding term) of the
    fp32 reference, as FlashAttention's tests bound it."""
    ref, _ = reference(q, k, v, **options)
    naive, _ = reference(q, k, v, upcast=False, **options)
    atol = torch.finfo(q.dtype).eps
    error = (out.float() - ref).abs().max().item()
    naive_error = (naive.float() - ref).abs().max().item()
    assert error <= 2 * naive_error + atol, (
        f"max error {error:.3g}, naive {naive_error:.3g} (FLASHCORE_TEST_SEED={RUN_SEED})"
    )


def assert_lse_matches(lse, q, k, v, **options):
    _, ref = reference(q, k, v, **options)
    assert lse.dtype == torch.float32 and lse.shape == ref.shape and lse.is_contiguous()
    torch.testing.assert_close(
        lse, ref, atol=2e-3, rtol=1e-3, msg=lambda m: f"{m}\n(FLASHCORE_TEST_SEED={RUN_SEED})"
    )


MASKS = {
    "none": dict(),
    "causal": dict(causal=True),
    "window": dict(window=(48, 16)),
    "causal_window": dict(causal=True, window=(40, -1)),
    "softcap": dict(softcap=30.0),
    "causal_softcap": dict(causal=True, softcap=5.0),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("head_dim", [64, 128, 256])
@pytest.mark.parametrize("mask", list(MASKS))
@pytest.mark.parametrize("heads_kv", [8, 2, 1], ids=["mha", "gqa4", "mqa"])
@pytest.mark.parametrize("seqlens", [(128, 128), (113, 203), (203, 113)], ids=str)
def test_matches_reference(dtype, head_dim, mask, heads_kv, seqlens):
    options = MASKS[mask]
    q, k, v = inputs(2, *seqlens, 8, heads_kv, head_dim, dtype)
    out, lse = flashcore.attention(q, k, v, return_lse=True, **options)
    assert out.shape == q.shape and out.dtype == dtype and out.is_contiguous()
    assert flashcore.last_provider() in flashcore.providers()
    assert_matches(out, q, k, v, **options)
    assert_lse_matches(lse, q, k, v, **options)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mask", ["none", "causal", "window"])
def test_reference_agrees_with_sdpa_math(dtype, mask):
    # The oracle above is ours; SDPA's math backend on fp32 upcasts is the independent one.
    options = MASKS[mask]
    q, k, v = inputs(2, 150, 150, 8, 2, 64, dtype)
    out = flashcore.attention(q, k, v, **options)
    sdpa = sdpa_math(q, k, v, options.get("causal", False), options.get("window", (-1, -1)))
    torch.testing.assert_close(reference(q, k, v, **options)[0], sdpa, atol=1e-5, rtol=1e-5)
    assert_matches(out, q, k, v, **options)


@pytest.mark.parametrize("provider", ["auto", *flashcore.providers()])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mask", ["none", "causal", "causal_softcap"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_every_provider(provider, dtype, mask, head_dim):
    options = MASKS[mask]
    q, k, v = inputs(1, 257, 257, 4, 2, head_dim, dtype)
    try:
        out, lse = flashcore.attention(q, k, v, backend=provider, return_lse=True, **options)
    except ValueError as error:
        pytest.skip(f"{provider} does not implement this problem on this GPU: {error}")
    if provider != "auto":
        assert flashcore.last_provider() == provider
    assert_matches(out, q, k, v, **options)
    assert_lse_matches(lse, q, k, v, **options)


# (provider, tile): each backend's own tiles, the Hopper ones also by their deprecated names.
TILE_CHOICES = [
    ("sm80", "auto"),
    ("sm80", "large"),
    ("sm80", "small"),
    ("sm80", "medium"),
    ("sm90", "auto"),
    ("sm90", "large"),
    ("sm90", "small"),
    ("sm90", "medium"),
    ("sm90", "cta-pair"),
    ("sm90", "warpgroup"),
    ("sm90", "warpgroup-pair"),
]


@pytest.mark.parametrize("provider, tile", TILE_CHOICES)
@pytest.mark.parametrize("num_splits", [0, 1, 3])
@pytest.mark.parametrize("mask", ["none", "causal", "window"])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_tile_and_split_choices(provider, tile, num_splits, mask, head_dim):
    # A small grid (auto picks the small tile and splits keys), ragged lengths, GQA: every forced
    # choice must compute the same attention.
    options = MASKS[mask]
    q, k, v = inputs(1, 77, 517, 4, 2, head_dim, torch.float16)
    sm90_gpu = torch.cuda.get_device_capability() == (9, 0)
    if provider == "sm90" and not sm90_gpu:
        with pytest.raises(ValueError, match="sm_90|90a"):
            flashcore.attention(q, k, v, backend=provider, num_splits=num_splits, tile=tile)
        return
    hopper_tile = tile in ("medium", "cta-pair", "warpgroup", "warpgroup-pair")
    if provider == "sm80" and hopper_tile:
        with pytest.raises(ValueError, match="runs on backend sm90"):
            flashcore.attention(q, k, v, backend=provider, num_splits=num_splits, tile=tile)
        return
    if hopper_tile and head_dim != 64:
        with pytest.raises(ValueError, match="for head_dim 64 only"):
            flashcore.attention(q, k, v, backend=provider, num_splits=num_splits, tile=tile)
        return
    if tile in ("cta-pair", "warpgroup-pair") and num_splits > 1:
        with pytest.raises(ValueError, match="num_splits 0 or 1"):
            flashcore.attention(q, k, v, backend=provider, num_splits=num_splits, tile=tile)
        return
    out, lse = flashcore.attention(
        q, k, v, backend=provider, num_splits=num_splits, tile=tile, return_lse=True, **options
    )
    assert flashcore.last_provider() == provider
    assert_matches(out, q, k, v, **options)
    assert_lse_matches(lse, q, k, v, **options)


def test_scale_and_bhsd_strides_and_out():
    q, k, v = inputs(2, 96, 96, 4, 4, 64, torch.bfloat16)
    # BHSD storage, passed as BSHD views: no copy.
    qb, kb, vb = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
    assert qb.stride(2) == 96 * 64
    out = torch.full_like(q, 7.0)
    result = flashcore.attention(qb, kb, vb, softmax_scale=0.3, causal=True, out=out)
    assert result is out
    assert_matches(out, q, k, v, causal=True, scale=0.3)


def test_custom_op_opcheck():
    q, k, v = inputs(1, 64, 64, 4, 2, 64, torch.float16)
    torch.library.opcheck(
        torch.ops.flashcore.attention.default, (q, k, v, True, 0.0, -1, -1, 0.0, "auto")
    )
    torch.library.opcheck(
        torch.ops.flashcore.attention.default, (q, k, v, True, 0.0, -1, -1, 0.0, "auto", 2, "small")
    )


def test_torch_compile_fullgraph():
    q, k, v = inputs(2, 128, 128, 8, 2, 128, torch.bfloat16)

    def f(q, k, v):
        out, lse = flashcore.attention(q, k, v, causal=True, return_lse=True)
        return out * 2, lse + 1

    # fullgraph=True fails on any graph break.
    compiled = torch.compile(f, fullgraph=True)
    out, lse = compiled(q, k, v)
    eager_out, eager_lse = f(q, k, v)
    torch.testing.assert_close(out, eager_out, atol=0, rtol=0)
    torch.testing.assert_close(lse, eager_lse, atol=0, rtol=0)


def test_torch_compile_reduce_overhead_cuda_graphs():
    q, k, v = inputs(1, 256, 256, 8, 8, 64, torch.float16)
    compiled = torch.compile(
        lambda q, k, v: flashcore.attention(q, k, v, window=(32, 0)),
        mode="reduce-overhead",
        fullgraph=True,
    )
    for seed in range(3):  # warm-up, record, replay
        q, k, v = inputs(1, 256, 256, 8, 8, 64, torch.float16, seed=seed)
        out = compiled(q, k, v).clone()
        assert_matches(out, q, k, v, window=(32, 0))


def test_cuda_graph_capture_and_replay():
    q, k, v = inputs(2, 200, 200, 8, 4, 64, torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the capture, as torch's docs ask
        flashcore.attention(q, k, v, causal=True)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = flashcore.attention(q, k, v, causal=True, return_lse=True)
    for seed in (1, 2):
        fresh = inputs(2, 200, 200, 8, 4, 64, torch.bfloat16, seed=seed)
        for static, new in zip((q, k, v), fresh):
            static.copy_(new)
        graph.replay()
        torch.cuda.synchronize()
        assert_matches(out, q, k, v, causal=True)
        assert_lse_matches(lse, q, k, v, causal=True)


@pytest.mark.parametrize("enable_pdl", [True, False])
@pytest.mark.parametrize("graphed", [False, True])
@pytest.mark.parametrize("heads, num_splits", [(8, 0), (8, 3), (32, 0)])
def test_back_to_back_dependent_calls(enable_pdl, graphed, heads, num_splits):
    # Each call reads the previous call's output as its V, with no sync between them: under
    # programmatic dependent launch a call may start early and must wait before touching memory.
    # On an H100, B1 S512 hd64 takes sm90's small tile (with 3 splits also the combine kernel);
    # 32 heads take its cluster-pair tile.
    q, k, v = inputs(1, 512, 512, heads, heads, 64, torch.float16)
    outs = [torch.empty_like(v) for _ in range(3)]

    def run():
        values = v
        for out in outs:
            flashcore.attention(q, k, values, out=out, num_splits=num_splits, enable_pdl=enable_pdl)
            values = out

    if graphed:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up off the capture
            run()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run()
        for out in outs:
            out.fill_(float("nan"))
        graph.replay()
    else:
        run()
    torch.cuda.synchronize()
    values = v
    for out in outs:
        assert_matches(out, q, k, values)
        values = out


def test_runs_on_the_current_stream_without_syncing():
    q, k, v = inputs(2, 512, 512, 8, 8, 64, torch.float16)
    flashcore.attention(q, k, v)  # warm-up: device properties are queried once
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    staged = [torch.zeros_like(t) for t in (q, k, v)]
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        # The side stream is busy, then fills the inputs. Launched anywhere but on this stream,
        # the kernel would read the zeros; a device-wide sync in the call would wait for the sleep.
        torch.cuda._sleep(200_000_000)
        for dst, src in zip(staged, (q, k, v)):
            dst.copy_(src)
        out = flashcore.attention(*staged)
        assert not side.query(), "the call waited for the GPU"
    torch.cuda.current_stream().wait_stream(side)
    assert_matches(out, q, k, v)


def test_explicit_stream_argument():
    q, k, v = inputs(1, 300, 300, 4, 4, 64, torch.float16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    out = torch.empty_like(q)
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)
    flashcore.attention(q, k, v, out=out, stream=side.cuda_stream)
    torch.cuda.current_stream().wait_stream(side)
    assert_matches(out, q, k, v)


def test_workspace_comes_from_the_callable_only_when_needed():
    """The extension calls a workspace callable (torch's caching allocator in flashcore's torch
    layer) once, with workspace_size's bytes, when the chosen kernel needs scratch (split-KV's
    partials), and not at all when it needs none; a short or non-array result is refused before
    any launch."""
    from flashcore import _core

    q, k, v = inputs(2, 1, 4097, 8, 2, 128, torch.bfloat16)
    out = torch.full_like(q, float("nan"))
    lse = torch.full((2, 8, 1), float("nan"), device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    split = ("auto", 4, "auto", True)
    args = (q, k, v, out, lse, 0.0, False, (-1, -1), 0.0)
    needed = _core.workspace_size(*args, split)
    assert needed > 0, "a 4-way split needs scratch for its partials"
    requests = []

    def allocate(nbytes):
        requests.append(nbytes)
        return torch.full((nbytes,), 0xAB, dtype=torch.uint8, device="cuda")  # poisoned

    _core.run(*args, split, stream, allocate)
    assert requests == [needed]
    assert_matches(out, q, k, v)
    assert_lse_matches(lse, q, k, v)

    unsplit = ("auto", 1, "auto", True)
    assert _core.workspace_size(*args, unsplit) == 0
    requests.clear()
    out.fill_(float("nan"))
    _core.run(*args, unsplit, stream, allocate)
    assert requests == []
    assert_matches(out, q, k, v)

    out.fill_(float("nan"))
    with pytest.raises(ValueError, match=f"returned 1 bytes for a request of {needed}"):
        _core.run(*args, split, stream, lambda n: torch.empty(1, dtype=torch.uint8, device="cuda"))
    with pytest.raises(TypeError, match="the workspace allocator's result is a str"):
        _core.run(*args, split, stream, lambda n: "scratch")
    torch.cuda.synchronize()
    assert out.isnan().all(), "a refused call launched"


class DLPackOnly:
    """Speaks only DLPack, as CuPy and JAX arrays do: exercises the non-torch path."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, *args, **kwargs):
        return self.tensor.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def test_any_dlpack_producer():
    q, k, v = inputs(1, 128, 128, 4, 1, 128, torch.bfloat16)
    out = torch.empty_like(q)
    lse = torch.empty(1, 4, 128, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    wrapped = [DLPackOnly(t) for t in (q, k, v, out, lse)]
    with pytest.raises(TypeError, match="pass out="):
        flashcore.attention(*wrapped[:3])
    result = flashcore.attention(
        *wrapped[:3], out=wrapped[3], lse_out=wrapped[4], return_lse=True, stream=stream
    )
    assert result[0] is wrapped[3]
    torch.cuda.current_stream().synchronize()
    assert_matches(out, q, k, v)
    assert_lse_matches(lse, q, k, v)


def test_torch_tensors_take_the_c_exchange_api(monkeypatch):
    """Where torch publishes DLPack's C exchange API, exact torch.Tensor arguments reach the
    extension through it (python/src/dlpack_arrays.hpp): no Tensor.__dlpack__ and no to_dlpack
    capsule, with views' strides and storage offsets kept. A subclass still goes through its own
    __dlpack__, as before."""
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip("SKIPPED: this torch publishes no DLPack C exchange API (torch < 2.10)")
    from flashcore import _core

    assert _core.torch_capsules is None, "torch has the exchange API but tensors go as capsules"
    exported = []
    own_dlpack = torch.Tensor.__dlpack__

    def counted_dlpack(self, *args, **kwargs):
        exported.append(type(self).__name__)
        return own_dlpack(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "__dlpack__", counted_dlpack)
    # q a BHSD view at a storage offset, k and v BSHD: strides and offsets come through the table.
    q_store, k, v = inputs(1, 130, 128, 4, 2, 64, torch.float16)
    q_bhsd = q_store.transpose(1, 2).contiguous()[:, :, 2:]
    q = q_bhsd.transpose(1, 2)
    assert q.storage_offset() > 0 and not q.is_contiguous()
    out = torch.full_like(q, float("nan"))
    lse = torch.full((1, 4, 128), float("nan"), device="cuda")
    flashcore.attention(q, k, v, causal=True, out=out, lse_out=lse, return_lse=True)
    assert exported == [], f"__dlpack__ ran for {exported}"
    assert_matches(out, q, k, v, causal=True)
    assert_lse_matches(lse, q, k, v, causal=True)

    class Subclass(torch.Tensor):
        pass

    sub_out = torch.full_like(q, float("nan"))
    flashcore.attention(q.as_subclass(Subclass), k, v, causal=True, out=sub_out)
    assert exported and set(exported) == {"Subclass"}, f"__dlpack__ ran for {exported}"
    assert torch.equal(sub_out, out)
    # Under no_grad a tensor that requires grad goes detached, through the table as well.
    exported.clear()
    grad_out = torch.full_like(q, float("nan"))
    with torch.no_grad():
        flashcore.attention(q.detach().requires_grad_(), k, v, causal=True, out=grad_out)
    assert exported == [], f"__dlpack__ ran for {exported}"
    assert torch.equal(grad_out, out)


def bad_calls():
    q, k, v = inputs(1, 64, 64, 4, 2, 64, torch.float16)
    wide = torch.zeros(1, 64, 4, 128, device="cuda", dtype=torch.float16)
    flat = torch.zeros(1 * 64 * 4 * 64 + 1, device="cuda", dtype=torch.float16)
    return [
        ((q, k.cpu(), v), {}, ValueError, r"k is on cpu"),
        ((q, k, v.bfloat16()), {}, TypeError, r"v has dtype bfloat16 but q has float16"),
        ((q.float(), k, v), {}, TypeError, r"q has dtype float32"),
        (
            (q, k[:, :, :1].expand(1, 64, 3, 64), v[:, :, :1].expand(1, 64, 3, 64)),
            {},
            ValueError,
            r"q has 4 heads and k, v have 3",
        ),
        ((wide[..., ::2], k, v), {}, ValueError, r"q has last-dim stride 2"),
        ((flat[1:].view(1, 64, 4, 64), k, v), {}, ValueError, r"q pointer is not 16-byte aligned"),
        ((q, k, v), dict(softcap=-1.0), ValueError, r"softcap"),
        ((q, k, v), dict(window=(-2, 0)), ValueError, r"window"),
        ((q, k, v), dict(causal=True, window=(-1, 4)), ValueError, r"causal"),
        (
            (torch.zeros(1, 8, 2, 100, device="cuda", dtype=torch.float16),) * 3,
            {},
            ValueError,
            r"head_dim 100",
        ),
    ]


@pytest.mark.parametrize("case", range(len(bad_calls())))
def test_bad_arguments_raise_and_launch_nothing(case):
    args, kwargs, error, message = bad_calls()[case]
    out = torch.full(args[0].shape, 7.0, device="cuda", dtype=args[1].dtype)
    with pytest.raises(error, match=message):
        flashcore.attention(*args, out=out if args[0].dtype == out.dtype else None, **kwargs)
    torch.cuda.synchronize()
    assert bool((out == 7.0).all()), "a rejected call wrote its output"


def test_requires_grad_refuses_out_and_stream():
    """Gradients go through the custom op (tests/python/test_backward_gpu.py), which writes its own
    out and runs on the current stream."""
    q, k, v = inputs(1, 64, 64, 4, 4, 64, torch.float16)
    q.requires_grad_()
    with pytest.raises(ValueError, match="not differentiable"):
        flashcore.attention(q, k, v, out=torch.empty_like(q))
    with pytest.raises(ValueError, match="stream= is not supported"):
        flashcore.attention(q, k, v, stream=torch.cuda.current_stream().cuda_stream)
    with torch.no_grad():
        flashcore.attention(q, k, v)
