# Device time per call of varlen batches on the dense sm90 forward (every kernel of the call: the
# tile list's build or the tile counter's memset, and the forward; torch.profiler, the forward's
# median over 10 calls after 3 warm-ups plus the others' mean), 16384 tokens, H16 bf16 causal:
# random document lengths, a loose max_seqlen, one long sequence among short ones, batches of
# equal lengths, and dense controls (docs/perf.md, session 25).
# Run: python3 scripts/time_varlen_kernels.py (needs torch, flashcore and an sm_90 GPU).
import statistics
import torch
import flashcore
from torch.profiler import profile, ProfilerActivity

H, TOKENS = 16, 16384


def rand_lengths(seed, low=256, high=2048, tokens=TOKENS):
    g = torch.Generator().manual_seed(seed)
    lengths = []
    while sum(lengths) < tokens:
        n = int(torch.randint(low, high, (1,), generator=g).item())
        lengths.append(min(n, tokens - sum(lengths)))
    return lengths


def varlen(d, lengths, max_q=None):
    cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).int()
    q, k, v = (torch.randn(TOKENS, H, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    m = max_q or max(lengths)
    flops = sum(2.0 * H * n * (n + 1) * d for n in lengths)
    return flops, lambda: flashcore.attention_varlen(q, k, v, cu, cu, m, max(lengths), causal=True)


def dense(d, b, s, causal=True):
    q, k, v = (torch.randn(b, s, H, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    flops = 4.0 * b * H * s * s * d / (2 if causal else 1)
    return flops, lambda: flashcore.attention(q, k, v, causal=causal)


tail = [4096] + rand_lengths(7, 64, 512, TOKENS - 4096)
assert sum(tail) == TOKENS and min(tail) > 0
print("one long + short:", len(tail), "sequences, lengths", min(tail), "-", max(tail[1:]), "then 4096")
rows = [
    ("hd128 varlen random lengths (lab draw)", *varlen(128, rand_lengths(0))),
    ("hd128 varlen random lengths (seed 1)", *varlen(128, rand_lengths(1))),
    ("hd64 varlen random lengths (lab draw)", *varlen(64, rand_lengths(0))),
    ("hd128 varlen 128 x 128, max_seqlen 128", *varlen(128, [128] * 128)),
    ("hd128 varlen 128 x 128, max_seqlen 1024", *varlen(128, [128] * 128, 1024)),
    ("hd128 varlen one 4096 + short 64-511", *varlen(128, tail)),
    ("hd128 varlen 16 x 1024", *varlen(128, [1024] * 16)),
    ("hd128 dense causal B16 S1024", *dense(128, 16, 1024)),
    ("hd128 dense causal B4 S4096", *dense(128, 4, 4096)),
    ("hd128 dense B4 S4096", *dense(128, 4, 4096, False)),
    ("hd128 dense causal B1 S16384", *dense(128, 1, 16384)),
    ("hd64 dense causal B4 S4096", *dense(64, 4, 4096)),
]


def device_us(fn, n=10):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    fwd, other = [], 0.0
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        try:
            d = e.time_range.elapsed_us()
        except AttributeError:
            d = e.device_time
        if "fwd_kernel" in e.name:
            fwd.append(d)
        else:
            other += d
    return statistics.median(fwd), other / n


for name, flops, fn in rows:
    k, o = device_us(fn)
    print(f"{name:42s} {k + o:8.1f} us (fwd {k:7.1f} + {o:4.1f}) {flops / (k + o) / 1e6:6.1f} TFLOP/s",
          flush=True)
