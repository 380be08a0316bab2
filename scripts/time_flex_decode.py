"""Flex decode: flex_attention with ALiBi (a score_mod, so the flex path runs) over decode and
short-chunk shapes, MHA and GQA, on auto (the sm80 flex kernel's split-KV where auto leaves a small
grid to it, and its packed query heads for every GQA decode step) and with the sm90 flex kernel
forced (unsplit, a CTA per query head), plus the two outputs' relative difference; the same scores
again as a jit_score_mod (a functor of one's own takes the same route). Times by bench/peers.py's
time_fn (flashcore-bench's rules, inputs rotated past L2); GB/s of K and V read once
(docs/flex.md, "Decode: split-KV on the flex path").

Run from anywhere: python3 scripts/time_flex_decode.py [--no-jit] (needs torch and a GPU; --no-jit
leaves out the snippet's rows, which compile once per package)."""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "bench"))
import flashcore  # noqa: E402
import peer_cases  # noqa: E402
import peers  # noqa: E402
from flashcore import mods  # noqa: E402

D = 128
with_jit = "--no-jit" not in sys.argv[1:]
g = torch.Generator(device="cuda").manual_seed(0)
print(torch.cuda.get_device_name(), flush=True)
for B, Hq, Hkv, Sq, Sk in [(1, 16, 16, 1, 16384), (2, 16, 16, 1, 16384), (2, 16, 16, 1, 65536),
                           (4, 32, 8, 1, 32768), (8, 32, 8, 1, 16384), (64, 32, 8, 1, 4096),
                           (1, 64, 8, 1, 131072), (8, 16, 16, 1, 8192), (2, 16, 16, 128, 16384),
                           (1, 32, 8, 16, 65536), (16, 16, 16, 1, 4096)]:
    sets = peers.input_sets(peer_cases.Case(B, Hq, Sk, D, False, "bf16"))
    inputs = [[torch.randn(B, h, n, D, device="cuda", dtype=torch.bfloat16, generator=g)
               for h, n in ((Hq, Sq), (Hkv, Sk), (Hkv, Sk))] for _ in range(sets)]
    slopes = torch.rand(Hq, device="cuda", generator=g) * 0.1
    # The same scores as a jit_score_mod: a functor of one's own (one object, compiled once).
    snippet = flashcore.jit_score_mod(
        "return score - slopes[h] * fabsf((float)(q_idx + offset - kv_idx));", slopes=slopes,
        offset=Sk - Sq)
    row = f"B{B} Hq{Hq} Hkv{Hkv} Sq{Sq} Sk{Sk}:"
    kv_bytes = 2 * B * Hkv * Sk * D * 2
    outs = {}
    builtin = mods.alibi(slopes)
    forced = dict(backend="sm90")
    variants = [("auto", builtin, {}), ("sm90", builtin, forced)]
    if with_jit:
        variants += [("jit auto", snippet, {}), ("jit sm90", snippet, forced)]
    for name, mod, kwargs in variants:
        try:
            fns = [lambda q=q, k=k, v=v: flashcore.flex_attention(
                q, k, v, score_mod=mod, enable_gqa=True, **kwargs) for q, k, v in inputs]
            outs[name] = fns[0]()
            provider = flashcore.last_provider()
            us = peers.time_fn(fns)["p50_us"]
            row += f"  {name}({provider}) {us:8.1f} us {kv_bytes / us / 1e3:6.0f} GB/s"
        except Exception as e:  # noqa: BLE001
            row += f"  {name}: {type(e).__name__}: {str(e)[:80]}"
    if "auto" in outs and "sm90" in outs:
        diff = (outs["auto"].float() - outs["sm90"].float()).norm() / outs["sm90"].float().norm()
        row += f"  rel diff {diff.item():.1e}"
    print(row, flush=True)
