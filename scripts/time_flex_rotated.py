# The lab's barred flex rows timed as the lab times them, without torch.compile: inputs rotated
# over enough sets to leave L2 (bench/peers.py's input_sets), so each call reads q, k and v from
# HBM, beside the dense kernel on the same tiles. Prints, per row, the lab's time per call
# (peers.time_fn: CUDA events, median) and the device time of the call's kernels (torch.profiler
# over rotated calls: the attention kernel plus the merged walks' build). B4 H16 S4096 D128 bf16,
# torch's create_block_mask at BLOCK_SIZE 128 (and 64 for documents), as bench/flex_lab.py; and
# varlen batches of 16k tokens with mods (the flex kernel) and without (the dense one).
# Run: PYTHONPATH=bench python3 scripts/time_flex_rotated.py [--only NAME,NAME] [--head-dim D]
# (D: every row at that head dim, e.g. 256, whose sm90 flex kernel has 64-key tiles)
import statistics
import sys

import torch
from torch.nn.attention.flex_attention import create_block_mask
from torch.profiler import ProfilerActivity, profile

import flashcore
import peer_cases
import peers
from flashcore import mods

B, H, S = 4, 16, 4096
D = int(sys.argv[sys.argv.index("--head-dim") + 1]) if "--head-dim" in sys.argv else 128
WINDOW, PREFIX = 1024, S // 4


def rotated(batch, seqlen, layout="bhsd"):
    """Input sets as the lab's: enough (q, k, v) to leave L2."""
    sets = peers.input_sets(peer_cases.Case(batch, H, seqlen, D, False, "bf16"))
    shape = (batch, H, seqlen, D) if layout == "bhsd" else (batch, seqlen, H, D)
    return [[torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
            for _ in range(sets)]


def block_mask(mask_mod, batch, seqlen=S, block_size=128):
    return create_block_mask(mask_mod, batch, None, seqlen, seqlen, device="cuda",
                             BLOCK_SIZE=block_size)


torch.manual_seed(0)
inputs = rotated(B, S)
positions = torch.arange(S, device="cuda")
slopes = torch.rand(H, device="cuda") * 0.1


def docs_mask(span):
    docs = (positions // span).int().expand(B, S).contiguous()
    return mods.and_masks(mods.causal(), mods.documents(docs))


def flex(mask_mod, batch=None, score_mod=None, sets=None, block_size=128):
    sets = inputs if sets is None else sets
    bm = block_mask(mask_mod, batch, sets[0][0].shape[2], block_size)
    return [lambda q=q, k=k, v=v: flashcore.flex_attention(q, k, v, score_mod=score_mod,
                                                           block_mask=bm) for q, k, v in sets]


def dense(batch, seqlen, **kwargs):
    sets = rotated(batch, seqlen, "bshd")
    return [lambda q=q, k=k, v=v: flashcore.attention(q, k, v, **kwargs) for q, k, v in sets]


def same_lists(mask_mod, lists_of, batch):
    """Timing only: the BlockMask of lists_of's mask, run with mask_mod on its partial blocks."""
    bm = block_mask(lists_of, batch)
    bm = flashcore.BlockMask(bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks,
                             bm.full_kv_indices, bm.BLOCK_SIZE, bm.seq_lengths, mask_mod)
    return [lambda q=q, k=k, v=v: flashcore.flex_attention(q, k, v, block_mask=bm)
            for q, k, v in inputs]


def varlen(lengths, **kwargs):
    """Packed sequences of these lengths, causal, over rotated input sets: with ALiBi or sinks
    (mods) they run on the flex kernel, without on the dense one."""
    tokens = sum(lengths)
    cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).int()
    sets = peers.input_sets(peer_cases.Case(1, H, tokens, D, True, "bf16"))
    packed = [[torch.randn(tokens, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
              for _ in range(sets)]
    return [lambda q=q, k=k, v=v: flashcore.attention_varlen(
        q, k, v, cu, cu, max(lengths), max(lengths), causal=True, **kwargs) for q, k, v in packed]


# 16k tokens: documents of random length as the lab's varlen row draws them (mean 1024), and one
# long document beside many short ones (most of the grid's query tiles empty).
varlen_generator = torch.Generator().manual_seed(1)
random_lengths = []
while sum(random_lengths) < 16384:
    draw = int(torch.randint(256, 2048, (1,), generator=varlen_generator).item())
    random_lengths.append(min(draw, 16384 - sum(random_lengths)))
skewed_lengths = [8192] + [128] * 64
sinks = torch.rand(H, device="cuda")

rows = [  # name, calls over the input sets
    ("flex documents 128", lambda: flex(docs_mask(128), B)),
    ("dense causal B128 S128 (same tiles)", lambda: dense(B * S // 128, 128, causal=True)),
    ("flex causal B128 S128 (same tiles)", lambda: flex(mods.causal(),
                                                        sets=rotated(B * S // 128, 128))),
    ("flex documents 128's lists, causal only", lambda: same_lists(mods.causal(),
                                                                    docs_mask(128), B)),
    ("flex documents 1024", lambda: flex(docs_mask(1024), B)),
    ("flex documents 128, BLOCK_SIZE 64", lambda: flex(docs_mask(128), B, block_size=64)),
    ("flex documents 1024, BLOCK_SIZE 64", lambda: flex(docs_mask(1024), B, block_size=64)),
    ("dense causal B16 S1024 (same tiles)", lambda: dense(B * S // 1024, 1024, causal=True)),
    ("flex sliding 1024", lambda: flex(mods.sliding_window(WINDOW))),
    ("dense sliding 1024", lambda: dense(B, S, causal=True, window=(WINDOW, 0))),
    ("flex prefix-LM", lambda: flex(mods.prefix_lm(PREFIX))),
    ("flex ALiBi", lambda: flex(mods.causal(), score_mod=mods.alibi(slopes))),
    ("flex causal", lambda: flex(mods.causal())),
    ("dense causal B4 S4096", lambda: dense(B, S, causal=True)),
    ("flex varlen random, ALiBi", lambda: varlen(random_lengths, score_mod=mods.alibi(slopes))),
    ("flex varlen random, sinks", lambda: varlen(random_lengths, sinks=sinks)),
    ("dense varlen random", lambda: varlen(random_lengths)),
    ("flex varlen 8192 + 64 x 128, ALiBi", lambda: varlen(skewed_lengths,
                                                          score_mod=mods.alibi(slopes))),
    ("flex varlen 8192 + 64 x 128, sinks", lambda: varlen(skewed_lengths, sinks=sinks)),
    ("dense varlen 8192 + 64 x 128", lambda: varlen(skewed_lengths)),
]
if "--only" in sys.argv:
    wanted = sys.argv[sys.argv.index("--only") + 1].split(",")
    rows = [r for r in rows if any(w in r[0] for w in wanted)]

peers.warm_gpu()
for name, make in rows:
    fns = make()
    timing = peers.time_fn(fns)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(4 * len(fns)):
            fns[i % len(fns)]()
        torch.cuda.synchronize()
    calls = 4 * len(fns)
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]

    def duration(e):
        try:
            return e.time_range.elapsed_us()
        except AttributeError:
            return e.device_time

    attention = [duration(e) for e in kernels if "fwd_kernel" in e.name]
    device_us = sum(duration(e) for e in kernels) / calls
    print(f"{name:38s} time {timing['p50_us']:7.1f} us | device {device_us:7.1f} us/call, "
          f"attention kernel median {statistics.median(attention):7.1f} us", flush=True)
    del fns
    torch.cuda.empty_cache()
