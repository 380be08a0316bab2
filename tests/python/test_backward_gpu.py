"""flashcore.attention's gradients on a GPU through torch autograd (the custom op's
register_autograd, the sm80 backward kernels): dq, dk and dv against float64 autograd of the same
attention written out in torch (upcast inputs), every mask, softcap and GQA; deterministic mode
bitwise; torch.library.opcheck of the op with gradients; torch.compile of a training step."""

import os
import secrets

import pytest

torch = pytest.importorskip(
    "torch", reason="SKIPPED: torch is not installed, so no GPU test of flashcore's backward runs"
)
if not torch.cuda.is_available():
    pytest.skip(
        "SKIPPED: torch sees no CUDA device, so no GPU test of flashcore's backward runs",
        allow_module_level=True,
    )

import flashcore  # noqa: E402

RUN_SEED = int(os.environ.get("FLASHCORE_TEST_SEED", secrets.randbelow(2**31)))
# The forward's parity tolerance (reference/tolerance.hpp), per gradient.
TOLERANCE = {torch.float16: 5e-3, torch.bfloat16: 1e-2}


def reference(q, k, v, causal, window, softcap, scale):
    """float64 attention, BSHD, differentiable: what autograd differentiates for the reference."""
    qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))
    group = q.shape[2] // k.shape[2]
    kh, vh = kh.repeat_interleave(group, dim=1), vh.repeat_interleave(group, dim=1)
    scores = (qh @ kh.transpose(-1, -2)) * scale
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    sq, sk = q.shape[1], k.shape[1]
    left, right = window
    if causal:
        right = 0
    i = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=q.device)[None, :]
    seen = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if left >= 0:
        seen &= j >= i - left
    if right >= 0:
        seen &= j <= i + right
    scores = scores.masked_fill(~seen, float("-inf"))
    p = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # fully masked rows: P = 0, as flashcore
    return (p @ vh).transpose(1, 2)


