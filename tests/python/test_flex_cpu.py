"""flashcore.flex_attention, attention_varlen, create_block_mask and flashcore.mods without a GPU
and without torch: argument errors name the argument and the fix, before anything is launched.
numpy arrays live on the host, so every otherwise valid call ends in the device error."""

import numpy as np
import pytest

import flashcore
from flashcore import mods

B, H, SQ, SK, D = 2, 4, 16, 24, 64


def bhsd(heads=H, seqlen=SQ, dtype=np.float16):
    return np.zeros((B, heads, seqlen, D), dtype=dtype)


class FakeBlockMask:
    """The fields of torch's BlockMask, with a mask_mod of the caller's choice."""

    def __init__(self, mask_mod, seq_lengths=(SQ, SK)):
        self.kv_num_blocks = np.zeros((B, 1, 1), np.int32)
        self.kv_indices = np.zeros((B, 1, 1, 1), np.int32)
        self.full_kv_num_blocks = None
        self.full_kv_indices = None
        self.BLOCK_SIZE = (128, 128)
        self.seq_lengths = seq_lengths
        self.mask_mod = mask_mod


def test_valid_flex_call_reaches_the_device_check():
    q, k, v = bhsd(), bhsd(seqlen=SK), bhsd(seqlen=SK)
    with pytest.raises(ValueError, match=r"q is on cpu"):
        flashcore.flex_attention(q, k, v, score_mod=mods.softcap(20.0), return_lse=True)
    with pytest.raises(ValueError, match=r"q is on cpu"):
        flashcore.flex_attention(q, k, v, block_mask=FakeBlockMask(mods.causal()))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(query=np.zeros((B, SQ, D), np.float16)), ValueError, r"query must be a 4-D array"),
        (dict(key=bhsd(heads=2, seqlen=SK), value=bhsd(heads=2, seqlen=SK)), ValueError,
         r"pass enable_gqa=True"),
        (dict(scale=0.0), ValueError, r"scale is 0; pass None"),
        (dict(score_mod=lambda s, b, h, q, kv: s), TypeError,
         r"flashcore runs its built-in score_mods"),
        (dict(block_mask=object()), TypeError, r"pass a flashcore.BlockMask or a torch"),
        (dict(block_mask=FakeBlockMask(mods.causal(), seq_lengths=(SQ, SK + 1))), ValueError,
         r"block_mask was built for \(Q_LEN, KV_LEN\) = \(16, 25\) but q and k have \(16, 24\)"),
        (dict(block_mask=FakeBlockMask(lambda b, h, q, kv: q >= kv)), TypeError,
         r"block_mask.mask_mod is a Python function"),
        # The extension takes the BHSD arrays as they are: its checks read heads from axis 1 and
        # lengths from axis 2, and say so.
        (dict(value=bhsd(seqlen=SK + 1)), ValueError,
         r"k \(2, 4, 24, 64\) and v \(2, 4, 25, 64\) must have the same shape "
         r"\[batch, heads_kv, seqlen_k, head_dim\]"),
        (dict(key=bhsd(heads=3, seqlen=SK), value=bhsd(heads=3, seqlen=SK), enable_gqa=True),
         ValueError, r"q has 4 heads and k, v have 3"),
    ],
)
def test_flex_attention_argument_errors(kwargs, error, message):
    args = dict(query=bhsd(), key=bhsd(seqlen=SK), value=bhsd(seqlen=SK))
    args.update(kwargs)
    with pytest.raises(error, match=message):
        flashcore.flex_attention(**args)


def test_noop_mask_of_torch_is_no_mask():
    def noop_mask(b, h, q_idx, kv_idx):
        return q_idx >= 0

    q, k, v = bhsd(), bhsd(seqlen=SK), bhsd(seqlen=SK)
    with pytest.raises(ValueError, match=r"q is on cpu"):
        flashcore.flex_attention(q, k, v, block_mask=FakeBlockMask(noop_mask))


def packed(total, heads=H):
    return np.zeros((total, heads, D), np.float16)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(q=np.zeros((1, 10, H, D), np.float16)), ValueError, r"q must be a 3-D array"),
        (dict(max_seqlen_q=0), ValueError, r"max_seqlen_q must be the longest"),
        (dict(max_seqlen_k=True), ValueError, r"max_seqlen_k must be the longest"),
        (dict(softmax_scale=0.0), ValueError, r"softmax_scale is 0"),
        (dict(window=5), TypeError, r"window must be a pair"),
        (dict(softcap=5.0, score_mod=mods.softcap(3.0)), ValueError, r"pass softcap once"),
    ],
)
def test_attention_varlen_argument_errors(kwargs, error, message):
    cu = np.array([0, 3, 10], np.int32)
    args = dict(q=packed(10), k=packed(10), v=packed(10), cu_seqlens_q=cu, cu_seqlens_k=cu,
                max_seqlen_q=7, max_seqlen_k=7)
    args.update(kwargs)
    with pytest.raises(error, match=message):
        flashcore.attention_varlen(**args)


