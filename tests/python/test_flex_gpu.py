"""flashcore.flex_attention, create_block_mask, attention_varlen and flashcore.mods on a GPU
through torch, against a float32 reference that evaluates the SAME mod objects (their torch
__call__) densely; a torch BlockMask built from a flashcore mod is used zero-copy. Fresh inputs
every run (the seed is in every failure); outputs start as NaN."""

import os
import secrets

import pytest

torch = pytest.importorskip(
    "torch", reason="SKIPPED: torch is not installed, so no GPU test of flashcore runs"
)
if not torch.cuda.is_available():
    pytest.skip("SKIPPED: torch sees no CUDA device, so no GPU test of flashcore runs",
                allow_module_level=True)

import flashcore  # noqa: E402
from flashcore import mods  # noqa: E402

RUN_SEED = int(os.environ.get("FLASHCORE_TEST_SEED", secrets.randbelow(2**31)))
TOLERANCE = {torch.float16: 5e-3, torch.bfloat16: 1e-2}
LSE_TOLERANCE = 1e-2


def reference(q, k, v, mask_mod=None, score_mod=None, block_mask=None, sinks=None):
    """(out, lse) in float32, BHSD; masks evaluated per element (Sq == Sk), block lists as
    PyTorch defines them (full blocks skip mask_mod)."""
    B, Hq, S, D = q.shape
    group = Hq // k.shape[1]
    kf = k.float().repeat_interleave(group, 1)
    vf = v.float().repeat_interleave(group, 1)
    scores = (q.float() @ kf.transpose(-1, -2)) * D**-0.5
    b = torch.arange(B, device=q.device)[:, None, None, None]
    h = torch.arange(Hq, device=q.device)[None, :, None, None]
    qi = torch.arange(S, device=q.device)[None, None, :, None]
    ki = torch.arange(k.shape[2], device=q.device)[None, None, None, :]
    if score_mod is not None:
        scores = score_mod(scores, b, h, qi, ki)
    visible = torch.ones_like(scores, dtype=torch.bool)
    if mask_mod is not None:
        visible = mask_mod(b, h, qi, ki).expand_as(scores)
    if block_mask is not None:
        # Per KV block of each query block: 0 not listed, 1 partial, 2 full.
        qb, kb = block_mask.BLOCK_SIZE
        state = torch.zeros(block_mask.kv_indices.shape, dtype=torch.int8, device=q.device)
        position = torch.arange(state.shape[-1], device=q.device)
        for counts, indices, value in ((block_mask.kv_num_blocks, block_mask.kv_indices, 1),
                                       (block_mask.full_kv_num_blocks, block_mask.full_kv_indices,
                                        2)):
            if counts is None:
                continue
            listed = ((position < counts[..., None]) * value).to(torch.int8)
            state.scatter_reduce_(-1, indices.long(), listed, reduce="amax")
        per_element = state.expand(B, Hq, *state.shape[2:])
        per_element = per_element.repeat_interleave(qb, 2).repeat_interleave(kb, 3)
        per_element = per_element[:, :, :S, : k.shape[2]]
        visible = (per_element == 2) | ((per_element == 1) & visible)
    scores = scores.masked_fill(~visible, float("-inf"))
    if sinks is not None:
        sink = sinks.float()[None, :, None, None].expand(B, Hq, S, 1)
        scores = torch.cat([scores, sink], -1)
        vf = torch.cat([vf, torch.zeros_like(vf[:, :, :1])], 2)
    lse = torch.logsumexp(scores, -1)
    p = torch.exp(scores - lse[..., None]).nan_to_num(0.0)
    return p @ vf, lse


