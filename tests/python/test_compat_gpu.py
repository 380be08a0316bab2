"""flashcore.compat on a GPU: each flash-attn entry point against flashcore.attention (same
kernel, so equal) and against the fp32 reference, with flash-attn's rules (causal overrides the
right window, windows past seqlen_k are unbounded, odd head dims padded, KV cache appended in
place). Skipped, with the reason, without torch or a GPU (test_gpu's module-level skips)."""

import pytest

from test_gpu import RUN_SEED, DTYPES, assert_lse_matches, assert_matches, inputs, reference, torch

import flashcore
from flashcore import compat


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "flash_args, flashcore_args",
    [
        (dict(), dict()),
        (dict(causal=True), dict(causal=True)),
        (dict(causal=True, window_size=(32, 7)), dict(window=(32, 0))),
        (dict(window_size=(500, 500)), dict()),  # past seqlen_k: unbounded
        (dict(window_size=(40, 8), softcap=20.0), dict(window=(40, 8), softcap=20.0)),
        (dict(softmax_scale=0.05, softcap=-1.0), dict(softmax_scale=0.05)),
    ],
    ids=["none", "causal", "causal_overrides_right", "wide_window", "window_softcap", "scale"],
)
def test_flash_attn_func_is_flashcore(dtype, flash_args, flashcore_args):
    q, k, v = inputs(2, 113, 203, 8, 2, 128, dtype)
    out, lse, probs = compat.flash_attn_func(q, k, v, return_attn_probs=True, **flash_args)
    assert probs is None
    expected, expected_lse = flashcore.attention(q, k, v, return_lse=True, **flashcore_args)
    torch.testing.assert_close(out, expected, atol=0, rtol=0)
    torch.testing.assert_close(lse, expected_lse, atol=0, rtol=0)
    reference = dict(flashcore_args)
    if "softmax_scale" in reference:
        reference["scale"] = reference.pop("softmax_scale")
    assert_matches(out, q, k, v, **reference)
    assert_lse_matches(lse, q, k, v, **reference)


def test_packed_forms_read_the_same_tensors():
    q, k, v = inputs(2, 128, 128, 8, 8, 64, torch.bfloat16)
    qkv = torch.stack([q, k, v], dim=2)
    expected = compat.flash_attn_func(q, k, v, causal=True)
    packed = compat.flash_attn_qkvpacked_func(qkv, causal=True)
    kvpacked = compat.flash_attn_kvpacked_func(q, torch.stack([k, v], dim=2), causal=True)
    torch.testing.assert_close(packed, expected, atol=0, rtol=0)
    torch.testing.assert_close(kvpacked, expected, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_varlen_is_attention_varlen_with_flash_attns_window_rules(dtype):
    lengths, heads_q, heads_kv, head_dim = [0, 1, 7, 300, 64], 4, 2, 64
    total = sum(lengths)
    q, k, v = (x[0] for x in inputs(1, total, total, heads_q, heads_kv, head_dim, dtype))
    cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).int()
    longest = max(lengths)
    out, lse, probs = compat.flash_attn_varlen_func(
        q, k, v, cu, cu, longest, longest, causal=True, window_size=(32, 5),
        return_attn_probs=True,
    )
    assert probs is None
    # causal overrides the right side of the window, as flash-attn does
    expected, expected_lse = flashcore.attention_varlen(
        q, k, v, cu, cu, longest, longest, window=(32, 0), return_lse=True
    )
    torch.testing.assert_close(out, expected, atol=0, rtol=0)
    torch.testing.assert_close(lse, expected_lse, atol=0, rtol=0)
    start = 0
    for n in lengths:
        if n:
            rows = slice(start, start + n)
            assert_matches(out[None, rows], q[None, rows], k[None, rows], v[None, rows],
                           window=(32, 0))
        start += n
    kv = torch.stack([k, v], dim=1)
    packed = compat.flash_attn_varlen_kvpacked_func(q, kv, cu, cu, longest, longest, causal=True,
                                                    window_size=(32, 5))
    torch.testing.assert_close(packed, out, atol=0, rtol=0)


def test_odd_head_dim_is_padded_with_the_real_scale():
    q, k, v = inputs(1, 64, 64, 4, 4, 60, torch.float16)
    out = compat.flash_attn_func(q, k, v, causal=True)
    assert out.shape == q.shape
    assert_matches(out, q, k, v, causal=True)