def rel_l2(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


CASES = [  # sq, sk, hq, hkv, d, causal, window, softcap
    (128, 128, 4, 4, 64, False, (-1, -1), 0.0),
    (127, 300, 8, 2, 128, True, (-1, -1), 0.0),
    (300, 127, 4, 1, 64, True, (-1, -1), 0.0),  # rows without keys: zero dq
    (257, 513, 4, 4, 128, False, (64, 16), 0.0),
    (200, 200, 8, 8, 64, False, (-1, -1), 3.0),
    (7, 1000, 8, 4, 128, False, (-1, -1), 0.0),
    (127, 300, 8, 2, 256, True, (-1, -1), 0.0),  # hd256: sm90 on an H100, sm80 elsewhere
    (200, 200, 4, 4, 256, False, (-1, -1), 3.0),
]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", CASES)
def test_gradients_match_float64_autograd(case, dtype):
    sq, sk, hq, hkv, d, causal, window, softcap = case
    gen = torch.Generator(device="cuda").manual_seed(RUN_SEED)
    q, k, v = (
        torch.randn(2, s, h, d, device="cuda", dtype=dtype, generator=gen)
        for s, h in ((sq, hq), (sk, hkv), (sk, hkv))
    )
    d_o = torch.randn(2, sq, hq, d, device="cuda", dtype=dtype, generator=gen)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = flashcore.attention(*leaves, causal=causal, window=window, softcap=softcap)
    out.backward(d_o)
    ref_leaves = [t.double().requires_grad_() for t in (q, k, v)]
    ref = reference(*ref_leaves, causal, window, softcap, d**-0.5)
    ref.backward(d_o.double())
    for name, leaf, ref_leaf in zip("qkv", leaves, ref_leaves):
        grad = leaf.grad
        assert grad is not None and grad.dtype == dtype and grad.shape == leaf.shape
        assert torch.isfinite(grad).all(), f"d{name}: NaN/inf (seed {RUN_SEED})"
        err = rel_l2(grad, ref_leaf.grad)
        assert err <= TOLERANCE[dtype], f"d{name} rel L2 {err:.2e} (seed {RUN_SEED})"


def test_bhsd_views_and_deterministic_mode_are_bitwise_repeatable():
    gen = torch.Generator(device="cuda").manual_seed(RUN_SEED)
    q, k, v = (
        torch.randn(2, 8, 600, 128, device="cuda", dtype=torch.bfloat16, generator=gen)
        .transpose(1, 2)
        for _ in range(3)
    )
    d_o = torch.randn(2, 600, 8, 128, device="cuda", dtype=torch.bfloat16, generator=gen)
    grads = []
    for _ in range(2):
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        flashcore.attention(*leaves, causal=True, deterministic=True).backward(d_o)
        grads.append([t.grad for t in leaves])
    for first, second in zip(*grads):
        assert torch.equal(first, second), "deterministic mode gave different gradients"


def test_strided_gradient_is_read_in_place():
    """dO as a model that works in BHSD hands it in (the BSHD output transposed back, a strided
    view): the kernels read it where it is, and the gradients are those of a contiguous copy of it,
    bitwise in deterministic mode. Views the kernels cannot read (rows off 16 bytes) are copied."""
    from flashcore import _ops

    gen = torch.Generator(device="cuda").manual_seed(RUN_SEED)
    q, k, v = (
        torch.randn(2, 600, 8, 128, device="cuda", dtype=torch.bfloat16, generator=gen)
        for _ in range(3)
    )
    d_o_bhsd = torch.randn(2, 8, 600, 128, device="cuda", dtype=torch.bfloat16, generator=gen)
    strided = d_o_bhsd.transpose(1, 2)
    assert _ops._rows_readable(strided)
    grads = []
    for d_o in (strided, strided.contiguous()):
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        flashcore.attention(*leaves, deterministic=True).backward(d_o)
        grads.append([t.grad for t in leaves])
    for name, first, second in zip("qkv", *grads):
        assert torch.equal(first, second), f"d{name} differs between a strided and a contiguous dO"
    wide = torch.randn(2, 600, 8, 129, device="cuda", dtype=torch.bfloat16, generator=gen)
    assert not _ops._rows_readable(wide[..., 1:]), "rows of 129 elements are not 16-byte rows"
    flat = torch.randn(2 * 600 * 8 * 128 + 1, device="cuda", dtype=torch.bfloat16, generator=gen)
    assert not _ops._rows_readable(flat[1:].view(2, 600, 8, 128)), "a start 2 bytes off 16"
    assert _ops._rows_readable(flat[:-1].view(2, 600, 8, 128))


def test_opcheck_with_gradients():
    gen = torch.Generator(device="cuda").manual_seed(RUN_SEED)
    q, k, v = (
        torch.randn(1, 64, 4, 64, device="cuda", dtype=torch.float16, generator=gen)
        .requires_grad_()
        for _ in range(3)
    )
    torch.library.opcheck(
        torch.ops.flashcore.attention.default,
        # deterministic: eager and compiled gradients are compared for (near) equality.
        (q, k, v, True, 0.0, -1, -1, 0.0, "auto", 0, "auto", True, True),
    )


def test_compiled_training_step_matches_eager():
    gen = torch.Generator(device="cuda").manual_seed(RUN_SEED)
    x = torch.randn(2, 256, 4 * 64, device="cuda", dtype=torch.bfloat16, generator=gen)
    proj = torch.nn.Linear(4 * 64, 3 * 4 * 64, device="cuda", dtype=torch.bfloat16)

    def step(x):
        q, k, v = proj(x).view(2, 256, 3, 4, 64).unbind(2)
        return flashcore.attention(q, k, v, causal=True).float().square().mean()

    eager = step(x)
    eager.backward()
    eager_grad = proj.weight.grad.clone()
    proj.weight.grad = None
    compiled = torch.compile(step, fullgraph=True)(x)
    compiled.backward()
    assert torch.allclose(eager, compiled, rtol=1e-3)
    assert rel_l2(proj.weight.grad, eager_grad.double()) < 1e-2