def check(out, lse, ref_out, ref_lse, dtype, what):
    assert torch.isfinite(out).all(), f"{what}: NaN/inf in out (seed {RUN_SEED})"
    err = ((out.float() - ref_out).norm() / ref_out.norm()).item()
    assert err <= TOLERANCE[dtype], f"{what}: rel L2 {err:.2e} (seed {RUN_SEED})"
    finite = torch.isfinite(ref_lse)
    assert (lse[~finite] == float("-inf")).all(), f"{what}: masked rows' lse (seed {RUN_SEED})"
    lse_err = (lse[finite] - ref_lse[finite]).abs().max().item()
    assert lse_err <= LSE_TOLERANCE, f"{what}: lse error {lse_err:.2e} (seed {RUN_SEED})"


def varlen_provider():
    """The backend auto picks for varlen batches and 128-key BlockMasks: sm90 on an sm_90 GPU
    (varlen without a flex part on its persistent kernel, at every head dim; flex problems on its
    flex kernels, up to head dim 256), sm80 elsewhere."""
    hopper = torch.cuda.get_device_capability()[0] == 9 and "sm90" in flashcore.providers()
    return "sm90" if hopper else "sm80"


def inputs(dtype, B=2, Hq=4, Hkv=2, S=300, D=128):
    g = torch.Generator(device="cuda").manual_seed(RUN_SEED)
    return [torch.randn(B, h, S, D, dtype=dtype, device="cuda", generator=g)
            for h in (Hq, Hkv, Hkv)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("block_size", [64, 128])
def test_mods_match_the_reference(dtype, block_size):
    q, k, v = inputs(dtype)
    B, Hq, S = q.shape[:3]
    g = torch.Generator(device="cuda").manual_seed(RUN_SEED + 1)
    docs = torch.randint(0, 5, (B, S), device="cuda", generator=g).sort(-1).values.int()
    slopes = torch.rand(Hq, device="cuda", generator=g)
    table = torch.randn(Hq, 2 * S - 1, device="cuda", generator=g)
    sinks = torch.randn(Hq, device="cuda", generator=g)
    cases = {
        "documents_causal": (mods.and_masks(mods.causal(), mods.documents(docs)), None, None),
        "prefix_alibi": (mods.prefix_lm(90), mods.alibi(slopes), None),
        "window_bias_softcap_sinks": (mods.sliding_window(64),
                                      mods.compose(mods.relative_bias(table), mods.softcap(8.0)),
                                      sinks),
    }
    for name, (mask_mod, score_mod, sink) in cases.items():
        block_mask = flashcore.create_block_mask(mask_mod, B, None, S, S, BLOCK_SIZE=block_size)
        out, lse = flashcore.flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask,
                                            enable_gqa=True, return_lse=True, sinks=sink)
        # The sm90 flex kernel takes 64- and 128-key blocks (64-key ones two to a tile). A
        # window's own BlockMask is dropped (the window walks itself).
        assert flashcore.last_provider() == varlen_provider()
        ref_out, ref_lse = reference(q, k, v, mask_mod, score_mod, sinks=sink)
        check(out, lse, ref_out, ref_lse, dtype, name)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("mask", ["causal", "window_128"])
def test_sinks_alone_on_a_large_grid(dtype, D, mask):
    """gpt-oss's attention (sinks, GQA, causal or its 128-token window) on a grid large enough for
    sm90's persistent kernel, whose sinks variant runs it on an H100/H200 (the C++ SinksSm90Dense
    tests assert that routing): against the reference with the sinks in the denominator and in
    LSE, and bitwise against a second call."""
    q, k, v = inputs(dtype, B=1, Hq=32, Hkv=8, S=1000, D=D)
    g = torch.Generator(device="cuda").manual_seed(RUN_SEED + 2)
    sinks = 2 * torch.randn(32, device="cuda", generator=g)
    mask_mod = mods.causal() if mask == "causal" else mods.sliding_window(127)
    block_mask = flashcore.create_block_mask(mask_mod, None, None, 1000, 1000)
    runs = [flashcore.flex_attention(q, k, v, block_mask=block_mask, enable_gqa=True,
                                     return_lse=True, sinks=sinks) for _ in range(2)]
    assert flashcore.last_provider() == varlen_provider()
    (out, lse), (again, lse_again) = runs
    assert torch.equal(out, again) and torch.equal(lse, lse_again), f"seed {RUN_SEED}"
    ref_out, ref_lse = reference(q, k, v, mask_mod, None, sinks=sinks)
    check(out, lse, ref_out, ref_lse, dtype, f"sinks alone, {mask}, hd{D}")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("D", [64, 96])