def test_valid_varlen_call_reaches_the_device_check():
    cu = np.array([0, 3, 10], np.int32)
    with pytest.raises(ValueError, match=r"q is on cpu"):
        flashcore.attention_varlen(packed(10), packed(10, 2), packed(10, 2), cu, cu, 7, 7,
                                   causal=True, return_lse=True)


def test_check_varlen_passes_valid_arrays():
    # Empty sequences, one of max_seqlen, k longer than q: all valid.
    flashcore.check_varlen(packed(10), packed(12), np.array([0, 0, 3, 10], np.int32),
                           [0, 5, 5, 12], 7, 7)


@pytest.mark.parametrize(
    "cu_q, cu_k, message",
    [
        ([0, 3, 2, 10], [0, 5, 5, 12],
         r"cu_seqlens_q is not sorted: entry 2 \(2\) is below entry 1"),
        ([1, 3, 10], [0, 5, 12], r"cu_seqlens_q\[0\] is 1; it must be 0"),
        ([0, 4, 11], [0, 5, 12],
         r"cu_seqlens_q\[batch\] is 11 but the packed tensors hold 10 rows"),
        ([0, 3, 10], [0, 2, 12], r"cu_seqlens_k makes sequence 1 10 long, above max_seqlen 7"),
        ([0, 3, 10], [0, 12], r"cu_seqlens_q has 3 entries and cu_seqlens_k 2"),
        ([0], [0], r"cu_seqlens_q has 1 entries; it needs batch \+ 1"),
        (np.zeros((2, 2), np.int32), [0, 12], r"cu_seqlens_q must be one-dimensional"),
    ],
)
def test_check_varlen_names_what_is_wrong(cu_q, cu_k, message):
    with pytest.raises(ValueError, match=message):
        flashcore.check_varlen(packed(10), packed(12), cu_q, cu_k, 7, 7)


def test_mods_combine_and_reject_what_has_no_meaning():
    m = mods.and_masks(mods.causal(), mods.documents(np.zeros((B, SQ), np.int32)))
    assert m.window == (-1, 0) and "doc_ids_q" in m.fields()
    with pytest.raises(ValueError, match=r"two windows"):
        mods.and_masks(mods.causal(), mods.sliding_window(8))
    with pytest.raises(ValueError, match=r"prefix_lm is causal past the prefix already"):
        mods.and_masks(mods.causal(), mods.prefix_lm(4))
    with pytest.raises(ValueError, match=r"prefix must be an int >= 0"):
        mods.prefix_lm(-1)
    with pytest.raises(ValueError, match=r"softcap is 0"):
        mods.softcap(0)
    with pytest.raises(TypeError, match=r"and_masks takes flashcore.mods mask_mods"):
        mods.and_masks(lambda b, h, q, kv: True)
    s = mods.compose(mods.alibi(np.ones(H, np.float32)), mods.softcap(30.0))
    assert s.cap == 30.0 and "alibi_slopes" in s.fields()


def test_mods_evaluate_like_pytorch_mods():
    # numpy stands in for tensors: the same elementwise expressions torch's vmap evaluates.
    q_idx, kv_idx = np.arange(6)[:, None], np.arange(6)[None, :]
    causal = mods.causal()(0, 0, q_idx, kv_idx)
    assert (causal == (kv_idx <= q_idx)).all()
    window = mods.sliding_window(2, 0)(0, 0, q_idx, kv_idx)
    assert (window == ((kv_idx <= q_idx) & (kv_idx >= q_idx - 2))).all()
    prefix = mods.prefix_lm(3)(0, 0, q_idx, kv_idx)
    assert (prefix == ((kv_idx <= q_idx) | (kv_idx < 3))).all()


def test_create_block_mask_takes_built_in_mask_mods_only():
    with pytest.raises(TypeError, match=r"flashcore builds masks of its built-in mask_mods"):
        flashcore.create_block_mask(lambda b, h, q, kv: q >= kv, 1, 1, 128, 128)


