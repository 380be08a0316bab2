# Kernel time of the flex rows beside their dense peers: the attention kernels' device time
# (torch.profiler, no host time) and the time per call of 20 back-to-back calls, B4 H16 S4096 D128
# bf16 plus varlen shapes (16384 tokens in documents of random length, uniform in [256, 2048) as
# bench/flex_lab.py draws them; 16 x 1024) and the dense kernel on the same shapes.
# scripts/time_flex.py times one call between two events, so its rows include the Python
# wrapper's host time (docs/flex.md, "Per-tile cost").
# Run: python3 scripts/time_flex_kernels.py [sm80] [lengths] [--only NAME,NAME]   (sm80: every
# call on the sm80 kernels instead of auto's choice; lengths: also print the documents' lengths;
# --only: the rows whose names contain one of the NAMEs)
import statistics
import sys
import torch
import flashcore
from flashcore import mods
from torch.profiler import profile, ProfilerActivity

BACKEND = "sm80" if "sm80" in sys.argv[1:] else "auto"
torch.manual_seed(0)
B, H, S, D = 4, 16, 4096, 128
q, k, v = (torch.randn(B, H, S, D, dtype=torch.bfloat16, device="cuda") for _ in range(3))
qs, ks, vs = (x.transpose(1, 2) for x in (q, k, v))
pos = torch.arange(S, device="cuda")
own_causal_bm = flashcore.create_block_mask(mods.causal(), None, None, S, S)
# The same lists as a plain BlockMask: flex_attention walks them (a window's own BlockMask is
# dropped and the window walks itself; docs/flex.md, "A window's own BlockMask").
causal_bm = flashcore.BlockMask(own_causal_bm.kv_num_blocks, own_causal_bm.kv_indices,
                                own_causal_bm.full_kv_num_blocks, own_causal_bm.full_kv_indices,
                                own_causal_bm.BLOCK_SIZE, own_causal_bm.seq_lengths,
                                own_causal_bm.mask_mod)