def test_sinks_alone_at_decode(dtype, D):
    """gpt-oss's decode step with sinks (one query per sequence, 64 query heads over 8 KV heads):
    the dense decode kernels then the sinks' rescale on an H100/H200 (the C++ SinksSm90Rescaled
    tests assert that routing); against the reference, O the same bits with LSE asked or not."""
    g = torch.Generator(device="cuda").manual_seed(RUN_SEED + 3)
    q = torch.randn(4, 64, 1, D, dtype=dtype, device="cuda", generator=g)
    k, v = (torch.randn(4, 8, 3001, D, dtype=dtype, device="cuda", generator=g) for _ in range(2))
    sinks = 2 * torch.randn(64, device="cuda", generator=g)
    out, lse = flashcore.flex_attention(q, k, v, enable_gqa=True, return_lse=True, sinks=sinks)
    alone = flashcore.flex_attention(q, k, v, enable_gqa=True, sinks=sinks)
    assert torch.equal(out, alone), f"O depends on return_lse (seed {RUN_SEED})"
    ref_out, ref_lse = reference(q, k, v, None, None, sinks=sinks)
    check(out, lse, ref_out, ref_lse, dtype, f"decode with sinks, hd{D}")


@pytest.mark.parametrize("block_size", [64, 128])
@pytest.mark.parametrize("window", [(-1, 0), (100, 0), (37, 5)])
def test_a_windows_own_block_mask_runs_the_window_path(window, block_size):
    """A BlockMask that create_block_mask built from a window-only mask_mod: flex_attention runs
    the dense kernels' window path, bitwise what attention(window=...) gives, on the dense
    provider even for 64-key blocks; once its lists are replaced it walks them again."""
    q, k, v = inputs(torch.bfloat16, S=1000)
    B, Hq, S = q.shape[:3]
    mask_mod = mods.sliding_window(*window)
    block_mask = flashcore.create_block_mask(mask_mod, B, None, S, S, BLOCK_SIZE=block_size)
    out, lse = flashcore.flex_attention(q, k, v, block_mask=block_mask, enable_gqa=True,
                                        return_lse=True)
    provider = flashcore.last_provider()
    # The decision itself (the kernels' bits alone might not tell the two walks apart).
    assert "block_mask" not in flashcore.flex._mask_parts(block_mask, S, S)[1]
    dense = flashcore.attention(*(x.transpose(1, 2) for x in (q, k, v)), window=window)
    assert provider == flashcore.last_provider(), "not the dense kernels' window path"
    assert torch.equal(out, dense.transpose(1, 2)), f"differs from attention(window={window})"
    ref_out, ref_lse = reference(q, k, v, mask_mod)
    check(out, lse, ref_out, ref_lse, torch.bfloat16, f"window {window}, own BlockMask")

    # The same lists as a new tensor: flashcore cannot tell they were not edited, so it walks
    # them (on sm90 for either block size).
    block_mask.kv_indices = block_mask.kv_indices.clone()
    assert "block_mask" in flashcore.flex._mask_parts(block_mask, S, S)[1]
    walked, walked_lse = flashcore.flex_attention(q, k, v, block_mask=block_mask,
                                                  enable_gqa=True, return_lse=True)
    assert flashcore.last_provider() == varlen_provider()
    # (reference() reads no flashcore lists: their entries past each count are not initialized.)
    check(walked, walked_lse, ref_out, ref_lse, torch.bfloat16, f"window {window}, walked lists")


