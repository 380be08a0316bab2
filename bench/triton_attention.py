"""The "Triton" row of the FlashCore table: a compact FlashAttention-2 style forward kernel.

One program owns BLOCK_M query rows of one (batch, head) and streams K/V in BLOCK_N blocks with an
online softmax in base 2. Blocks that every row sees fully run without mask arithmetic; only the
causal diagonal and the ragged tail are masked. BSHD (or any strides with a contiguous head dim),
GQA, causal (bottom-right aligned) or not; fp16/bf16; head_dim a power of two. Forward only.
"""

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


def _configs():
    shapes = [
        (128, 64, 4, 3),
        (128, 64, 8, 3),
        (128, 128, 8, 3),
        (128, 32, 4, 4),
        (128, 64, 8, 2),
        (64, 64, 4, 4),
        (64, 32, 4, 3),
        (64, 128, 4, 2),
    ]
    return [
        triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s)
        for m, n, w, s in shapes
    ]


def _fits(configs, named_args, **kwargs):
    # K and V tiles per pipeline stage plus the Q tile, in 2-byte elements; the H100 has 227 KiB of
    # shared memory per block. Dropping what cannot fit saves autotuning compile time.
    head_dim = named_args["HEAD_DIM"] if "HEAD_DIM" in named_args else kwargs["HEAD_DIM"]

    def smem(c):
        return 2 * head_dim * (c.num_stages * 2 * c.kwargs["BLOCK_N"] + c.kwargs["BLOCK_M"])

    return [c for c in configs if smem(c) <= 200 * 1024] or configs[-1:]


