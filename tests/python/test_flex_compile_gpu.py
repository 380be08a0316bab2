"""flashcore.flex_attention and attention_varlen under torch.compile (fullgraph: one graph, the
custom op flashcore::flex_attention) and in CUDA graphs, against the same calls run eagerly. The
kernels are deterministic in the forward, so compiled, replayed and eager results must agree
bitwise; the eager results themselves are checked against references in test_flex_gpu.py and
test_jit_gpu.py. Fresh inputs every run (the seed is in every failure); outputs start as NaN."""

import os
import secrets
import shutil

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
B, HQ, HKV, S, D = 2, 4, 2, 300, 128


def generator(offset=0):
    return torch.Generator(device="cuda").manual_seed(RUN_SEED + offset)


def bhsd_inputs(dtype, offset=0):
    g = generator(offset)
    return [torch.randn(B, h, S, D, dtype=dtype, device="cuda", generator=g)
            for h in (HQ, HKV, HKV)]


def flex_cases():
    """name -> (mask_mod, score_mod, sinks): every built-in part appears in some case."""
    g = generator(100)
    docs = torch.randint(0, 5, (B, S), device="cuda", generator=g).sort(-1).values.int()
    slopes = torch.rand(HQ, device="cuda", generator=g)
    table = torch.randn(HQ, 2 * S - 1, device="cuda", generator=g)
    sinks = torch.randn(HQ, device="cuda", generator=g)
    return {
        "documents_causal_alibi": (mods.and_masks(mods.causal(), mods.documents(docs)),
                                   mods.alibi(slopes), None),
        "prefix_lm_sinks": (mods.prefix_lm(90), None, sinks),
        "window_bias_softcap": (mods.sliding_window(64),
                                mods.compose(mods.relative_bias(table), mods.softcap(8.0)), None),
    }


def assert_same(got, want, what):
    for name, a, b in (("out", got[0], want[0]), ("lse", got[1], want[1])):
        assert a.shape == b.shape, f"{what}: {name} shape {tuple(a.shape)} vs {tuple(b.shape)}"
        assert not a.isnan().any(), f"{what}: NaN in {name} (seed {RUN_SEED})"
        assert torch.equal(a, b), (
            f"{what}: {name} differs from eager, max |diff| "
            f"{(a.float() - b.float()).abs().max().item():.3e} (seed {RUN_SEED})"
        )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_compiled_flex_attention_is_one_graph_and_equals_eager(dtype):
    q, k, v = bhsd_inputs(dtype)
    for name, (mask_mod, score_mod, sinks) in flex_cases().items():
        block_mask = flashcore.create_block_mask(mask_mod, B, None, S, S, BLOCK_SIZE=64)

        def step(q, k, v):
            out, lse = flashcore.flex_attention(q, k, v, score_mod=score_mod,
                                                block_mask=block_mask, enable_gqa=True,
                                                return_lse=True, sinks=sinks)
            return out * 2.0, lse  # an op after it, so the graph is more than the call

        torch._dynamo.reset()
        compiled = torch.compile(step, fullgraph=True)
        out, lse = compiled(q, k, v)
        eager_out, eager_lse = step(q, k, v)
        assert_same((out, lse), (eager_out, eager_lse), f"{name} {dtype}")
        # New values through the same compiled graph (no recompile needed for them).
        q2, k2, v2 = bhsd_inputs(dtype, offset=1)
        assert_same(compiled(q2, k2, v2), step(q2, k2, v2), f"{name} {dtype}, second inputs")


def test_compiled_flex_attention_takes_a_torch_block_mask():
    flex = pytest.importorskip("torch.nn.attention.flex_attention",
                               reason="SKIPPED: this torch has no FlexAttention")
    q, k, v = bhsd_inputs(torch.bfloat16)
    block_mask = flex.create_block_mask(mods.causal(), B, None, S, S, device="cuda")

    def step(q, k, v):
        return flashcore.flex_attention(q, k, v, block_mask=block_mask, enable_gqa=True,
                                        return_lse=True)

    torch._dynamo.reset()
    assert_same(torch.compile(step, fullgraph=True)(q, k, v), step(q, k, v), "torch BlockMask")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_compiled_attention_varlen_equals_eager(dtype):
    lengths = [0, 1, 7, 300, 64]
    g = generator(2)
    total = sum(lengths)
    q = torch.randn(total, HQ, 64, dtype=dtype, device="cuda", generator=g)
    k = torch.randn(total, HKV, 64, dtype=dtype, device="cuda", generator=g)
    v = torch.randn(total, HKV, 64, dtype=dtype, device="cuda", generator=g)
    cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).int()
    slopes = torch.rand(HQ, device="cuda", generator=g)

    def step(q, k, v):
        return flashcore.attention_varlen(q, k, v, cu, cu, max(lengths), max(lengths),
                                          causal=True, score_mod=mods.alibi(slopes),
                                          return_lse=True)

    torch._dynamo.reset()
    out, lse = torch.compile(step, fullgraph=True)(q, k, v)
    assert out.shape == (total, HQ, 64) and lse.shape == (HQ, total)
    assert_same((out, lse), step(q, k, v), f"varlen {dtype}")