def test_torch_block_mask_is_used_as_it_is():
    flex = pytest.importorskip("torch.nn.attention.flex_attention",
                               reason="SKIPPED: this torch has no FlexAttention")
    q, k, v = inputs(torch.bfloat16, Hq=2, Hkv=2, S=256)
    mask_mod = mods.causal()
    block_mask = flex.create_block_mask(mask_mod, 2, None, 256, 256, device="cuda")
    out, lse = flashcore.flex_attention(q, k, v, block_mask=block_mask, return_lse=True)
    ref_out, ref_lse = reference(q, k, v, mask_mod, block_mask=block_mask)
    check(out, lse, ref_out, ref_lse, torch.bfloat16, "torch BlockMask")
    torch_out = flex.flex_attention(q, k, v, block_mask=block_mask)
    err = ((out.float() - torch_out.float()).norm() / torch_out.float().norm()).item()
    assert err <= TOLERANCE[torch.bfloat16], f"vs torch flex_attention: {err:.2e}"


def test_flex_runs_on_the_current_stream_without_syncing():
    """create_block_mask and flex_attention launch on torch's current stream (read through its raw
    handle since session 43) and never wait for the GPU: on a side stream that is busy and then
    fills the inputs, a launch anywhere else would read the zeros, and a synchronization in the
    call would wait for the sleep."""
    q, k, v = inputs(torch.bfloat16, S=300)
    docs = (torch.arange(300, device="cuda") // 70).int()[None].expand(2, 300).contiguous()
    mask_mod = mods.and_masks(mods.documents(docs), mods.causal())
    score_mod = mods.alibi(torch.rand(4, device="cuda") * 0.1)
    flashcore.flex_attention(q, k, v, score_mod=score_mod, enable_gqa=True)  # warm-up
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    staged = [torch.zeros_like(t) for t in (q, k, v)]
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        for dst, src in zip(staged, (q, k, v)):
            dst.copy_(src)
        block_mask = flashcore.create_block_mask(mask_mod, 2, None, 300, 300)
        out, lse = flashcore.flex_attention(*staged, score_mod=score_mod, block_mask=block_mask,
                                            enable_gqa=True, return_lse=True)
        assert not side.query(), "the call waited for the GPU"
    torch.cuda.current_stream().wait_stream(side)
    ref_out, ref_lse = reference(q, k, v, mask_mod, score_mod, block_mask=block_mask)
    check(out, lse, ref_out, ref_lse, torch.bfloat16, "side stream")


def check_each_causal_sequence(out, lse, packed, lengths, dtype, label):
    """A causal varlen result (packed [total, H, D], LSE [H, total]) against the reference of
    each non-empty sequence alone."""
    start = 0
    for n in lengths:
        if n:
            seq = [x[start:start + n].transpose(0, 1)[None] for x in packed]
            ref_out, ref_lse = reference(*seq, mods.causal())
            check(out[start:start + n].transpose(0, 1)[None], lse[:, start:start + n][None],
                  ref_out, ref_lse, dtype, f"{label} of {n}")
        start += n


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_varlen_matches_each_sequence_alone(dtype):
    lengths = [0, 1, 7, 300, 64]
    Hq, Hkv, D = 4, 2, 64
    g = torch.Generator(device="cuda").manual_seed(RUN_SEED + 2)
    total = sum(lengths)
    q = torch.randn(total, Hq, D, dtype=dtype, device="cuda", generator=g)
    k = torch.randn(total, Hkv, D, dtype=dtype, device="cuda", generator=g)
    v = torch.randn(total, Hkv, D, dtype=dtype, device="cuda", generator=g)
    cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).int()
    out, lse = flashcore.attention_varlen(q, k, v, cu, cu, max(lengths), max(lengths),
                                          causal=True, return_lse=True)
    assert flashcore.last_provider() == varlen_provider()
    check_each_causal_sequence(out, lse, (q, k, v), lengths, dtype, "sequence")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_head_dim_256_runs_flex_and_varlen(dtype):
    """Head dims above 128 (Gemma's 256): flex problems run on the hd256 flex kernels (sm90's
    64-key tiles on an sm_90 GPU, sm80's elsewhere), here a causal documents BlockMask with ALiBi
    and sinks; a varlen batch with empty and one-token sequences runs where varlen runs (sm90's
    persistent kernel on an sm_90 GPU)."""
    q, k, v = inputs(dtype, Hq=4, Hkv=2, S=300, D=256)
    B, Hq, S = q.shape[:3]
    g = torch.Generator(device="cuda").manual_seed(RUN_SEED + 3)
    docs = torch.randint(0, 4, (B, S), device="cuda", generator=g).sort(-1).values.int()
    slopes = torch.rand(Hq, device="cuda", generator=g)
    sinks = torch.randn(Hq, device="cuda", generator=g)
    mask_mod = mods.and_masks(mods.causal(), mods.documents(docs))
    block_mask = flashcore.create_block_mask(mask_mod, B, None, S, S)
    out, lse = flashcore.flex_attention(q, k, v, score_mod=mods.alibi(slopes),
                                        block_mask=block_mask, enable_gqa=True,
                                        return_lse=True, sinks=sinks)
    assert flashcore.last_provider() == varlen_provider()
    ref_out, ref_lse = reference(q, k, v, mask_mod, mods.alibi(slopes), sinks=sinks)
    check(out, lse, ref_out, ref_lse, dtype, "hd256 documents, ALiBi, sinks")

    lengths = [0, 1, 7, 300]
    total = sum(lengths)
    qp, kp, vp = (torch.randn(total, h, 256, dtype=dtype, device="cuda", generator=g)
                  for h in (Hq, 2, 2))
    cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).int()
    out, lse = flashcore.attention_varlen(qp, kp, vp, cu, cu, max(lengths), max(lengths),
                                          causal=True, return_lse=True)
    assert flashcore.last_provider() == varlen_provider()
    check_each_causal_sequence(out, lse, (qp, kp, vp), lengths, dtype,
                               "hd256 varlen sequence")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_decode_splits_the_keys_with_sinks_and_replays_in_a_graph(dtype):
    """Decode (one query per batch and head over 4097 keys, 4 query heads per kv head) with ALiBi
    and sinks: it runs on the sm80 flex kernel on every GPU (auto leaves it there on an sm_90
    one), the group's query heads packed into one tile (a slope and a sink per row) and split
    over the keys, the sink joining once per row in the combine; the call, whose split needs a
    workspace, also replays inside a CUDA graph."""
    g = torch.Generator(device="cuda").manual_seed(RUN_SEED + 4)
    B, Hq, Hkv, Sk, D = 2, 8, 2, 4097, 128
    q = torch.randn(B, Hq, 1, D, dtype=dtype, device="cuda", generator=g)
    k, v = (torch.randn(B, Hkv, Sk, D, dtype=dtype, device="cuda", generator=g) for _ in range(2))
    slopes = torch.rand(Hq, device="cuda", generator=g)
    sinks = torch.randn(Hq, device="cuda", generator=g)

    def alibi_at_the_last_key(score, b, h, q_idx, kv_idx):
        # flashcore aligns queries bottom-right: the one query stands at key Sk - 1.
        return score - slopes[h] * (q_idx + Sk - 1 - kv_idx).abs()

    def call():
        return flashcore.flex_attention(q, k, v, score_mod=mods.alibi(slopes), enable_gqa=True,
                                        return_lse=True, sinks=sinks)

    out, lse = call()
    assert flashcore.last_provider() == "sm80"
    ref_out, ref_lse = reference(q, k, v, score_mod=alibi_at_the_last_key, sinks=sinks)
    check(out, lse, ref_out, ref_lse, dtype, "decode, ALiBi, sinks")

    call()  # warm outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graph_out, graph_lse = call()
    graph_out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    check(graph_out, graph_lse, ref_out, ref_lse, dtype, "decode replayed in a CUDA graph")
