"""flashcore.compat without a GPU: flash-attn's arguments are accepted as flash-attn takes them,
what flashcore cannot honour raises NotImplementedError naming it, and flash-attn's window rules
hold. numpy arrays go through DLPack; valid calls end in flashcore's host-array error, which
shows that the translated arguments passed every check before the device one."""

import inspect

import numpy as np
import pytest

from flashcore import compat

B, S, H, D = 2, 16, 4, 64


def qkv(head_dim=D, seqlen_k=S):
    q = np.zeros((B, S, H, head_dim), dtype=np.float16)
    kv = np.zeros((B, seqlen_k, H, head_dim), dtype=np.float16)
    return q, kv, kv.copy()


def varlen(q, k, v):
    """The batch packed as flash-attn's varlen functions take it: [total, heads, dim] and
    cu_seqlens (every sequence S long)."""
    cu = np.arange(0, (B + 1) * S, S, dtype=np.int32)
    return (*(x.reshape(B * S, H, -1) for x in (q, k, v)), cu, cu, S, S)


# flash_attn_interface.py (flash-attn 2.x): parameter names and defaults, in order.
FLASH_ATTN_SIGNATURES = {
    "flash_attn_func": "(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, "
    "window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False, "
    "return_attn_probs=False)",
    "flash_attn_kvpacked_func": "(q, kv, dropout_p=0.0, softmax_scale=None, causal=False, "
    "window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False, "
    "return_attn_probs=False)",
    "flash_attn_qkvpacked_func": "(qkv, dropout_p=0.0, softmax_scale=None, causal=False, "
    "window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False, "
    "return_attn_probs=False)",
    "flash_attn_varlen_func": "(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, "
    "dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, "
    "alibi_slopes=None, deterministic=False, return_attn_probs=False, block_table=None)",
    "flash_attn_varlen_kvpacked_func": "(q, kv, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, "
    "max_seqlen_k, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), "
    "softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False)",
    "flash_attn_varlen_qkvpacked_func": "(qkv, cu_seqlens, max_seqlen, dropout_p=0.0, "
    "softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None, "
    "deterministic=False, return_attn_probs=False)",
    "flash_attn_with_kvcache": "(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, "
    "rotary_sin=None, cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, "
    "block_table=None, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, "
    "rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False)",
}


@pytest.mark.parametrize("name", sorted(FLASH_ATTN_SIGNATURES))
def test_signatures_are_flash_attns(name):
    assert str(inspect.signature(getattr(compat, name))) == FLASH_ATTN_SIGNATURES[name]


@pytest.mark.parametrize(
    "causal, window, seqlen_q, seqlen_k, expected",
    [
        (False, (-1, -1), 8, 8, (-1, -1)),
        (True, (-1, -1), 8, 8, (-1, 0)),
        (True, (4, 3), 8, 8, (4, 0)),  # causal overrides the right side, as flash-attn does
        (False, (8, 8), 4, 8, (-1, -1)),  # at seqlen_k: unbounded
        (False, (100, 2), 4, 8, (-1, 2)),
        (True, (100, 100), 4, 8, (-1, 0)),
        (True, (-1, 5), 1, 8, (-1, 5)),  # one query row: causal changes nothing
    ],
)
def test_flash_window(causal, window, seqlen_q, seqlen_k, expected):
    assert compat.flash_window(causal, window, seqlen_q, seqlen_k) == expected