def test_compiled_jit_score_mod_equals_eager():
    if shutil.which("nvcc") is None and not os.path.exists("/usr/local/cuda/bin/nvcc"):
        pytest.skip("SKIPPED: no nvcc, so a jit_score_mod cannot be compiled here")
    q, k, v = bhsd_inputs(torch.bfloat16, offset=3)
    bias = torch.randn(HQ, device="cuda", generator=generator(4))
    score_mod = flashcore.jit_score_mod("return score + bias[h] * (q_idx - kv_idx);", bias=bias)
    block_mask = flashcore.create_block_mask(mods.causal(), B, None, S, S)

    def step(q, k, v, bias_scale):
        # The capture is rewritten inside the graph: the op must run after that write.
        bias.mul_(bias_scale)
        return flashcore.flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask,
                                        enable_gqa=True, return_lse=True)

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True)
    original = bias.clone()
    got = compiled(q, k, v, 0.5)
    bias.copy_(original)
    assert_same(got, step(q, k, v, 0.5), "jit_score_mod")


def test_create_block_mask_inside_a_compiled_function():
    """A training step that builds its document mask from the batch's document ids: one graph
    (the custom op flashcore::create_block_mask and the lists' views), bitwise equal to eager,
    the BlockMask's lists too; new ids go through the same graph. A window-only mask built in the
    graph is dropped as in eager."""
    q, k, v = bhsd_inputs(torch.bfloat16, offset=11)
    g = generator(12)

    def documents():
        return torch.randint(0, 6, (B, S), device="cuda", generator=g).sort(-1).values.int()

    def step(q, k, v, doc_ids):
        mask_mod = mods.and_masks(mods.causal(), mods.documents(doc_ids))
        block_mask = flashcore.create_block_mask(mask_mod, B, None, S, S, BLOCK_SIZE=64)
        window = flashcore.create_block_mask(mods.sliding_window(50), None, None, S, S)
        out, lse = flashcore.flex_attention(q, k, v, block_mask=block_mask, enable_gqa=True,
                                            return_lse=True)
        windowed = flashcore.flex_attention(q, k, v, block_mask=window, enable_gqa=True)
        return out, lse, windowed, block_mask.kv_num_blocks, block_mask.kv_indices

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True)
    for call in range(2):
        doc_ids = documents()
        got, want = compiled(q, k, v, doc_ids), step(q, k, v, doc_ids)
        assert_same(got[:2], want[:2], f"documents built in the graph, call {call}")
        assert torch.equal(got[2], want[2]), f"window built in the graph (seed {RUN_SEED})"
        counts = want[3]
        assert torch.equal(got[3], counts), f"kv_num_blocks (seed {RUN_SEED})"
        listed = torch.arange(got[4].shape[-1], device="cuda") < counts[..., None]
        assert torch.equal(got[4][listed], want[4][listed]), f"kv_indices (seed {RUN_SEED})"


def test_opcheck_create_block_mask_op():
    doc_ids = torch.randint(0, 4, (B, S), device="cuda", generator=generator(13)).int()
    sizes = [-1, 0, -1, B, 1, S, S, 64, 128]  # causal documents, 64 x 128 blocks
    torch.library.opcheck(torch.ops.flashcore.create_block_mask.default,
                          (doc_ids, doc_ids, None, sizes, torch.device("cuda")))


def test_opcheck_flex_attention_op():
    q, k, v = (x.transpose(1, 2) for x in bhsd_inputs(torch.float16, offset=5))
    g = generator(6)
    slopes = torch.rand(HQ, device="cuda", generator=g)
    block_mask = flashcore.create_block_mask(mods.causal(), B, None, S, S, BLOCK_SIZE=64)
    counts, indices = block_mask.kv_num_blocks, block_mask.kv_indices
    full_counts, full_indices = block_mask.full_kv_num_blocks, block_mask.full_kv_indices
    arrays = [None, None, None, slopes, None, None, counts, indices, full_counts, full_indices,
              None, None]
    ints = [-1, 64, 64, -1, -1]
    args = (q, k, v, *arrays, ints, [], 0.0, False, -1, 0, 0.0, True, "", "", "auto", False)
    torch.library.opcheck(torch.ops.flashcore.flex_attention.default, args)


def test_cuda_graph_replay_equals_eager():
    q, k, v = bhsd_inputs(torch.bfloat16, offset=7)
    mask_mod, score_mod, _ = flex_cases()["documents_causal_alibi"]
    block_mask = flashcore.create_block_mask(mask_mod, B, None, S, S)
    static = [x.clone() for x in (q, k, v)]

    def call():
        return flashcore.flex_attention(*static, score_mod=score_mod, block_mask=block_mask,
                                        enable_gqa=True, return_lse=True)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call()  # warm-up outside the capture, as CUDA graphs ask
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = call()
    for offset in (8, 9):
        for dst, src in zip(static, bhsd_inputs(torch.bfloat16, offset=offset)):
            dst.copy_(src)
        captured[0].fill_(float("nan"))
        graph.replay()
        assert_same(captured, call(), f"graph replay {offset}")


def test_cuda_graph_replays_a_varlen_flex_call():
    """A varlen batch with a flex mod: the tile list's build, then the flex kernel, which starts
    dependently on it on sm90 (programmatic dependent launch), captured and replayed."""
    lengths = [300, 1, 0, 77, 129, 7]
    cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).int()
    total, longest = sum(lengths), max(lengths)
    g = generator(11)
    slopes = torch.rand(HQ, device="cuda", generator=g)
    static = [torch.randn(total, h, D, dtype=torch.bfloat16, device="cuda", generator=g)
              for h in (HQ, HKV, HKV)]

    def call():
        return flashcore.attention_varlen(*static, cu, cu, longest, longest, causal=True,
                                          score_mod=mods.alibi(slopes), return_lse=True)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = call()
    for offset in (12, 13):
        g = generator(offset)
        for dst in static:
            dst.copy_(torch.randn(dst.shape, dtype=dst.dtype, device="cuda", generator=g))
        captured[0].fill_(float("nan"))
        graph.replay()
        assert_same(captured, call(), f"varlen graph replay {offset}")
