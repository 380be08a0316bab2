# Kernel time of the dense sm90 forward where a warpgroup's rows see only part of a key block
# (docs/perf.md, "Session 24"): causal at short and long sequences, a sliding window, varlen
# batches of random lengths, hd64 and hd128, plus non-causal controls. Device time by
# torch.profiler (median of 10 launches after 3 warm-ups, the same inputs each time), no host time.
# Run: python3 scripts/time_causal_kernels.py [--only NAME,NAME]
import statistics
import sys
import torch
import flashcore
from torch.profiler import profile, ProfilerActivity

H = 16
DTYPE = torch.bfloat16
TOKENS = 16384  # per row: B x S, and the varlen batches' total


def rand_lengths(seed, mean=1024):
    """bench/flex_lab.py's draw: uniform [mean / 4, 2 mean), cut at TOKENS."""
    g = torch.Generator().manual_seed(seed)
    lengths = []
    while sum(lengths) < TOKENS:
        n = int(torch.randint(mean // 4, 2 * mean, (1,), generator=g).item())
        lengths.append(min(n, TOKENS - sum(lengths)))
    return lengths


def dense_case(d, s, causal, window=None, sk=None):
    b = TOKENS // s
    sk = sk or s
    q = torch.randn(b, s, H, d, dtype=DTYPE, device="cuda")
    k, v = (torch.randn(b, sk, H, d, dtype=DTYPE, device="cuda") for _ in range(2))
    if window is not None:
        pairs = sum(min(i, window) + 1 for i in range(s))
    elif causal:
        pairs = s * (s + 1) // 2 if sk == s else None
    else:
        pairs = s * sk
    flops = 4.0 * b * H * pairs * d if pairs else float("nan")
    kwargs = dict(causal=causal or window is not None)
    if window is not None:
        kwargs["window"] = (window, 0)
    return flops, lambda: flashcore.attention(q, k, v, **kwargs)


def varlen_case(d, lengths):
    cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).int()
    q, k, v = (torch.randn(TOKENS, H, d, dtype=DTYPE, device="cuda") for _ in range(3))
    flops = sum(2.0 * H * n * (n + 1) * d for n in lengths)  # causal: 4·H·D per visible pair
    longest = max(lengths)
    return flops, lambda: flashcore.attention_varlen(q, k, v, cu, cu, longest, longest,
                                                     causal=True)


cases = []
for d in (64, 128):
    for s in (512, 1024, 2048, 4096, 16384):
        cases.append((f"hd{d} causal B{TOKENS // s} S{s}", *dense_case(d, s, True)))
    cases.append((f"hd{d} varlen causal, random lengths", *varlen_case(d, rand_lengths(0))))
    cases.append((f"hd{d} sliding 1024 B4 S4096", *dense_case(d, 4096, False, window=1024)))
    cases.append((f"hd{d} non-causal B4 S4096 (control)", *dense_case(d, 4096, False)))
cases.append(("hd128 varlen causal, random lengths (2)", *varlen_case(128, rand_lengths(1))))
cases.append(("hd128 causal B16 S1000 Sk 1000", *dense_case(128, 1000, True)))
cases.append(("hd128 non-causal B16 S1000 (control)", *dense_case(128, 1000, False)))

if "--only" in sys.argv:
    wanted = sys.argv[sys.argv.index("--only") + 1].split(",")
    cases = [c for c in cases if any(w in c[0] for w in wanted)]


def duration(event):
    try:
        return event.time_range.elapsed_us()
    except AttributeError:
        return event.device_time


for name, flops, fn in cases:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
    times = [duration(e) for e in prof.events()
             if e.device_type == torch.autograd.DeviceType.CUDA and "fwd_kernel" in e.name]
    kern = statistics.median(times) if times else float("nan")
    print(f"{name:42s} {flashcore.last_provider():5s} kernel {kern:8.1f} us "
          f"{flops / kern / 1e6:6.1f} TFLOP/s", flush=True)