@pytest.mark.parametrize("lengths", [[40, 40], [17, 90]], ids=["uniform", "ragged"])
def test_kvcache_appends_and_attends(lengths):
    dtype, capacity, new = torch.bfloat16, 128, 3
    q, k_new, v_new = inputs(2, new, new, 8, 2, 64, dtype)
    k_cache, v_cache, _ = inputs(2, capacity, capacity, 2, 2, 64, dtype, seed=1)
    before_k = k_cache.clone()
    seqlens = torch.tensor(lengths, dtype=torch.int32, device="cuda")
    out, lse = compat.flash_attn_with_kvcache(
        q, k_cache, v_cache, k_new, v_new, cache_seqlens=seqlens, causal=True,
        return_softmax_lse=True,
    )
    for b, length in enumerate(lengths):
        torch.testing.assert_close(k_cache[b, length : length + new], k_new[b], atol=0, rtol=0)
        torch.testing.assert_close(k_cache[b, :length], before_k[b, :length], atol=0, rtol=0)
        torch.testing.assert_close(
            k_cache[b, length + new :], before_k[b, length + new :], atol=0, rtol=0
        )
        keys = slice(0, length + new)
        rows = slice(b, b + 1)
        assert_matches(out[rows], q[rows], k_cache[rows, keys], v_cache[rows, keys], causal=True)
        assert_lse_matches(
            lse[rows].contiguous(), q[rows], k_cache[rows, keys], v_cache[rows, keys], causal=True
        )


def rel_l2(x, ref):
    return ((x.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()


@pytest.mark.parametrize("head_dim", [64, 60], ids=["d64", "d60_padded"])
def test_flash_attn_func_is_differentiable(head_dim):
    """Gradients through the drop-in (a head dim of 60 runs zero-padded to 64, and the pad's
    gradient is dropped) against fp32 autograd of the same attention; deterministic=True twice
    gives the same bits."""
    q, k, v = inputs(2, 113, 203, 8, 2, head_dim, torch.bfloat16, seed=5)
    d_o = torch.randn_like(q)
    window = (50, 0)
    grads = []
    for _ in range(2):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out = compat.flash_attn_func(*leaves, causal=True, window_size=window, deterministic=True)
        out.backward(d_o)
        grads.append([leaf.grad for leaf in leaves])
    ref_leaves = [t.float().requires_grad_() for t in (q, k, v)]
    reference(*ref_leaves, causal=True, window=window)[0].backward(d_o.float())
    for name, first, second, ref in zip("qkv", *grads, ref_leaves):
        assert first.shape == ref.shape, f"d{name} shape"
        assert torch.isfinite(first).all(), f"d{name}: NaN/inf (seed {RUN_SEED})"
        assert torch.equal(first, second), f"d{name} differs run to run (seed {RUN_SEED})"
        err = rel_l2(first, ref.grad)
        assert err <= 1e-2, f"d{name} rel L2 {err:.2e} (seed {RUN_SEED})"


def test_flash_attn_varlen_func_is_differentiable():
    """The varlen drop-in's gradients are attention_varlen's (the same kernels, bitwise with
    deterministic=True), with lengths 0, 1 and 7."""
    lengths = [0, 1, 7, 300]
    cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).int()
    q, k, v = (t[0] for t in inputs(1, sum(lengths), sum(lengths), 4, 2, 128, torch.bfloat16,
                                    seed=6))
    d_o = torch.randn_like(q)
    runs = []
    for call in (compat.flash_attn_varlen_func, flashcore.attention_varlen):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        out = call(*leaves, cu, cu, max(lengths), max(lengths), causal=True, deterministic=True)
        out.backward(d_o)
        runs.append([leaf.grad for leaf in leaves])
    for name, compat_grad, flashcore_grad in zip("qkv", *runs):
        assert torch.equal(compat_grad, flashcore_grad), f"d{name} (seed {RUN_SEED})"


def test_kvcache_inputs_that_require_grad_are_refused():
    q, k_cache, v_cache = inputs(1, 1, 64, 4, 4, 64, torch.float16)
    q.requires_grad_()
    with pytest.raises(NotImplementedError, match="no backward"):
        compat.flash_attn_with_kvcache(q, k_cache, v_cache)
    with torch.no_grad():
        compat.flash_attn_with_kvcache(q, k_cache, v_cache)
