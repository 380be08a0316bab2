"""flashcore.jit_mask_mod on a GPU: a mask snippet's BlockMask (flashcore.create_block_mask, built
by the snippet's own object) against PyTorch's create_block_mask of the snippet's Python twin, and
flex_attention with it (alone, with a jit_score_mod, with a built-in score_mod and sinks, with
fully masked rows, under torch.compile) against the float32 reference of test_flex_gpu.py
evaluating the twins. Fresh inputs every run (the seed is in every failure)."""

import pytest

torch = pytest.importorskip(
    "torch", reason="SKIPPED: torch is not installed, so no GPU test of flashcore runs"
)
if not torch.cuda.is_available():
    pytest.skip("SKIPPED: torch sees no CUDA device, so no GPU test of flashcore runs",
                allow_module_level=True)

import flashcore  # noqa: E402
from flashcore import jit, mods  # noqa: E402
from test_flex_gpu import RUN_SEED, check, inputs, reference  # noqa: E402

try:
    jit.find_nvcc()
except RuntimeError:
    pytest.skip("SKIPPED: no nvcc, so no jit_mask_mod can be compiled here",
                allow_module_level=True)

STEP = 3
DILATED = "return kv_idx <= q_idx && (q_idx - kv_idx) % step == 0;"


def dilated(b, h, q_idx, kv_idx):
    return (kv_idx <= q_idx) & ((q_idx - kv_idx) % STEP == 0)


def listed(block_mask):
    """Per row, the sorted partial and full block lists (the builders may order them apart)."""
    rows = []
    for counts, indices in ((block_mask.kv_num_blocks, block_mask.kv_indices),
                            (block_mask.full_kv_num_blocks, block_mask.full_kv_indices)):
        counts, indices = counts.flatten(0, -1).tolist(), indices.flatten(0, -2).tolist()
        rows.append([sorted(row[:n]) for n, row in zip(counts, indices)])
    return rows


