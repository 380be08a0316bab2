"""Times a training step's attention through flashcore.flex_attention (forward + backward: one
forward, then torch.autograd.grad of its output) at B4 H16 S4096 D128 bf16, causal, next to the
same step through flashcore.attention, so that the cost of each BlockMask path is stated:
  - the window's own BlockMask (flashcore.create_block_mask(mods.causal())): dropped, the dense
    kernels' causal path forward and backward (docs/flex.md, "A window's own BlockMask");
  - the same causal lists walked (a torch BlockMask of the same mod): the flex kernels, whose
    backward is the sm80 flex backward;
  - documents of 1024 (causal): lists that only a walk can run.
CUDA events, median of 10 steps after 3 warm-ups. Needs a GPU, torch and the flashcore package:
python3 scripts/time_flex_training.py"""

import statistics

import torch
from torch.nn.attention.flex_attention import create_block_mask as torch_create_block_mask

import flashcore
from flashcore import mods

WARMUP, ITERATIONS = 3, 10
B, H, S, D = 4, 16, 4096, 128


def median_ms(step):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(WARMUP + ITERATIONS):
        start.record()
        step()
        stop.record()
        stop.synchronize()
        if i >= WARMUP:
            times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main():
    torch.manual_seed(0)
    q, k, v, d_o = (torch.randn(B, H, S, D, dtype=torch.bfloat16, device="cuda")
                    for _ in range(4))
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    documents = (torch.arange(S, device="cuda") // 1024).int()[None].expand(B, S).contiguous()
    causal_documents = mods.and_masks(mods.causal(), mods.documents(documents))

    def flex_step(block_mask):
        def step():
            out = flashcore.flex_attention(*leaves, block_mask=block_mask)
            torch.autograd.grad(out, leaves, d_o)
        return step

    def dense_step():
        out = flashcore.attention(*(x.transpose(1, 2) for x in leaves), causal=True)
        torch.autograd.grad(out, leaves, d_o.transpose(1, 2))

    # FLOPs of forward + backward: 3.5 x the forward's (the backward is 2.5x), causal halves.
    causal_flops = 3.5 * 4 * B * H * S * S * D / 2
    cases = [
        ("dense attention, causal", causal_flops, dense_step),
        ("flex, the window's own causal BlockMask", causal_flops,
         flex_step(flashcore.create_block_mask(mods.causal(), None, None, S, S))),
        ("flex, causal lists walked (torch BlockMask)", causal_flops,
         flex_step(torch_create_block_mask(mods.causal(), None, None, S, S, device="cuda"))),
        ("flex, causal documents of 1024", causal_flops / (S // 1024),
         flex_step(flashcore.create_block_mask(causal_documents, B, None, S, S))),
    ]
    for name, flops, step in cases:
        ms = median_ms(step)
        print(f"{name:44s} {flashcore.last_provider():5s} forward+backward {ms:8.3f} ms "
              f"{flops / ms / 1e9:6.1f} TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
