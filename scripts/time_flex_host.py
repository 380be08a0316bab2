# A flex_attention call's host time: Python, DLPack, workspace and launch, against attention() on
# a dense problem. Rows: host time per call over five batches of 200 calls (the GPU not waited
# for; the lowest batch and their median), then cProfile and torch.profiler of the documents-of-128
# call, the lab's host-bound row (docs/flex.md, "The host side of a flex call").
# Run: python3 scripts/time_flex_host.py (needs torch and a GPU).
import cProfile, io, pstats, statistics, time
import torch
import flashcore
from flashcore import mods
from torch.profiler import profile, ProfilerActivity

B, H, S, D = 4, 16, 4096, 128
q, k, v = (torch.randn(B, H, S, D, dtype=torch.bfloat16, device="cuda") for _ in range(3))
pos = torch.arange(S, device="cuda")
docs = (pos // 128).int()[None].expand(B, S).contiguous()
bm = flashcore.create_block_mask(mods.documents(docs), B, None, S, S)
t = [torch.randn(1, 2, 256, 64, dtype=torch.bfloat16, device="cuda") for _ in range(3)]
tdocs = (torch.arange(256, device="cuda") // 64).int()[None].contiguous()
tbm = flashcore.create_block_mask(mods.documents(tdocs), 1, None, 256, 256)
qs, ks, vs = (x.transpose(1, 2) for x in (q, k, v))
jit_bias = flashcore.jit_score_mod("return score + bias[h] * (q_idx - kv_idx);",
                                   bias=torch.randn(2, device="cuda") * 0.05)
rows = {
    "dense attention tiny": lambda: flashcore.attention(*(x.transpose(1, 2) for x in t), causal=True),
    # The persistent kernel's dynamic schedule: a tile counter from the workspace.
    "dense attention causal B4 S4096": lambda: flashcore.attention(qs, ks, vs, causal=True),
    "flex tiny no mask": lambda: flashcore.flex_attention(*t),
    "flex tiny documents BlockMask": lambda: flashcore.flex_attention(*t, block_mask=tbm),
    "flex documents 128 B4 S4096": lambda: flashcore.flex_attention(q, k, v, block_mask=bm),
    # A jit_score_mod (compiled by the first call, then cached on disk; the warm-up takes it).
    "flex tiny jit_score_mod": lambda: flashcore.flex_attention(*t, score_mod=jit_bias),
}
for name, fn in rows.items():
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    # Five batches of 200 calls: the host machine is shared, so the lowest batch and the median
    # of the five are printed (a single batch moved by up to 1.7x between runs).
    n, host, total = 200, [], []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        host.append(1e6 * (t1 - t0) / n)
        total.append(1e6 * (t2 - t0) / n)
    print(f"{name:32s} host {min(host):7.1f} us/call (median {statistics.median(host):7.1f}), "
          f"with the GPU {min(total):7.1f} us/call", flush=True)
fn = rows["flex documents 128 B4 S4096"]
pr = cProfile.Profile()
pr.enable()
for _ in range(200):
    fn()
pr.disable()
torch.cuda.synchronize()
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22)
print(s.getvalue()[-6000:])
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))
print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=8))
