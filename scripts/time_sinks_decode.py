"""Times gpt-oss's decode step (one query token per sequence; 64 query heads over 8 KV heads, head
dim 64, bf16) with attention sinks through flashcore.flex_attention, next to the same step without
sinks through flashcore.attention, over KV caches of several lengths: each path's kernels' device
time (torch.profiler, median of 10 calls after 3 warm-ups) and the K and V bytes it reads per
microsecond, with the provider each ran on. Then two prefills with sinks that the dense kernel's
sinks variant does not take (head dim 96; softcap), in TFLOP/s. Not a test: the numbers are
docs/perf.md's (session 30). Run: PYTHONPATH=<flashcore's site> python3 scripts/time_sinks_decode.py"""

import statistics

import torch
from step_timing import kernel_times

import flashcore
from flashcore import mods

HQ, HKV, D = 64, 8, 64
WARMUP, ITERATIONS = 3, 10
CASES = [(1, 8192), (1, 65536), (8, 8192), (8, 32768), (32, 4096), (64, 8192)]  # (batch, keys)
PREFILLS = [(96, 0.0), (128, 30.0)]  # (head dim, softcap): B2 H16 S4096 causal


def kernel_us(call):
    """Median over ITERATIONS calls of the summed device time of each call's kernels."""
    for _ in range(WARMUP):
        call()
    torch.cuda.synchronize()
    return statistics.median(sum(us for _, us in kernel_times(call)) for _ in range(ITERATIONS))


def main():
    torch.manual_seed(0)
    for batch, keys in CASES:
        q = torch.randn(batch, HQ, 1, D, dtype=torch.bfloat16, device="cuda")
        k, v = (torch.randn(batch, HKV, keys, D, dtype=torch.bfloat16, device="cuda")
                for _ in range(2))
        sinks = torch.randn(HQ, dtype=torch.float32, device="cuda")
        kv_bytes = 2 * k.numel() * k.element_size()
        rows = []
        for label, call in (
            ("sinks", lambda: flashcore.flex_attention(q, k, v, sinks=sinks, enable_gqa=True)),
            ("no sinks", lambda: flashcore.attention(q.transpose(1, 2), k.transpose(1, 2),
                                                     v.transpose(1, 2))),
        ):
            us = kernel_us(call)
            rows.append(f"{label} {us:7.1f} us ({kv_bytes / us / 1e3:6.0f} GB/s, "
                        f"{flashcore.last_provider()})")
        print(f"B{batch:<3d} Sk {keys:6d}  " + "   ".join(rows), flush=True)
    b, h, s = 2, 16, 4096
    for d, softcap in PREFILLS:
        q, k, v = (torch.randn(b, h, s, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
        sinks = torch.randn(h, dtype=torch.float32, device="cuda")
        mask = flashcore.create_block_mask(mods.causal(), None, None, s, s)
        score = mods.softcap(softcap) if softcap > 0 else None
        flops = 4 * b * h * s * s * d / 2
        rows = []
        for label, call in (
            ("sinks", lambda: flashcore.flex_attention(q, k, v, score_mod=score, block_mask=mask,
                                                       sinks=sinks)),
            ("no sinks", lambda: flashcore.attention(q.transpose(1, 2), k.transpose(1, 2),
                                                     v.transpose(1, 2), causal=True,
                                                     softcap=softcap)),
        ):
            us = kernel_us(call)
            rows.append(f"{label} {us:7.1f} us ({flops / us / 1e6:5.1f} TFLOP/s, "
                        f"{flashcore.last_provider()})")
        print(f"B{b} H{h} S{s} D{d} causal softcap {softcap:g}  " + "   ".join(rows), flush=True)


if __name__ == "__main__":
    main()