docs = {n: (pos // n).int()[None].expand(B, S).contiguous() for n in (128, 1024)}
doc_bm = {n: flashcore.create_block_mask(mods.documents(docs[n]), B, None, S, S) for n in docs}


# BlockMasks of 64-key blocks (torch's default BLOCK_SIZE; sm90 runs two to a step), walked.
def walked(own):
    return flashcore.BlockMask(own.kv_num_blocks, own.kv_indices, own.full_kv_num_blocks,
                               own.full_kv_indices, own.BLOCK_SIZE, own.seq_lengths, own.mask_mod)


blocks64 = {bs: walked(flashcore.create_block_mask(mods.causal(), None, None, S, S, BLOCK_SIZE=bs))
            for bs in (64, (128, 64))}
doc64_bm = {n: flashcore.create_block_mask(mods.documents(docs[n]), B, None, S, S, BLOCK_SIZE=64)
            for n in docs}
causal_q64_kv128_bm = walked(flashcore.create_block_mask(mods.causal(), None, None, S, S,
                                                         BLOCK_SIZE=(64, 128)))
sinks = torch.full((H,), -1e4, device="cuda")  # time_flex.py's: present, but no weight


def packed(lengths):
    cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).int()
    t = sum(lengths)
    x = [torch.randn(t, H, D, dtype=torch.bfloat16, device="cuda") for _ in range(3)]
    return x, cu, max(lengths)


g = torch.Generator().manual_seed(0)
rand_lengths = []
while sum(rand_lengths) < 16384:  # the lab's draw: uniform [256, 2048), cut at 16384 tokens
    n = int(torch.randint(256, 2048, (1,), generator=g).item())
    rand_lengths.append(min(n, 16384 - sum(rand_lengths)))
vl_rand, cu_rand, max_rand = packed(rand_lengths)
vl_1k, cu_1k, _ = packed([1024] * 16)
q16, k16, v16 = (torch.randn(1, 16384, H, D, dtype=torch.bfloat16, device="cuda") for _ in range(3))
q1k, k1k, v1k = (torch.randn(16, 1024, H, D, dtype=torch.bfloat16, device="cuda") for _ in range(3))
# The lab's other barred shape (B1 H16 S16384, BHSD for flex) and its sliding window of 1024 keys,
# as walked lists (what a torch BlockMask gives the flex kernel).
L = 16384
q16f, k16f, v16f = (x.transpose(1, 2) for x in (q16, k16, v16))
causal16_bm = walked(flashcore.create_block_mask(mods.causal(), None, None, L, L))
WINDOW = 1024
sliding_bm = {n: walked(flashcore.create_block_mask(mods.sliding_window(WINDOW), None, None, n, n))
              for n in (S, L)}


def window_flops(n, batch):
    """4·D per visible (query, key) pair of a causal window of WINDOW keys left of the diagonal."""
    pairs = sum(min(i, WINDOW) + 1 for i in range(n))
    return 4.0 * batch * H * pairs * D
real_rand = sum(2.0 * H * n * n * D for n in rand_lengths)
cases = [  # name, visible (real) FLOPs, fn
    ("dense causal B4 S4096", 2.0 * B * H * S * S * D,
     lambda: flashcore.attention(qs, ks, vs, causal=True, backend=BACKEND)),
    ("flex causal BlockMask", 2.0 * B * H * S * S * D,
     lambda: flashcore.flex_attention(q, k, v, block_mask=causal_bm, backend=BACKEND)),
    ("flex causal, its own BlockMask", 2.0 * B * H * S * S * D,
     lambda: flashcore.flex_attention(q, k, v, block_mask=own_causal_bm, backend=BACKEND)),
    ("flex documents 1024 (non-causal)", 4.0 * B * H * S * 1024 * D,
     lambda: flashcore.flex_attention(q, k, v, block_mask=doc_bm[1024], backend=BACKEND)),
    ("flex documents 128 (non-causal)", 4.0 * B * H * S * 128 * D,
     lambda: flashcore.flex_attention(q, k, v, block_mask=doc_bm[128], backend=BACKEND)),
    ("flex causal BlockMask 64", 2.0 * B * H * S * S * D,
     lambda: flashcore.flex_attention(q, k, v, block_mask=blocks64[64], backend=BACKEND)),
    ("flex causal BlockMask q128 kv64", 2.0 * B * H * S * S * D,
     lambda: flashcore.flex_attention(q, k, v, block_mask=blocks64[128, 64], backend=BACKEND)),
    ("flex causal BlockMask q64 kv128", 2.0 * B * H * S * S * D,
     lambda: flashcore.flex_attention(q, k, v, block_mask=causal_q64_kv128_bm, backend=BACKEND)),
    ("flex documents 1024 BlockMask 64", 4.0 * B * H * S * 1024 * D,
     lambda: flashcore.flex_attention(q, k, v, block_mask=doc64_bm[1024], backend=BACKEND)),
    ("flex documents 128 BlockMask 64", 4.0 * B * H * S * 128 * D,
     lambda: flashcore.flex_attention(q, k, v, block_mask=doc64_bm[128], backend=BACKEND)),
    ("flex no mask, sinks", 4.0 * B * H * S * S * D,
     lambda: flashcore.flex_attention(q, k, v, sinks=sinks, backend=BACKEND)),
    ("dense non-causal B4 S4096", 4.0 * B * H * S * S * D,
     lambda: flashcore.attention(qs, ks, vs, backend=BACKEND)),
    (f"varlen causal {len(rand_lengths)} docs 16384 tok", real_rand,
     lambda: flashcore.attention_varlen(*vl_rand, cu_rand, cu_rand, max_rand, max_rand,
                                        causal=True, backend=BACKEND)),
    ("varlen causal 16 x 1024", 16 * 2.0 * H * 1024 * 1024 * D,
     lambda: flashcore.attention_varlen(*vl_1k, cu_1k, cu_1k, 1024, 1024, causal=True,
                                        backend=BACKEND)),
    ("dense causal B16 S1024", 16 * 2.0 * H * 1024 * 1024 * D,
     lambda: flashcore.attention(q1k, k1k, v1k, causal=True, backend=BACKEND)),
    ("dense causal B1 S16384", 2.0 * H * 16384 * 16384 * D,
     lambda: flashcore.attention(q16, k16, v16, causal=True, backend=BACKEND)),
    ("flex causal BlockMask B1 S16384", 2.0 * H * L * L * D,
     lambda: flashcore.flex_attention(q16f, k16f, v16f, block_mask=causal16_bm, backend=BACKEND)),
    ("dense sliding 1024 B4 S4096", window_flops(S, B),
     lambda: flashcore.attention(qs, ks, vs, causal=True, window=(WINDOW, 0), backend=BACKEND)),
    ("flex sliding 1024 BlockMask B4 S4096", window_flops(S, B),
     lambda: flashcore.flex_attention(q, k, v, block_mask=sliding_bm[S], backend=BACKEND)),
    ("dense sliding 1024 B1 S16384", window_flops(L, 1),
     lambda: flashcore.attention(q16, k16, v16, causal=True, window=(WINDOW, 0), backend=BACKEND)),
    ("flex sliding 1024 BlockMask B1 S16384", window_flops(L, 1),
     lambda: flashcore.flex_attention(q16f, k16f, v16f, block_mask=sliding_bm[L],
                                      backend=BACKEND)),
]
# Only the named rows (a substring of the name each), if any are given with --only.
if "--only" in sys.argv:
    wanted = sys.argv[sys.argv.index("--only") + 1].split(",")
    cases = [c for c in cases if any(w in c[0] for w in wanted)]
if "lengths" in sys.argv[1:]:
    print(len(rand_lengths), "documents", rand_lengths)
for name, flops, fn in cases:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(True), torch.cuda.Event(True)
    a.record()
    for _ in range(20):
        fn()
    b.record()
    b.synchronize()
    wall_us = a.elapsed_time(b) * 1000 / 20
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
    def duration(e):
        try:
            return e.time_range.elapsed_us()
        except AttributeError:
            return e.device_time

    def median_time(kernel_name):
        times = [duration(e) for e in prof.events()
                 if e.device_type == torch.autograd.DeviceType.CUDA and kernel_name in e.name]
        return statistics.median(times) if times else None
    # The attention kernel, plus the merged walks' build where a BlockMask's query blocks are
    # shorter than the sm90 tile (src/sm90/flex_merged_walk.hpp): one launch before it per call.
    kern = median_time("fwd_kernel") or float("nan")
    walk = median_time("merged_walk_kernel")
    walk_note = f" (walks {walk:5.1f} us)" if walk else ""
    kern += walk or 0.0
    print(f"{name:36s} {flashcore.last_provider():5s} kernel {kern:8.1f} us "
          f"{flops / kern / 1e6:6.1f} TFLOP/s | back-to-back {wall_us:8.1f} us{walk_note}",
          flush=True)
