"""The FlexAttention lab: flashcore's flex path against PyTorch's flex_attention (eager and
torch.compile'd) with the SAME mask_mods, score_mods and BlockMask, in one process, on the same
inputs and with flashcore-bench's timer (peers.time_fn). Issue 18's bars are computed from the
run, not typed.

    BLOCK_SIZE=128 DOC_SPAN=1024 python bench/flex_lab.py --out lab-out/flex

Cases, at B4 H16 S4096 D128 bf16 and B1 H16 S16384 D128 bf16 (--seqlens; --head-dim 64 or 256
runs the same cases at that head dim, where the report's bar lines only describe the run: issue
18's bars are D128's): no mask, causal,
sliding window (FLASHCORE_WINDOW keys left of the diagonal, causal), causal documents of DOC_SPAN
tokens (default: 128 and 1024), prefix-LM (a quarter of the sequence), ALiBi (causal), softcap 30
(causal) and a jit_score_mod (causal + a per-head linear bias); plus varlen (documents of random
length, causal) against the dense causal kernel over the same tokens, and decode (one query per
batch and head over --decode-lengths keys, ALiBi; B2 H16, and B8 Hq32 Hkv8 under GQA) against
torch.compile's flex decoding. A
flashcore mod object is also a PyTorch mod (its __call__), so torch's create_block_mask builds one
BlockMask from it that both libraries take. TFLOP/s count only the visible blocks (4·D per pair
of the blocks the BlockMask lists, B·H times), so sparser masks are not flattered; sparsity is
1 - listed / all.

A peer that refuses a case is reported as REFUSED with its message and the lab goes on (in torch
2.11 on an H100, torch.compile's flex kernel refuses BLOCK_SIZE=64: its tiles are 128); parity
then uses the next reference that ran: eager flex_attention, then flashcore's dense twin.

Writes results.json (flashcore-bench's results schema, chapter labs/flexattention), report.md.
"""

import argparse
import datetime
import json
import os
import pathlib
import sys

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import flashcore
import peer_cases
import peers
from flashcore import mods

CHAPTER = "labs/flexattention"
HEADS, HEAD_DIM, DTYPE = 16, 128, "bf16"
SOFTCAP = 30.0
# Issue 18's bars: flashcore's time over torch.compile(flex_attention)'s for these mask families,
# the flex path's causal TFLOP/s over the dedicated causal kernel's, varlen over dense causal.
MAX_TIME_VS_COMPILED = 0.5
BARRED_FAMILIES = ("documents", "sliding", "prefix_lm", "alibi")
MIN_CAUSAL_VS_DENSE = 0.95
MIN_VARLEN_VS_DENSE = 0.95
EAGER_MAX_SEQLEN = 4096  # eager flex_attention materializes B·H·S² fp32 scores
# Decode (B, Hq, Hkv): B2 x H16 = 32 (batch, head) pairs, a quarter of an H100's SMs, one query
# each; and GQA as Llama-3 8B has it (32 query heads, 8 kv heads) at batch 8.
DECODE_SHAPES = ((2, 16, 16), (8, 32, 8))


def env_int(name, default):
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if not value.isdigit() or int(value) <= 0:
        sys.exit(f"{name}={value} is not a positive integer")
    return int(value)


class Family:
    """One row of the lab: a name, its mask_mod and score_mod (flashcore objects that are also
    PyTorch mods), the torch score_mod when it differs (the JIT snippet's Python twin), and the
    flashcore dense call it is compared with, if any."""

    def __init__(self, name, mask_mod, score_mod=None, torch_score_mod=None, dense=None):
        self.name, self.mask_mod, self.score_mod = name, mask_mod, score_mod
        self.torch_score_mod = torch_score_mod if torch_score_mod is not None else score_mod
        self.dense = dense  # kwargs of flashcore.attention for the same problem, or None