@pytest.mark.parametrize(
    "call, named",
    [
        (lambda q, k, v: compat.flash_attn_func(q, k, v, dropout_p=0.1), "dropout_p"),
        (lambda q, k, v: compat.flash_attn_func(q, k, v, 0.1), "dropout_p"),
        (lambda q, k, v: compat.flash_attn_func(q, k, v, alibi_slopes=np.ones(H)), "alibi"),
        (
            lambda q, k, v: compat.flash_attn_kvpacked_func(q, np.stack([k, v], 2), 0.5),
            "dropout_p",
        ),
        (
            lambda q, k, v: compat.flash_attn_qkvpacked_func(
                np.stack([q, k, v], 2), alibi_slopes=np.ones(H)
            ),
            "alibi",
        ),
        (
            lambda q, k, v: compat.flash_attn_with_kvcache(
                q, k, v, rotary_cos=np.ones((S, 8)), rotary_sin=np.ones((S, 8))
            ),
            "rotary",
        ),
        (lambda q, k, v: compat.flash_attn_with_kvcache(q, k, v, block_table=np.ones(1)), "paged"),
        (lambda q, k, v: compat.flash_attn_varlen_func(*varlen(q, k, v), 0.1), "dropout_p"),
        (
            lambda q, k, v: compat.flash_attn_varlen_func(*varlen(q, k, v), block_table=np.ones(1)),
            "paged",
        ),
        (
            lambda q, k, v: compat.flash_attn_varlen_qkvpacked_func(
                np.stack(varlen(q, k, v)[:3], 1), np.array([0, B * S], np.int32), S,
                alibi_slopes=np.ones(H),
            ),
            "alibi",
        ),
        (
            lambda q, k, v: compat.flash_attn_with_kvcache(q, k, v, cache_batch_idx=np.ones(B)),
            "cache_batch_idx",
        ),
        (
            lambda q, k, v: compat.flash_attn_with_kvcache(q, k, v, cache_leftpad=np.ones(B)),
            "cache_leftpad",
        ),
    ],
)
def test_what_flashcore_cannot_honour_is_refused_by_name(call, named):
    with pytest.raises(NotImplementedError, match=named):
        call(*qkv())


@pytest.mark.parametrize(
    "call",
    [
        lambda q, k, v: compat.flash_attn_func(q, k, v, causal=True, window_size=(4, 4)),
        lambda q, k, v: compat.flash_attn_func(q, k, v, 0.0, None, True, (100, 100), -1.0),
        lambda q, k, v: compat.flash_attn_func(q, k, v, return_attn_probs=True, deterministic=True),
        lambda q, k, v: compat.flash_attn_kvpacked_func(q, np.stack([k, v], 2), causal=True),
        lambda q, k, v: compat.flash_attn_qkvpacked_func(np.stack([q, k, v], 2), softcap=30.0),
        lambda q, k, v: compat.flash_attn_with_kvcache(q, k, v, cache_seqlens=S // 2),
        lambda q, k, v: compat.flash_attn_varlen_func(*varlen(q, k, v), causal=True),
        lambda q, k, v: compat.flash_attn_varlen_kvpacked_func(
            varlen(q, k, v)[0], np.stack(varlen(q, k, v)[1:3], 1), *varlen(q, k, v)[3:],
            window_size=(100, 2), return_attn_probs=True,
        ),
    ],
)
def test_valid_calls_reach_flashcore(call):
    # flashcore itself rejects causal=True with window right 4; compat folds it as flash-attn does.
    with pytest.raises(ValueError, match="q is on cpu"):
        call(*qkv())


def test_kvcache_appends_in_place_at_cache_seqlens():
    q, k_cache, v_cache = qkv(seqlen_k=32)
    new_k = np.ones((B, 2, H, D), dtype=np.float16)
    new_v = np.full((B, 2, H, D), 2, dtype=np.float16)
    with pytest.raises(ValueError, match="q is on cpu"):
        compat.flash_attn_with_kvcache(
            q, k_cache, v_cache, new_k, new_v, cache_seqlens=np.array([3, 5], dtype=np.int32)
        )
    assert (k_cache[0, 3:5] == 1).all() and (k_cache[0, :3] == 0).all()
    assert (k_cache[0, 5:] == 0).all()
    assert (v_cache[1, 5:7] == 2).all() and (v_cache[1, 7:] == 0).all()


def test_kvcache_rejects_what_does_not_fit():
    q, k_cache, v_cache = qkv(seqlen_k=8)
    new = np.ones((B, 2, H, D), dtype=np.float16)
    with pytest.raises(ValueError, match="does not fit a cache of 8"):
        compat.flash_attn_with_kvcache(q, k_cache, v_cache, new, new, cache_seqlens=7)
    with pytest.raises(ValueError, match="needs cache_seqlens"):
        compat.flash_attn_with_kvcache(q, k_cache, v_cache, new, new)
    with pytest.raises(ValueError, match="both k and v"):
        compat.flash_attn_with_kvcache(q, k_cache, v_cache, new, None, cache_seqlens=1)
