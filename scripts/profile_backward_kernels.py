"""Where a backward's time goes, kernel by kernel: flashcore's sm90 backward (through its torch
autograd formula) and torch SDPA's cuDNN backward on the same shapes, one process. For each, the
device time per backward of every kernel and memset it launches (torch.profiler, the mean of
ITERATIONS backwards after WARMUP), so the main kernel and the side work (zeroing the dQ
accumulators, D = rowsum(dO * O), dQ's conversion) are compared one by one.
Run: python3 scripts/profile_backward_kernels.py [--shapes hd128,hd64,...]"""

import argparse
import collections

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

import flashcore

WARMUP, ITERATIONS = 3, 10
SHAPES = {  # name: batch, heads, seqlen, head_dim, causal
    "hd128": (4, 16, 4096, 128, False),
    "hd128c": (4, 16, 4096, 128, True),
    "hd128s8k": (2, 16, 8192, 128, False),
    "hd128s8kc": (2, 16, 8192, 128, True),
    "hd64": (4, 32, 4096, 64, False),
    "hd64c": (4, 32, 4096, 64, True),
    "hd64s8k": (2, 32, 8192, 64, False),
    "hd256": (4, 16, 4096, 256, False),
    "hd256c": (4, 16, 4096, 256, True),
}


def device_us(event):
    try:
        return event.time_range.elapsed_us()
    except AttributeError:
        return event.device_time


def per_backward(fn):
    """{kernel or memset name: device us per call} of fn, and their sum."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(ITERATIONS):
            fn()
        torch.cuda.synchronize()
    totals = collections.defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            totals[e.name] += device_us(e) / ITERATIONS
    return totals


def report(label, totals):
    print(f"  {label}: {sum(totals.values()):9.1f} us in all", flush=True)
    for name, us in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"    {us:9.1f} us  {name[:110]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated SHAPES keys")
    names = parser.parse_args().shapes.split(",")
    print(torch.__version__, torch.cuda.get_device_name(), "cudnn", torch.backends.cudnn.version())
    for name in names:
        b, h, s, d, causal = SHAPES[name]
        print(f"{name}: B{b} H{h} S{s} D{d} bf16{' causal' if causal else ''}", flush=True)
        bhsd = [torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
        q, k, v = (t.clone().requires_grad_(True) for t in bhsd[:3])
        d_o = bhsd[3]
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        report("SDPA cuDNN", per_backward(
            lambda: torch.autograd.grad(out, (q, k, v), d_o, retain_graph=True)))
        # flashcore takes BSHD: the same tensors transposed (strided views, as a model passes them).
        qs, ks, vs = (t.detach().transpose(1, 2).requires_grad_(True) for t in (q, k, v))
        out_fc = flashcore.attention(qs, ks, vs, causal=causal)
        d_o_fc = d_o.transpose(1, 2)
        report("flashcore", per_backward(
            lambda: torch.autograd.grad(out_fc, (qs, ks, vs), d_o_fc, retain_graph=True)))
        del q, k, v, out, qs, ks, vs, out_fc, bhsd, d_o, d_o_fc
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
