"""flashcore.jit_score_mod's costs (docs/flex.md): the first call with an empty cache (nvcc), the
first call of a new process (the shared object from the disk cache), and a warm call (on the
kernel auto picks, sm90 on an H100, and on sm80), next to the built-in mod that computes the same
scores. One process per phase. Warm calls are timed by the lab's timer (bench/peers.py time_fn:
a warm-up, graph replay, samples over a budget), the rows alternated over ROUNDS rounds, the
median of the rounds' medians; a hand-written median of 20 calls moved by up to 17% between
rounds (docs/perf.md, session 41). Usage: [BLOCK_SIZE=64] python3 scripts/time_jit.py [B H S D]
(the causal BlockMask's block size, 128 unless BLOCK_SIZE says otherwise)."""

import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import flashcore
from flashcore import jit, mods

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import peers  # noqa: E402 - the lab's timer, from bench/

SNIPPET = "return score + bias[h] * (q_idx - kv_idx);"
BLOCK_SIZE = int(os.environ.get("BLOCK_SIZE", "128"))
ROUNDS = 3


def case(B, H, S, D):
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, S, D, dtype=torch.bfloat16, device="cuda", generator=g)
               for _ in range(3))
    slopes = torch.rand(H, device="cuda", generator=g) * 0.1
    # Under causal, score + bias[h] * (q_idx - kv_idx) with bias = -slopes is ALiBi exactly.
    mod = flashcore.jit_score_mod(SNIPPET, bias=-slopes)
    block_mask = flashcore.create_block_mask(mods.causal(), B, None, S, S, BLOCK_SIZE=BLOCK_SIZE)
    return q, k, v, mod, mods.alibi(slopes), block_mask


def wall(fn):
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def alternated_medians(rows):
    """Each row's time (us): peers.time_fn's median, rows alternated over ROUNDS rounds, the
    median of the rounds. rows: name -> fn."""
    peers.warm_gpu()
    times = {name: [] for name in rows}
    for _ in range(ROUNDS):
        for name, fn in rows.items():
            times[name].append(peers.time_fn([fn])["p50_us"])
    return {name: statistics.median(ts) for name, ts in times.items()}


def child(shape):
    q, k, v, mod, _, block_mask = case(*shape)
    seconds = wall(lambda: flashcore.flex_attention(q, k, v, score_mod=mod, block_mask=block_mask))
    s = jit.stats()
    print(f"{seconds:.3f} {s['compiles']} {s['disk_hits']}")


def main(shape):
    B, H, S, D = shape
    print(f"{torch.cuda.get_device_name()}, nvcc {jit.find_nvcc()}, B{B} H{H} S{S} D{D} bf16, "
          f"causal BlockMask ({BLOCK_SIZE})")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["FLASHCORE_JIT_CACHE"] = cache
        runs = []
        for phase in ("empty cache", "cached on disk"):
            out = subprocess.run([sys.executable, __file__, "--child", *map(str, shape)],
                                 capture_output=True, text=True, check=True).stdout.split()
            runs.append(out)
            print(f"first call of a new process, {phase}: {float(out[0]) * 1e3:.0f} ms wall "
                  f"(nvcc runs: {out[1]}, loaded from disk: {out[2]})")
        q, k, v, mod, alibi, block_mask = case(*shape)
        flashcore.flex_attention(q, k, v, score_mod=mod, block_mask=block_mask)
        jit_out = flashcore.flex_attention(q, k, v, score_mod=mod, block_mask=block_mask)
        ref = flashcore.flex_attention(q, k, v, score_mod=alibi, block_mask=block_mask)
        err = ((jit_out.float() - ref.float()).norm() / ref.float().norm()).item()
        host = min(wall(lambda: flashcore.flex_attention(q, k, v, score_mod=mod,
                                                         block_mask=block_mask))
                   for _ in range(5))
        flashcore.flex_attention(q, k, v, score_mod=mod, block_mask=block_mask)
        jit_provider = flashcore.last_provider()
        flashcore.flex_attention(q, k, v, score_mod=alibi, block_mask=block_mask)
        builtin_provider = flashcore.last_provider()
        us = alternated_medians({
            "jit": lambda: flashcore.flex_attention(q, k, v, score_mod=mod, block_mask=block_mask),
            "sm80": lambda: flashcore.flex_attention(q, k, v, score_mod=mod, block_mask=block_mask,
                                                     backend="sm80"),
            "builtin": lambda: flashcore.flex_attention(q, k, v, score_mod=alibi,
                                                        block_mask=block_mask),
            "plain": lambda: flashcore.flex_attention(q, k, v, block_mask=block_mask),
        })
        jit_us, sm80_us, builtin_us, plain_us = us["jit"], us["sm80"], us["builtin"], us["plain"]
        flops = 4 * B * H * S * S * D / 2
        print(f"warm call ({jit_provider}): {jit_us:.1f} us ({flops / jit_us / 1e6:.1f} TFLOP/s), "
              f"built-in ALiBi ({builtin_provider}, same scores): {builtin_us:.1f} us "
              f"({flops / builtin_us / 1e6:.1f} TFLOP/s), "
              f"JIT/built-in time {jit_us / builtin_us:.2f}x; rel L2 JIT vs built-in {err:.1e}; "
              f"one warm call end to end (host + GPU, synchronized) {host * 1e3:.2f} ms; "
              f"nvcc runs in this process: {jit.stats()['compiles']}")
        print(f"the same jit_score_mod on sm80 (backend='sm80'): {sm80_us:.1f} us "
              f"({flops / sm80_us / 1e6:.1f} TFLOP/s); auto/sm80 time {jit_us / sm80_us:.2f}x")
        print(f"the same causal BlockMask with no score_mod: {plain_us:.1f} us "
              f"({flops / plain_us / 1e6:.1f} TFLOP/s)")
        # Host cost of a call (argument checks, the cache key, the launch; no GPU wait) on a
        # problem too small for the GPU to matter, JIT against the built-in mod.
        tq, tk, tv, tmod, talibi, tmask = case(1, 1, 128, 64)
        for name, score_mod in (("jit_score_mod", tmod), ("built-in ALiBi", talibi)):
            flashcore.flex_attention(tq, tk, tv, score_mod=score_mod, block_mask=tmask)
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(200):
                flashcore.flex_attention(tq, tk, tv, score_mod=score_mod, block_mask=tmask)
            host_us = (time.perf_counter() - start) / 200 * 1e6
            torch.cuda.synchronize()
            print(f"host time per call, B1 H1 S128 D64, {name}: {host_us:.1f} us")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(tuple(int(x) for x in sys.argv[2:6]))
    else:
        main(tuple(int(x) for x in sys.argv[1:5]) if len(sys.argv) > 4 else (4, 16, 4096, 128))