@pytest.mark.parametrize("block_size", [64, 128])
def test_block_mask_equals_torch_create_block_mask(block_size):
    flex = pytest.importorskip("torch.nn.attention.flex_attention",
                               reason="SKIPPED: this torch has no FlexAttention")
    mask = flashcore.jit_mask_mod(DILATED, step=STEP)
    ours = flashcore.create_block_mask(mask, 2, None, 1024, 1024, BLOCK_SIZE=block_size)
    theirs = flex.create_block_mask(dilated, 2, None, 1024, 1024, device="cuda",
                                    BLOCK_SIZE=block_size)
    assert listed(ours) == listed(theirs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_jit_mask_with_jit_score(dtype, head_dim):
    q, k, v = inputs(dtype, D=head_dim)
    B, Hq, S = q.shape[:3]
    bias = torch.randn(Hq, device="cuda", generator=torch.Generator(device="cuda")
                       .manual_seed(RUN_SEED + 10))
    mask = flashcore.jit_mask_mod(DILATED, step=STEP)
    score = flashcore.jit_score_mod("return score + bias[h] * (q_idx - kv_idx) * 0.01f;",
                                    bias=bias)
    block_mask = flashcore.create_block_mask(mask, B, None, S, S, BLOCK_SIZE=64)

    def twin(s, b, h, q_idx, kv_idx):
        return s + bias[h] * (q_idx - kv_idx) * 0.01

    ref_out, ref_lse = reference(q, k, v, dilated, twin)
    # 64-key blocks: the object's paired sm90 kernel on an H100 (the mask's partial blocks two to
    # a step), and its sm80 kernel.
    hopper = torch.cuda.get_device_capability() == (9, 0)
    for backend in ("auto", "sm80"):
        out, lse = flashcore.flex_attention(q, k, v, score_mod=score, block_mask=block_mask,
                                            enable_gqa=True, return_lse=True, backend=backend)
        assert flashcore.last_provider() == ("sm90" if hopper and backend == "auto" else "sm80")
        check(out, lse, ref_out, ref_lse, dtype, f"dilated + jit bias, hd{head_dim}, {backend}")


def test_jit_mask_with_builtin_score_and_sinks():
    q, k, v = inputs(torch.bfloat16)
    B, Hq, S = q.shape[:3]
    g = torch.Generator(device="cuda").manual_seed(RUN_SEED + 11)
    doc = torch.randint(0, 4, (B, S), device="cuda", generator=g).sort(-1).values.int()
    slopes = torch.rand(Hq, device="cuda", generator=g)
    sinks = torch.randn(Hq, device="cuda", generator=g)
    mask = flashcore.jit_mask_mod(
        "return doc[b * seqlen + q_idx] == doc[b * seqlen + kv_idx] && kv_idx <= q_idx;",
        doc=doc.contiguous(), seqlen=S)
    block_mask = flashcore.create_block_mask(mask, B, None, S, S)
    out, lse = flashcore.flex_attention(q, k, v, score_mod=mods.alibi(slopes),
                                        block_mask=block_mask, enable_gqa=True, return_lse=True,
                                        sinks=sinks)
    twin_mask = mods.and_masks(mods.causal(), mods.documents(doc))
    ref_out, ref_lse = reference(q, k, v, twin_mask, mods.alibi(slopes), sinks=sinks)
    check(out, lse, ref_out, ref_lse, torch.bfloat16, "jit documents + built-in ALiBi + sinks")


def test_fully_masked_rows_are_zero_not_nan():
    q, k, v = inputs(torch.float16, Hq=2, Hkv=2, S=200)
    mask = flashcore.jit_mask_mod("return q_idx % 7 != 3 && kv_idx <= q_idx;")
    block_mask = flashcore.create_block_mask(mask, 2, None, 200, 200)
    out, lse = flashcore.flex_attention(q, k, v, block_mask=block_mask, return_lse=True)

    def twin(b, h, q_idx, kv_idx):
        return (q_idx % 7 != 3) & (kv_idx <= q_idx)

    ref_out, ref_lse = reference(q, k, v, twin)
    hidden = torch.arange(200, device="cuda") % 7 == 3
    assert (out[:, :, hidden] == 0).all() and (lse[:, :, hidden] == float("-inf")).all()
    check(out, lse, ref_out, ref_lse, torch.float16, "rows with no key")


def test_jit_mask_under_torch_compile_equals_eager():
    q, k, v = inputs(torch.bfloat16)
    B, _, S = q.shape[:3]
    mask = flashcore.jit_mask_mod(DILATED, step=STEP)
    block_mask = flashcore.create_block_mask(mask, B, None, S, S)

    def step(q, k, v):
        return flashcore.flex_attention(q, k, v, block_mask=block_mask, enable_gqa=True,
                                        return_lse=True)

    torch._dynamo.reset()
    got = torch.compile(step, fullgraph=True)(q, k, v)
    want = step(q, k, v)
    for a, b in zip(got, want):
        assert torch.equal(a, b), f"compiled differs from eager (seed {RUN_SEED})"


def test_jit_mask_keeps_the_built_in_softcap():
    # The softcap of a built-in score_mod beside a jit mask reaches the kernel (it was dropped
    # before): the snippet's causal mask with softcap equals the built-in causal mask with it.
    q, k, v = inputs(torch.bfloat16)
    B, _, S = q.shape[:3]
    mask = flashcore.jit_mask_mod("return kv_idx <= q_idx;")
    ours = flashcore.flex_attention(q, k, v, score_mod=mods.softcap(2.0), enable_gqa=True,
                                    block_mask=flashcore.create_block_mask(mask, B, None, S, S))
    builtin = flashcore.flex_attention(
        q, k, v, score_mod=mods.softcap(2.0), enable_gqa=True,
        block_mask=flashcore.create_block_mask(mods.causal(), B, None, S, S))
    uncapped = flashcore.flex_attention(
        q, k, v, enable_gqa=True,
        block_mask=flashcore.create_block_mask(mods.causal(), B, None, S, S))
    err = ((ours.float() - builtin.float()).norm() / builtin.float().norm()).item()
    assert err <= 1e-2, f"jit mask + softcap vs built-in: {err:.2e} (seed {RUN_SEED})"
    apart = ((uncapped.float() - builtin.float()).norm() / builtin.float().norm()).item()
    assert apart > 1e-1, f"softcap 2 changed too little to tell: {apart:.2e} (seed {RUN_SEED})"
