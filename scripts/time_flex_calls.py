"""flex_attention calls as the lab times them (bench/peers.py time_fn: graph replay, inputs
rotated past L2), the walks' build and the kernel together: the lab's D128 families at B4 H16
S4096, two short calls at B1 H16 S1024, and a varlen batch with ALiBi. For an A/B of two builds,
run it in alternating processes, each with its own flashcore on PYTHONPATH (docs/perf.md,
session 42). Run from the repository root: python3 scripts/time_flex_calls.py (needs torch and a
GPU)."""
import os
import sys

import torch
from torch.nn.attention.flex_attention import create_block_mask

import flashcore
from flashcore import mods

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import flex_lab  # noqa: E402 - the lab's families, from bench/
import peer_cases  # noqa: E402
import peers  # noqa: E402

HEADS, HEAD_DIM, BLOCK_SIZE, WINDOW, DOC_SPANS = 16, 128, 128, 1024, (128, 1024)
VARLEN_LENGTHS = (1000, 7, 3000, 1, 2500, 4000, 300, 1200, 4376)  # 16384 tokens


def family_rows(generator, batch, seqlen, names):
    rows = {}
    for family in flex_lab.families(seqlen, batch, WINDOW, DOC_SPANS, generator):
        if family.name not in names:
            continue
        sets = peers.input_sets(peer_cases.Case(batch, HEADS, seqlen, HEAD_DIM, False, "bf16"))
        inputs = [[torch.randn(batch, HEADS, seqlen, HEAD_DIM, device="cuda",
                               dtype=torch.bfloat16, generator=generator) for _ in range(3)]
                  for _ in range(sets)]
        block_mask = create_block_mask(family.mask_mod,
                                       batch if flex_lab.needs_batch(family) else None, None,
                                       seqlen, seqlen, device="cuda", BLOCK_SIZE=BLOCK_SIZE)
        rows[f"B{batch} S{seqlen} {family.name}"] = [
            (lambda q=q, k=k, v=v, f=family, m=block_mask: flashcore.flex_attention(
                q, k, v, score_mod=f.score_mod, block_mask=m)) for q, k, v in inputs]
    return rows


def varlen_row(generator):
    cu = torch.tensor((0,) + VARLEN_LENGTHS, device="cuda").cumsum(0).int()
    tokens, longest = sum(VARLEN_LENGTHS), max(VARLEN_LENGTHS)
    sets = peers.input_sets(peer_cases.Case(1, HEADS, tokens, HEAD_DIM, True, "bf16"))
    inputs = [[torch.randn(tokens, HEADS, HEAD_DIM, device="cuda", dtype=torch.bfloat16,
                           generator=generator) for _ in range(3)] for _ in range(sets)]
    alibi = mods.alibi(torch.rand(HEADS, device="cuda", generator=generator) * 0.1)
    return {"varlen 16k tokens ALiBi": [
        (lambda q=q, k=k, v=v: flashcore.attention_varlen(q, k, v, cu, cu, longest, longest,
                                                          causal=True, score_mod=alibi))
        for q, k, v in inputs]}


def main():
    generator = torch.Generator(device="cuda").manual_seed(0)
    rows = family_rows(generator, 4, 4096, {"causal", "sliding", "documents_128",
                                            "documents_1024", "prefix_lm", "alibi"})
    rows.update(family_rows(generator, 1, 1024, {"causal", "documents_128"}))
    rows.update(varlen_row(generator))
    peers.warm_gpu()
    for name, fns in rows.items():
        fns[0]()
        timing = peers.time_fn(fns)
        print(f"{name:28s} p50 {timing['p50_us']:8.2f} us  min {timing['min_us']:8.2f} us  "
              f"{timing['method']} ({flashcore.last_provider()})", flush=True)


if __name__ == "__main__":
    main()
