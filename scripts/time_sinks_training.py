"""Times a training step's attention with attention sinks (gpt-oss's learned per-head logit)
through flashcore.flex_attention: the forward alone, and forward + backward with the sink logits'
gradient included, next to the same step without sinks through flashcore.attention, so that what
the sinks cost is stated.
Shapes: B4 H16 S4096 D128 causal, and gpt-oss's attention (64 query heads, 8 KV heads, D64) at
B2 S4096, causal and with its 128-token sliding window. bf16. Each step is queued behind a sleep
so that host time stays out of the interval; median of 20 CUDA-event timings after 3 warm-ups.
Not a test: the numbers are docs/perf.md's (sessions 29 and 30).
Run: PYTHONPATH=<flashcore's site> python3 scripts/time_sinks_training.py [--profile]
(--profile: also each kernel's device time in one step of each row)"""

import sys

import torch
from step_timing import median_ms, print_kernel_times

import flashcore
from flashcore import mods

PROFILE = "--profile" in sys.argv
SHAPES = [  # (name, batch, query heads, kv heads, seqlen, head dim, window left or -1)
    ("B4 H16 S4096 D128 causal", 4, 16, 16, 4096, 128, -1),
    ("gpt-oss B2 Hq64 Hkv8 S4096 D64 causal", 2, 64, 8, 4096, 64, -1),
    ("gpt-oss B2 Hq64 Hkv8 S4096 D64 window 128", 2, 64, 8, 4096, 64, 127),
]


def main():
    torch.manual_seed(0)
    for name, b, hq, hkv, s, d, window in SHAPES:
        q = torch.randn(b, hq, s, d, dtype=torch.bfloat16, device="cuda", requires_grad=True)
        k, v = (torch.randn(b, hkv, s, d, dtype=torch.bfloat16, device="cuda", requires_grad=True)
                for _ in range(2))
        grad = torch.randn(b, hq, s, d, dtype=torch.bfloat16, device="cuda")
        sinks = torch.randn(hq, dtype=torch.float32, device="cuda", requires_grad=True)
        mask = mods.causal() if window < 0 else mods.sliding_window(window)
        block_mask = flashcore.create_block_mask(mask, None, None, s, s)

        def forward_with_sinks():
            return flashcore.flex_attention(q, k, v, block_mask=block_mask, sinks=sinks,
                                            enable_gqa=hq != hkv)

        def forward_without_sinks():
            # flashcore.attention takes BSHD: the same tensors, transposed views.
            return flashcore.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                       causal=True, window=(window, 0))

        def with_sinks():
            torch.autograd.grad(forward_with_sinks(), (q, k, v, sinks), grad)

        def without_sinks():
            torch.autograd.grad(forward_without_sinks(), (q, k, v), grad.transpose(1, 2))

        flops = 4 * b * hq * s * s * d / 2  # causal forward; the backward is 2.5x
        if window >= 0:
            flops = flops * (window + 1) / (s / 2)
        for label, forward, step in (("sinks", forward_with_sinks, with_sinks),
                                     ("no sinks", forward_without_sinks, without_sinks)):
            with torch.no_grad():
                forward_ms = median_ms(forward)
            ms = median_ms(step)
            print(f"{name:44s} {label:8s} forward {forward_ms * 1e3:7.1f} us"
                  f" ({flops / forward_ms / 1e9:5.1f} TFLOP/s)  forward+backward {ms * 1e3:7.1f}"
                  f" us ({3.5 * flops / ms / 1e9:5.1f})", flush=True)
            if PROFILE:
                print_kernel_times(step)


if __name__ == "__main__":
    main()
