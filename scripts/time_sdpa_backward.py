"""Times torch's SDPA backward (cuDNN and FlashAttention-2 backends) on the shapes of
tests/gpu/time_backward.cpp, so that flashcore's backward has its peers from the same machine:
the median of 20 backward passes (torch.autograd.grad of one forward's output) after 3 warm-ups,
then of 20 training forwards (for forward + backward), CUDA events, bf16/fp16 BHSD tensors.
--head-dims picks the shapes by head dim (default 64,128; the hd256 shapes only when asked, so the
default run stays as long as it was); --seqlens keeps only the shapes of those sequence lengths
(default: every one), for runs alternated with ours."""

import argparse

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

WARMUP, ITERATIONS = 3, 20
SHAPES = [  # batch, heads, seqlen, head_dim, causal, dtype
    (4, 16, 4096, 128, False, torch.bfloat16),
    (4, 16, 4096, 128, True, torch.bfloat16),
    (2, 16, 8192, 128, False, torch.bfloat16),
    (2, 16, 8192, 128, True, torch.bfloat16),
    (4, 32, 4096, 64, False, torch.bfloat16),
    (4, 32, 4096, 64, True, torch.bfloat16),
    (2, 32, 8192, 64, False, torch.bfloat16),
    (2, 32, 8192, 64, True, torch.bfloat16),
    (4, 16, 4096, 128, False, torch.float16),
    (4, 16, 4096, 256, False, torch.bfloat16),
    (4, 16, 4096, 256, True, torch.bfloat16),
    (2, 16, 8192, 256, False, torch.bfloat16),
    (2, 16, 8192, 256, True, torch.bfloat16),
    (4, 16, 4096, 256, False, torch.float16),
    (1, 16, 16384, 128, False, torch.bfloat16),
    (1, 16, 16384, 128, True, torch.bfloat16),
    (1, 16, 16384, 256, False, torch.bfloat16),
    (1, 16, 16384, 256, True, torch.bfloat16),
    (1, 4, 2048, 128, False, torch.bfloat16),
]
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash2": SDPBackend.FLASH_ATTENTION}


def median_ms(fn):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(WARMUP + ITERATIONS):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        if i >= WARMUP:
            times.append(start.elapsed_time(stop))
    return sorted(times)[len(times) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--head-dims", default="64,128", help="comma-separated head dims to time")
    parser.add_argument("--seqlens", default="", help="comma-separated sequence lengths (default all)")
    args = parser.parse_args()
    head_dims = {int(d) for d in args.head_dims.split(",")}
    seqlens = {int(s) for s in args.seqlens.split(",") if s}
    print(torch.__version__, torch.cuda.get_device_name(), "cudnn", torch.backends.cudnn.version())
    chosen = [sh for sh in SHAPES if sh[3] in head_dims and (not seqlens or sh[2] in seqlens)]
    for b, h, s, d, causal, dtype in chosen:
        q, k, v, d_o = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(4))
        for t in (q, k, v):
            t.requires_grad_(True)
        fwd_flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
        line = f"B{b} H{h} S{s} D{d} {str(dtype)[6:]}{' causal' if causal else ''}"
        for name, backend in BACKENDS.items():
            try:
                with sdpa_kernel([backend]):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    ms = median_ms(
                        lambda: torch.autograd.grad(out, (q, k, v), d_o, retain_graph=True))
                    # The training forward (inputs that require grad: it saves what the
                    # backward needs), for the forward + backward time.
                    fwd_ms = median_ms(
                        lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                line += (f" | {name} bwd {ms:.3f} ms {2.5 * fwd_flops / ms / 1e9:.1f} TFLOP/s"
                         f" fwd {fwd_ms:.3f} ms")
            except RuntimeError as error:  # a backend that does not take the shape
                line += f" | {name} n/a ({str(error).splitlines()[0][:60]})"
        print(line, flush=True)


if __name__ == "__main__":
    main()