@pytest.mark.parametrize("jit_mod, head_dim, blocks, message", [
    (object(), 64, None, r"has no backward \(a CUDA snippet"),
    (None, 96, None, r"head_dim 64, 128 and 256 only \(got 96\)"),
    (None, 160, None, r"head_dim 64, 128 and 256 only \(got 160\)"),
    (None, 64, (64, 64), r"kv block a multiple of 128 \(got 64 x 64\)"),
    (None, 128, (32, 128), r"q block is a multiple of 64 .*\(got 32 x 128\)"),
])
def test_what_the_flex_backward_lacks_is_named_before_the_forward(jit_mod, head_dim, blocks,
                                                                   message):
    fields = {} if blocks is None else {"block_mask": (None, None, None, None, *blocks)}
    with pytest.raises(ValueError, match=message):
        flashcore.flex._check_backward_support(jit_mod, head_dim, fields)
    for ok_head_dim in (64, 128, 256):
        flashcore.flex._check_backward_support(
            None, ok_head_dim, {"block_mask": (None, None, None, None, 128, 128)})


@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 16, 16), (2, 4, 300, 555, 64, 128),
                                   (3, 1, 4097, 1000, 128, 64), (1, 16, 16384, 16384, 128, 128)])
def test_block_mask_offsets_follow_the_library_layout(shape):
    """flex.block_mask_offsets (what torch.compile traces views at, without a buffer) ends where
    the library's buffer ends: the four arrays 16-byte aligned one after another. Eager
    create_block_mask also checks it against the builder's offsets on the GPU."""
    B, H, q_len, kv_len, q_block, kv_block = shape
    offsets = flashcore.flex.block_mask_offsets(*shape)
    indices = B * H * -(-q_len // q_block) * -(-kv_len // kv_block)
    end = offsets[3] + -(-4 * indices // 16) * 16
    assert end == flashcore._core.native().block_mask_bytes(*shape)
    assert offsets[0] == 0 and offsets[2] - offsets[0] == offsets[3] - offsets[1]


def _equal_parts(a, b):
    """_mask_parts results compared field by field (arrays by identity)."""
    (window_a, fields_a, jit_a), (window_b, fields_b, jit_b) = a, b
    return (window_a == window_b and jit_a is jit_b and fields_a.keys() == fields_b.keys()
            and all(x is y for key in fields_a for x, y in zip(
                fields_a[key] if key == "block_mask" else (fields_a[key],),
                fields_b[key] if key == "block_mask" else (fields_b[key],))))


@pytest.mark.parametrize("full", [False, True])
def test_own_block_mask_reads_like_torch_s(full):
    """flashcore's own BlockMask is read past its properties (flex._block_mask_fields); what a
    call takes from it is what it takes from a torch-like object with the same fields, and an
    assignment through a property is seen."""
    docs = (np.arange(SQ) // 8).astype(np.int32)[None].repeat(B, 0)
    arrays = [np.zeros((B, 1, 1), np.int32), np.zeros((B, 1, 1, 1), np.int32)]
    full_arrays = [np.zeros((B, 1, 1), np.int32), np.zeros((B, 1, 1, 1), np.int32)]
    own = flashcore.BlockMask(*arrays, *(full_arrays if full else (None, None)), (64, 128),
                              (SQ, SQ), mods.documents(docs))
    torch_like = FakeBlockMask(own.mask_mod, seq_lengths=(SQ, SQ))
    torch_like.kv_num_blocks, torch_like.kv_indices = arrays
    torch_like.BLOCK_SIZE = (64, 128)
    if full:
        torch_like.full_kv_num_blocks, torch_like.full_kv_indices = full_arrays
    parts = flashcore.flex._mask_parts(own, SQ, SQ)
    assert parts[1]["block_mask"][4:] == (64, 128)
    assert _equal_parts(parts, flashcore.flex._mask_parts(torch_like, SQ, SQ))
    replaced = np.ones((B, 1, 1, 1), np.int32)
    own.kv_indices = replaced
    assert flashcore.flex._mask_parts(own, SQ, SQ)[1]["block_mask"][1] is replaced
    with pytest.raises(ValueError, match=r"block_mask was built for \(Q_LEN, KV_LEN\)"):
        flashcore.flex._mask_parts(own, SQ, SQ + 1)
    q = bhsd()
    with pytest.raises(ValueError, match=r"q is on cpu"):
        flashcore.flex_attention(q, q, q, block_mask=own)
