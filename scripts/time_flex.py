# Timings of the flex kernels (auto: sm90 on an H100; and the sm80 one, backend="sm80") next to the
# dense kernels (docs/flex.md): one process, CUDA events, median of 20 calls after 5 warm-ups, B4
# H16 S4096 D128 bf16 (another head dim: the first argument, e.g. 256, whose sm90 flex kernel has
# 64-key tiles). TFLOP/s count only the visible pairs.
# Needs a GPU and the flashcore Python package: python3 scripts/time_flex.py [HEAD_DIM]
import statistics
import sys
import torch
import flashcore
from flashcore import mods
torch.manual_seed(0)
B, H, S, D = 4, 16, 4096, int(sys.argv[1]) if len(sys.argv) > 1 else 128
q, k, v = (torch.randn(B, H, S, D, dtype=torch.bfloat16, device="cuda") for _ in range(3))
qs, ks, vs = (x.transpose(1, 2) for x in (q, k, v))
def t(fn):
    for _ in range(5): fn()
    times = []
    for _ in range(20):
        a, b = torch.cuda.Event(True), torch.cuda.Event(True)
        a.record(); fn(); b.record(); b.synchronize(); times.append(a.elapsed_time(b))
    return statistics.median(times)
def tf(ms, frac): return 4 * B * H * S * S * D * frac / ms / 1e9
res = {}
def add(name, frac, fn):
    ms = t(fn); res[name] = (ms, frac, flashcore.last_provider())
add("dense (auto)", 1.0, lambda: flashcore.attention(qs, ks, vs))
add("dense causal (auto)", 0.5, lambda: flashcore.attention(qs, ks, vs, causal=True))
add("dense sm80", 1.0, lambda: flashcore.attention(qs, ks, vs, backend="sm80"))
add("dense causal sm80", 0.5, lambda: flashcore.attention(qs, ks, vs, causal=True, backend="sm80"))
def walked(own):
    """The same lists as a plain BlockMask, which flex_attention walks (it drops a window's own
    BlockMask: the window walks itself; docs/flex.md, "A window's own BlockMask")."""
    return flashcore.BlockMask(own.kv_num_blocks, own.kv_indices, own.full_kv_num_blocks,
                               own.full_kv_indices, own.BLOCK_SIZE, own.seq_lengths, own.mask_mod)
own_causal_bm = flashcore.create_block_mask(mods.causal(), B, None, S, S)
causal_bm = walked(own_causal_bm)
causal_bm64 = walked(flashcore.create_block_mask(mods.causal(), B, None, S, S, BLOCK_SIZE=64))
sinks = torch.full((H,), -1e4, device="cuda")
docs = (torch.arange(S, device="cuda") // 1024).int()[None].expand(B, S).contiguous()
doc_bm = flashcore.create_block_mask(mods.documents(docs), B, None, S, S)
slopes = torch.rand(H, device="cuda")
cu = torch.arange(0, B * S + 1, S, device="cuda", dtype=torch.int32)
qp, kp, vp = (x.reshape(B * S, H, D) for x in (qs.contiguous(), ks.contiguous(), vs.contiguous()))
for be in ("auto", "sm80"):
    add(f"flex causal BlockMask {be}", 0.5,
        lambda: flashcore.flex_attention(q, k, v, block_mask=causal_bm, backend=be))
    add(f"flex causal, own BlockMask {be}", 0.5,
        lambda: flashcore.flex_attention(q, k, v, block_mask=own_causal_bm, backend=be))
    add(f"flex causal BlockMask 64 {be}", 0.5,
        lambda: flashcore.flex_attention(q, k, v, block_mask=causal_bm64, backend=be))
    add(f"flex no mask, sinks {be}", 1.0,
        lambda: flashcore.flex_attention(q, k, v, sinks=sinks, backend=be))
    add(f"flex documents 1024 {be}", 0.25,
        lambda: flashcore.flex_attention(q, k, v, block_mask=doc_bm, backend=be))
    add(f"flex alibi + causal {be}", 0.5,
        lambda: flashcore.flex_attention(q, k, v, score_mod=mods.alibi(slopes),
                                         block_mask=causal_bm, backend=be))
    add(f"flex alibi + causal, own BM {be}", 0.5,
        lambda: flashcore.flex_attention(q, k, v, score_mod=mods.alibi(slopes),
                                         block_mask=own_causal_bm, backend=be))
    add(f"varlen causal 4 x 4096 {be}", 0.5,
        lambda: flashcore.attention_varlen(qp, kp, vp, cu, cu, S, S, causal=True, backend=be))
for name, (ms, frac, provider) in res.items():
    print(f"{name:32s} {provider:6s} {ms*1000:9.1f} us  {tf(ms, frac):6.1f} TFLOP/s (visible FLOPs)")
