# Varlen batches whose sequences are not all the longest, forward and forward + backward through
# flashcore.attention_varlen (causal, H16 hd128 bf16): one 8192-token document beside 64 of 128
# tokens (either order), the long document alone, and 16k tokens of documents of random length
# (256-2047, seeded). Plain varlen runs the dense sm90 kernels; with sinks, the dense forward's
# sinks variant (since session 30; the flex forward before) and the sm90 backward (since session
# 29; the sm80 flex backward before). Prints the median of 20 CUDA-event timings after 3 warm-ups
# per row, each queued behind a sleep so that host time stays out; the inputs (q, k, v, dO: 128 MiB
# or more) do not fit L2. Not a test: the numbers are docs/perf.md's (sessions 28 and 30).
# Run: PYTHONPATH=<flashcore's site> python3 scripts/time_varlen_skewed.py [--profile] [--only NAME]
import sys

import torch
from step_timing import median_ms, print_kernel_times

import flashcore

H, D = 16, 128
PROFILE = "--profile" in sys.argv  # also print each kernel's device time for one call


def batch(lengths):
    tokens = sum(lengths)
    cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).int()
    q, k, v = (torch.randn(tokens, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    grad = torch.randn(tokens, H, D, device="cuda", dtype=torch.bfloat16)
    return q, k, v, grad, cu, max(lengths)


generator = torch.Generator().manual_seed(1)
random_lengths = []
while sum(random_lengths) < 16384:
    draw = int(torch.randint(256, 2048, (1,), generator=generator).item())
    random_lengths.append(min(draw, 16384 - sum(random_lengths)))
rows = [("8192 alone", [8192]), ("8192 + 64 x 128", [8192] + [128] * 64),
        ("64 x 128 + 8192", [128] * 64 + [8192]),
        (f"random ({len(random_lengths)} documents)", random_lengths)]
if "--only" in sys.argv:
    rows = [r for r in rows if sys.argv[sys.argv.index("--only") + 1] in r[0]]
for name, lengths in rows:
    for mods in ({}, {"sinks": torch.rand(H, device="cuda")}):
        q, k, v, grad, cu, longest = batch(lengths)

        def forward():
            return flashcore.attention_varlen(q, k, v, cu, cu, longest, longest, causal=True,
                                              **mods)

        def forward_backward():
            forward().backward(grad)

        with torch.no_grad():
            forward_ms = median_ms(forward)
        both_ms = median_ms(forward_backward)
        print(f"{name:26s} {'sinks' if mods else 'plain':5s} forward {forward_ms * 1e3:8.1f} us"
              f"  forward+backward {both_ms * 1e3:8.1f} us", flush=True)
        if PROFILE:
            print_kernel_times(forward_backward)