def families(seqlen, batch, window, doc_spans, generator):
    slopes = torch.rand(HEADS, device="cuda", generator=generator) * 0.1
    bias = -slopes  # under causal, the JIT bias below is ALiBi exactly
    jit_mod = flashcore.jit_score_mod("return score + bias[h] * (q_idx - kv_idx);", bias=bias)
    rows = [
        Family("no_mask", None, dense=dict(causal=False)),
        Family("causal", mods.causal(), dense=dict(causal=True)),
        Family("sliding", mods.sliding_window(window), dense=dict(causal=True,
                                                                  window=(window, 0))),
    ]
    positions = torch.arange(seqlen, device="cuda")
    for span in doc_spans:
        docs = (positions // span).int().expand(batch, seqlen).contiguous()
        rows.append(Family(f"documents_{span}", mods.and_masks(mods.causal(),
                                                               mods.documents(docs))))
    rows += [
        Family("prefix_lm", mods.prefix_lm(seqlen // 4)),
        Family("alibi", mods.causal(), mods.alibi(slopes)),
        Family("softcap", mods.causal(), mods.softcap(SOFTCAP), dense=dict(causal=True,
                                                                           softcap=SOFTCAP)),
        Family("jit_score_mod", mods.causal(), jit_mod,
               lambda score, b, h, q_idx, kv_idx: score + bias[h] * (q_idx - kv_idx)),
    ]
    return rows


def listed_blocks(block_mask):
    """(listed KV blocks summed over every (b, h, query block), all of them)."""
    listed = block_mask.kv_num_blocks.sum().item()
    if block_mask.full_kv_num_blocks is not None:
        listed += block_mask.full_kv_num_blocks.sum().item()
    return listed, block_mask.kv_indices.numel()


def case_json(batch, seqlen, family, flops, block_mask, block_size):
    listed, total = listed_blocks(block_mask) if block_mask is not None else (1, 1)
    # flops and the mask below say what the case computes; `causal` only names the dense twin.
    causal = bool(family.dense and family.dense.get("causal"))
    case = peer_cases.Case(batch, HEADS, seqlen, HEAD_DIM, causal, DTYPE).to_json()
    case.update(label=f"B{batch}_H{HEADS}_S{seqlen}_D{HEAD_DIM}_{DTYPE}_{family.name}",
                flops=flops, mask=family.name, block_size=block_size,
                sparsity=1.0 - listed / total)
    return case


def visible_flops(block_mask, batch, seqlen, block_size):
    """4·D per (query, key) pair of every listed block, clipped to the sequence, B·H times."""
    if block_mask is None:
        return 4.0 * batch * HEADS * seqlen * seqlen * HEAD_DIM
    listed, _ = listed_blocks(block_mask)
    heads = 1 if block_mask.kv_num_blocks.shape[1] == 1 else HEADS
    batches = 1 if block_mask.kv_num_blocks.shape[0] == 1 else batch
    pairs = listed * block_size * block_size * (batch // batches) * (HEADS // heads)
    return 4.0 * HEAD_DIM * min(pairs, batch * HEADS * seqlen * seqlen)


def measure(runs, record, case, reference_names):
    """Parity against the first reference run that ran, then timing; appends one result per run.
    A peer that refuses the case (torch.compile's flex kernel on some block sizes) is recorded as
    not run, with its message, and the lab goes on."""
    outputs, providers, refused = {}, {}, {}
    for workload, role, fns in runs:
        try:
            with torch.no_grad():
                outputs[workload] = fns[0]()
        except Exception as error:  # noqa: BLE001 - a peer's compiler raises many kinds
            if workload.startswith("flashcore"):
                raise
            # The message's first line says why (the rest is the compiler's trace and advice).
            first_line = next((line for line in str(error).splitlines() if line.strip()), "")
            refused[workload] = f"{type(error).__name__}: {first_line.strip()[:300]}"
            torch._dynamo.reset()  # the failed compile leaves no usable graph
        # The flashcore kernel that ran (sm90, sm80, ...); the peers are named by the workload.
        providers[workload] = (flashcore.last_provider() if workload.startswith("flashcore")
                               else workload)
    reference_name = next((name for name in reference_names if name in outputs), None)
    for workload, role, fns in runs:
        result = dict(target=f"{CHAPTER}:{workload}", chapter=CHAPTER, workload=workload,
                      role=role, requested_backend=workload, provider=providers[workload],
                      status="ok", reason="", case=case, parity=None, timing=None)
        if workload in refused:
            result.update(status="REFUSED", reason=refused[workload])
        elif reference_name is None:
            result.update(status="UNCHECKED", reason="not timed, no reference ran: " + "; ".join(
                f"{name}: {refused.get(name, 'not in this run')}" for name in reference_names))
        else:
            result["parity"] = peers.parity(outputs[workload], outputs[reference_name], DTYPE)
            if not result["parity"]["passed"]:
                result.update(status="FAILED", reason=f"output differs from {reference_name}'s")
            else:
                with torch.no_grad():
                    result["timing"] = peers.time_fn(fns)
        seconds = result["timing"]["p50_us"] * 1e-6 if result["timing"] else None
        result["tflops"] = case["flops"] / seconds / 1e12 if seconds else None
        record["results"].append(result)
        shown = f"{result['timing']['p50_us']:10.1f} us {result['tflops']:6.1f} TFLOP/s" \
            if seconds else result["reason"]
        print(f"  {workload:24s} {result['status']:7s} {shown}", flush=True)
    torch.cuda.empty_cache()


def run_family(family, batch, seqlen, block_size, compiled, record, generator):
    sets = peers.input_sets(peer_cases.Case(batch, HEADS, seqlen, HEAD_DIM, False, DTYPE))
    shape = (batch, HEADS, seqlen, HEAD_DIM)
    inputs = [[torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=generator)
               for _ in range(3)] for _ in range(sets)]
    block_mask = None
    if family.mask_mod is not None:
        block_mask = create_block_mask(family.mask_mod, batch if needs_batch(family) else None,
                                       None, seqlen, seqlen, device="cuda",
                                       BLOCK_SIZE=block_size)
    case = case_json(batch, seqlen, family, visible_flops(block_mask, batch, seqlen, block_size),
                     block_mask, block_size)
    print(f"{case['label']}  sparsity {case['sparsity']:.3f}", flush=True)

    def per_set(make):
        return [make(*qkv) for qkv in inputs]

    runs = [("flashcore_flex", "optimized", per_set(lambda q, k, v: lambda: flashcore
             .flex_attention(q, k, v, score_mod=family.score_mod, block_mask=block_mask)))]
    if family.dense is not None:
        dense = family.dense

        def dense_call(q, k, v):
            qs, ks, vs = (x.transpose(1, 2) for x in (q, k, v))
            return lambda: flashcore.attention(qs, ks, vs, **dense).transpose(1, 2)

        runs.append(("flashcore_dense", "step", per_set(dense_call)))
    runs.append(("flex_compiled", "peer", per_set(lambda q, k, v: lambda: compiled(
        q, k, v, score_mod=family.torch_score_mod, block_mask=block_mask))))
    if seqlen <= EAGER_MAX_SEQLEN:
        runs.append(("flex_eager", "baseline", per_set(lambda q, k, v: lambda: flex_attention(
            q, k, v, score_mod=family.torch_score_mod, block_mask=block_mask))))
    measure(runs, record, case, ("flex_compiled", "flex_eager", "flashcore_dense"))


def needs_batch(family):
    """A document mask reads per-batch ids; the others are the same for every batch."""
    return family.name.startswith("documents")


def run_varlen(tokens, mean_length, record, generator):
    """Causal documents of random length packed into `tokens`, against the dense causal kernel
    on one sequence of the same tokens and on the padded batch; real FLOPs only."""
    lengths = []
    while sum(lengths) < tokens:
        draw = int(torch.randint(mean_length // 4, 2 * mean_length, (1,), generator=generator,
                                 device="cuda").item())
        lengths.append(min(draw, tokens - sum(lengths)))
    cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).int()
    longest = max(lengths)
    real = sum(2.0 * HEADS * n * n * HEAD_DIM for n in lengths)  # causal: half of 4·H·n²·D
    sets = peers.input_sets(peer_cases.Case(1, HEADS, tokens, HEAD_DIM, True, DTYPE))
    inputs = [[torch.randn(tokens, HEADS, HEAD_DIM, device="cuda", dtype=torch.bfloat16,
                           generator=generator) for _ in range(3)] for _ in range(sets)]
    family = Family(f"varlen_{len(lengths)}_docs", None, dense=dict(causal=True))
    case = case_json(1, tokens, family, real, None, 0)
    case.update(documents=lengths)
    print(f"{case['label']}  {len(lengths)} documents, longest {longest}", flush=True)
    varlen = [lambda q=q, k=k, v=v: flashcore.attention_varlen(q, k, v, cu, cu, longest, longest,
                                                                causal=True) for q, k, v in inputs]
    measure([("flashcore_varlen", "optimized", varlen)], record, case, ("flashcore_varlen",))
    # The dense kernel's rate on the same tokens as one causal sequence (its own FLOPs).
    dense_case = dict(case, label=f"B1_H{HEADS}_S{tokens}_D{HEAD_DIM}_{DTYPE}_dense_causal",
                      flops=2.0 * HEADS * tokens * tokens * HEAD_DIM, mask="dense_causal")
    dense = [lambda q=q, k=k, v=v: flashcore.attention(q[None], k[None], v[None], causal=True)[0]
             for q, k, v in inputs]
    measure([("flashcore_dense", "step", dense)], record, dense_case, ("flashcore_dense",))


def run_decode(kv_len, shape, compiled, record, generator):
    """One query per (batch, query head) standing at the last of kv_len keys, with ALiBi (a
    score_mod, so flashcore runs its flex path: the sm80 kernel's split-KV on a grid this small,
    with a kv head's query heads packed into one tile under GQA), against
    torch.compile(flex_attention), which decodes with its own split kernel. shape: (B, Hq, Hkv).
    TFLOP/s count 4·B·Hq·Sk·D; the report gives GB/s of K and V read once instead, what decode is
    bound by."""
    batch, heads_q, heads_kv = shape
    slopes = torch.rand(heads_q, device="cuda", generator=generator) * 0.1
    offset = kv_len - 1  # flashcore aligns the query bottom-right: it stands at key kv_len - 1

    def torch_alibi(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx + offset - kv_idx).abs()

    sets = peers.input_sets(peer_cases.Case(batch, heads_kv, kv_len, HEAD_DIM, False, DTYPE))
    inputs = [[torch.randn((batch, heads, rows, HEAD_DIM), device="cuda", dtype=torch.bfloat16,
                           generator=generator)
               for heads, rows in ((heads_q, 1), (heads_kv, kv_len), (heads_kv, kv_len))]
              for _ in range(sets)]
    gqa = heads_q != heads_kv
    case = peer_cases.Case(batch, heads_q, kv_len, HEAD_DIM, False, DTYPE).to_json()
    heads = f"Hq{heads_q}_Hkv{heads_kv}" if gqa else f"H{heads_q}"
    mask = "decode_gqa_alibi" if gqa else "decode_alibi"
    case.update(label=f"B{batch}_{heads}_Sq1_Sk{kv_len}_D{HEAD_DIM}_{DTYPE}_{mask}",
                seqlen_q=1, heads_kv=heads_kv, flops=4.0 * batch * heads_q * kv_len * HEAD_DIM,
                min_bytes=2.0 * batch * heads_kv * kv_len * HEAD_DIM * 2,
                mask=mask, block_size=0, sparsity=0.0)
    print(case["label"], flush=True)
    score_mod = mods.alibi(slopes)
    runs = [("flashcore_flex", "optimized",
             [lambda q=q, k=k, v=v: flashcore.flex_attention(q, k, v, score_mod=score_mod,
                                                             enable_gqa=gqa)
              for q, k, v in inputs]),
            ("flex_compiled", "peer",
             [lambda q=q, k=k, v=v: compiled(q, k, v, score_mod=torch_alibi, enable_gqa=gqa)
              for q, k, v in inputs])]
    measure(runs, record, case, ("flex_compiled",))


def find(record, mask, workload, seqlen):
    for r in record["results"]:
        c = r["case"]
        if c.get("mask") == mask and r["workload"] == workload and c["seqlen_q"] == seqlen:
            return r if r["tflops"] else None
    return None


def bars(record, seqlens, tokens):
    """(bar, measured, held) lines of issue 18's speed bars, from this run."""
    lines = []
    masks = sorted({r["case"].get("mask") for r in record["results"]} - {None})
    for seqlen in seqlens:
        for mask in masks:
            if not mask.startswith(BARRED_FAMILIES):
                continue
            ours, theirs = (find(record, mask, w, seqlen) for w in ("flashcore_flex",
                                                                     "flex_compiled"))
            if ours and theirs:
                ratio = ours["timing"]["p50_us"] / theirs["timing"]["p50_us"]
                lines.append((f"S{seqlen} {mask}: time <= {MAX_TIME_VS_COMPILED}x "
                              "torch.compile(flex_attention)", f"{ratio:.2f}x",
                              ratio <= MAX_TIME_VS_COMPILED))
        flex, dense = (find(record, "causal", w, seqlen) for w in ("flashcore_flex",
                                                                   "flashcore_dense"))
        if flex and dense:
            ratio = flex["tflops"] / dense["tflops"]
            lines.append((f"S{seqlen} causal through flex >= {MIN_CAUSAL_VS_DENSE}x the causal "
                          "kernel's TFLOP/s", f"{ratio:.2f}x", ratio >= MIN_CAUSAL_VS_DENSE))
        flex, dense = (find(record, "no_mask", w, seqlen) for w in ("flashcore_flex",
                                                                    "flashcore_dense"))
        if flex and dense:
            ratio = flex["timing"]["p50_us"] / dense["timing"]["p50_us"]
            lines.append((f"S{seqlen} no mods through flex_attention: no overhead vs attention",
                          f"time {ratio:.3f}x", ratio <= 1.02))
    varlen = next((r for r in record["results"] if r["workload"] == "flashcore_varlen"
                   and r["tflops"]), None)
    dense = find(record, "dense_causal", "flashcore_dense", tokens)
    if varlen and dense:
        ratio = varlen["tflops"] / dense["tflops"]
        lines.append((f"varlen {tokens} tokens >= {MIN_VARLEN_VS_DENSE}x the dense causal "
                      "kernel's TFLOP/s (real FLOPs)", f"{ratio:.2f}x",
                      ratio >= MIN_VARLEN_VS_DENSE))
    return lines


def markdown(record, bar_lines):
    env = record["environment"]
    knobs = record["knobs"]
    lines = [f"# FlexAttention lab ({env['device']}, torch {env['torch']}, flashcore "
             f"{env['flashcore']})", "",
             f"BLOCK_SIZE {knobs['block_size']}, DOC_SPAN {knobs['doc_spans']}, window "
             f"{knobs['window']}. p50 of CUDA events by flashcore-bench's rules (inputs rotated "
             "past L2); TFLOP/s over the visible blocks only (decode rows: GB/s of K and V "
             "read).", "",
             "| case | sparsity | flashcore flex | provider | flashcore dense | "
             "torch.compile flex | flex eager | flex / compiled time |",
             "|---|---|---|---|---|---|---|---|"]
    by_label = {}
    for r in record["results"]:
        by_label.setdefault(r["case"]["label"], {})[r["workload"]] = r

    def cell(r):
        if r is None:
            return "-"
        if not r["tflops"]:
            return r["status"].lower()
        if r["case"]["seqlen_q"] == 1:  # decode: the rate of reading K and V
            gbs = r["case"]["min_bytes"] / r["timing"]["p50_us"] / 1e3
            return f"{r['timing']['p50_us']:.1f} us ({gbs:.0f} GB/s)"
        return f"{r['timing']['p50_us']:.0f} us ({r['tflops']:.0f})"

    for label, row in by_label.items():
        first = next(iter(row.values()))
        ours = row.get("flashcore_flex") or row.get("flashcore_varlen")
        theirs = row.get("flex_compiled")
        ratio = (f"{ours['timing']['p50_us'] / theirs['timing']['p50_us']:.2f}x"
                 if ours and theirs and ours["tflops"] and theirs["tflops"] else "-")
        lines.append(f"| {label} | {first['case'].get('sparsity', 0.0):.3f} | {cell(ours)} | "
                     f"{ours['provider'] if ours else '-'} | {cell(row.get('flashcore_dense'))} | "
                     f"{cell(theirs)} | {cell(row.get('flex_eager'))} | {ratio} |")
    lines += ["", "## Bars (issue 18)", "", "| bar | measured | held |", "|---|---|---|"]
    lines += [f"| {bar} | {value} | {'yes' if held else '**no**'} |"
              for bar, value, held in bar_lines]
    failed = [r for r in record["results"] if r["status"] != "ok"]
    if failed:
        lines += ["", "Not timed:"] + [f"- {r['case']['label']} {r['workload']}: {r['reason']}"
                                       for r in failed]
    return "\n".join(lines) + "\n"


def main():
    global HEAD_DIM  # --head-dim sets it; the cases read it as the module's constant
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqlens", default="4096,16384",
                        help="comma-separated; B = 16384 / S, as the FA3 grid")
    parser.add_argument("--families", default="",
                        help="comma-separated name prefixes to run (default: all)")
    parser.add_argument("--varlen-tokens", type=int, default=16384)
    parser.add_argument("--decode-lengths", default="16384,65536",
                        help="comma-separated key counts of the decode rows (empty: none)")
    parser.add_argument("--head-dim", type=int, default=HEAD_DIM,
                        help="every case's head dim (the bars are defined at 128)")
    parser.add_argument("--out", default="lab-out/flex")
    args = parser.parse_args()
    HEAD_DIM = args.head_dim
    if not torch.cuda.is_available():
        sys.exit("flex_lab.py needs a CUDA GPU visible to torch")
    block_size = env_int("BLOCK_SIZE", 128)
    window = env_int("FLASHCORE_WINDOW", 1024)
    doc_spans = [env_int("DOC_SPAN", 0)] if os.environ.get("DOC_SPAN") else [128, 1024]
    seqlens = [int(s) for s in args.seqlens.split(",")]
    wanted = [f for f in args.families.split(",") if f]
    config = torch._dynamo.config  # one compiled flex_attention per mod and shape
    setattr(config, "recompile_limit" if hasattr(config, "recompile_limit")
            else "cache_size_limit", 128)
    compiled = torch.compile(flex_attention, dynamic=False)
    env, commit = peers.environment()
    record = dict(schema=peers.SCHEMA, schema_version=peers.SCHEMA_VERSION,
                  created_utc=datetime.datetime.now(datetime.timezone.utc).isoformat(),
                  command_line=" ".join(sys.argv), profile="flex", git_commit=commit,
                  environment=env, knobs=dict(block_size=block_size, window=window,
                                              doc_spans=",".join(map(str, doc_spans))),
                  results=[], expectations=dict(checked=False, files=[], regressions=[],
                                                passed=True))
    generator = torch.Generator(device="cuda").manual_seed(0)
    peers.warm_gpu()
    for seqlen in seqlens:
        batch = max(1, 16384 // seqlen)
        for family in families(seqlen, batch, window, doc_spans, generator):
            if wanted and not family.name.startswith(tuple(wanted)):
                continue
            run_family(family, batch, seqlen, block_size, compiled, record, generator)
    if args.varlen_tokens and (not wanted or "varlen" in wanted):
        run_varlen(args.varlen_tokens, 1024, record, generator)
    if not wanted or "decode" in wanted:
        for kv_len in (int(n) for n in args.decode_lengths.split(",") if n):
            for shape in DECODE_SHAPES:
                run_decode(kv_len, shape, compiled, record, generator)
    bar_lines = bars(record, seqlens, args.varlen_tokens)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(record, indent=1) + "\n")
    table = markdown(record, bar_lines)
    (out / "report.md").write_text(table)
    print(table)
    return 1 if any(r["status"] == "FAILED" for r in record["results"]) else 0


if __name__ == "__main__":
    sys.exit(main())