@triton.jit
def _attend_blocks(
    acc,
    l_i,
    m_i,
    q,
    k_ptrs,
    v_ptrs,
    stride_ks,
    stride_vs,
    start,
    end,
    offs_m,
    offs_n,
    seqlen_k,
    diagonal_offset,
    qk_scale,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    for start_n in range(start, end, BLOCK_N):
        cols = start_n + offs_n
        if MASKED:
            k = tl.load(k_ptrs + start_n * stride_ks, mask=cols[None, :] < seqlen_k, other=0.0)
        else:
            k = tl.load(k_ptrs + start_n * stride_ks)
        s = tl.dot(q, k) * qk_scale
        if MASKED:
            keep = cols[None, :] < seqlen_k
            if CAUSAL:
                keep = keep & (cols[None, :] <= offs_m[:, None] + diagonal_offset)
            s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        # A row that has seen no key yet keeps m = -inf; subtract 0 then, not -inf (NaN).
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(s - m_ref[:, None])
        alpha = tl.math.exp2(m_i - m_ref)
        l_i = l_i * alpha + tl.sum(p, 1)
        if MASKED:
            v = tl.load(v_ptrs + start_n * stride_vs, mask=cols[:, None] < seqlen_k, other=0.0)
        else:
            v = tl.load(v_ptrs + start_n * stride_vs)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.autotune(
    configs=_configs(),
    key=["seqlen_q", "seqlen_k", "HEAD_DIM", "CAUSAL"],
    prune_configs_by={"early_config_prune": _fits},
)
@triton.jit
def _attention_fwd(
    Q,
    K,
    V,
    Out,
    qk_scale,
    stride_qb,
    stride_qs,
    stride_qh,
    stride_kb,
    stride_ks,
    stride_kh,
    stride_vb,
    stride_vs,
    stride_vh,
    stride_ob,
    stride_os,
    stride_oh,
    heads_q,
    group,
    seqlen_q,
    seqlen_k,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    if CAUSAL:  # the longest rows (most keys) first, so short ones fill the tail of the wave
        pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        pid_m = tl.program_id(0)
    batch = tl.program_id(1) // heads_q
    head = tl.program_id(1) % heads_q
    kv_head = head // group
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)

    q_ptrs = (
        Q + batch * stride_qb + head * stride_qh + offs_m[:, None] * stride_qs + offs_d[None, :]
    )
    q = tl.load(q_ptrs, mask=offs_m[:, None] < seqlen_q, other=0.0)
    # K is read transposed ([HEAD_DIM, BLOCK_N]) so that S = Q K^T is a plain tl.dot.
    k_ptrs = (
        K + batch * stride_kb + kv_head * stride_kh + offs_n[None, :] * stride_ks + offs_d[:, None]
    )
    v_ptrs = (
        V + batch * stride_vb + kv_head * stride_vh + offs_n[:, None] * stride_vs + offs_d[None, :]
    )

    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)

    diagonal_offset = seqlen_k - seqlen_q  # bottom-right aligned causal mask
    full_end = (seqlen_k // BLOCK_N) * BLOCK_N
    end = seqlen_k
    if CAUSAL:
        first_row = pid_m * BLOCK_M
        # Blocks wholly left of the first row's diagonal need no mask; keys beyond the last
        # row's diagonal are never visited.
        unmasked = tl.maximum(first_row + diagonal_offset + 1, 0)
        full_end = tl.minimum(full_end, (unmasked // BLOCK_N) * BLOCK_N)
        end = tl.minimum(end, tl.maximum(first_row + BLOCK_M + diagonal_offset, 0))
    acc, l_i, m_i = _attend_blocks(
        acc,
        l_i,
        m_i,
        q,
        k_ptrs,
        v_ptrs,
        stride_ks,
        stride_vs,
        0,
        full_end,
        offs_m,
        offs_n,
        seqlen_k,
        diagonal_offset,
        qk_scale,
        MASKED=False,
        CAUSAL=CAUSAL,
        BLOCK_N=BLOCK_N,
    )
    acc, l_i, m_i = _attend_blocks(
        acc,
        l_i,
        m_i,
        q,
        k_ptrs,
        v_ptrs,
        stride_ks,
        stride_vs,
        full_end,
        end,
        offs_m,
        offs_n,
        seqlen_k,
        diagonal_offset,
        qk_scale,
        MASKED=True,
        CAUSAL=CAUSAL,
        BLOCK_N=BLOCK_N,
    )

    # Fully masked rows (causal with seqlen_q > seqlen_k) have l = 0 and write 0, as flash_attn.
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    o_ptrs = (
        Out + batch * stride_ob + head * stride_oh + offs_m[:, None] * stride_os + offs_d[None, :]
    )
    tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=offs_m[:, None] < seqlen_q)


def attention(q, k, v, causal=False, softmax_scale=None):
    """q [B, Sq, Hq, D], k and v [B, Sk, Hkv, D] (any strides, contiguous D) -> [B, Sq, Hq, D]."""
    batch, seqlen_q, heads_q, head_dim = q.shape
    seqlen_k, heads_kv = k.shape[1], k.shape[2]
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
        raise ValueError("the head dim of q, k and v must be contiguous")
    if heads_q % heads_kv != 0 or head_dim & (head_dim - 1) != 0:
        raise ValueError("needs heads_q % heads_kv == 0 and a power-of-two head_dim")
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    scale = head_dim**-0.5 if softmax_scale is None else softmax_scale
    grid = lambda meta: (triton.cdiv(seqlen_q, meta["BLOCK_M"]), batch * heads_q)  # noqa: E731
    _attention_fwd[grid](
        q,
        k,
        v,
        out,
        scale * LOG2E,
        q.stride(0),
        q.stride(1),
        q.stride(2),
        k.stride(0),
        k.stride(1),
        k.stride(2),
        v.stride(0),
        v.stride(1),
        v.stride(2),
        out.stride(0),
        out.stride(1),
        out.stride(2),
        heads_q,
        heads_q // heads_kv,
        seqlen_q,
        seqlen_k,
        HEAD_DIM=head_dim,
        CAUSAL=causal,
    )
    return out
