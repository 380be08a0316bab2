"""flashcore against its peers, in one run, on the same inputs and with the same timer.

Peers: flashcore (every provider; the best one is "flashcore"), PyTorch SDPA with its flash,
cuDNN, memory-efficient and math backends, PyTorch eager unfused attention, torch.compile'd
FlexAttention with the matching block mask, the Triton kernel in triton_attention.py, and
flash-attn-4 (`flash_attn.cute`, CuTe DSL) where it is installed (skipped, with the reason, where
it is not). The report's "vs best peer" column is flashcore's time against the fastest fused peer
of the same case.
Every peer's output is checked against flashcore's before it is timed, and every peer is timed by
flashcore-bench's rules (time_fn). Writes results.json (the flashcore-bench results schema, chapter
"peers"), report.md, and tflops.png and speedup.png (bench/plot.py) into --out.

    python bench/peers.py --profile minimal
    python bench/peers.py --providers auto,sm90,sm80 --cases B1_H8_S512_D64_bf16
    python bench/peers.py --providers auto --peers sdpa_cudnn,flash_attn_4 --profile full

--providers picks flashcore's providers (default: "auto" and every provider; the scalar and WMMA
steps take 20-50 ms a launch at S4k, so a run beside flashcore-bench's chapter, which times them
itself, leaves them out); --cases picks case labels of the profile; --peers picks peers (default:
all of them). Every picked peer runs at each case.
"""

import argparse
import datetime
from importlib.metadata import version as package_version
import json
import math
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import create_block_mask, flex_attention, noop_mask

import flashcore
import plot
import triton_attention
from peer_cases import PEERS, best_peer, cases, select, select_cases, split_list

try:  # optional; its kernels are compiled (CuTe DSL) on a shape's first call, outside the timing
    from flash_attn.cute.interface import flash_attn_func as fa4_attention

    FA4_MISSING = ""
except Exception as error:  # noqa: BLE001 - absent or broken (its DSL fails to load): a skip
    fa4_attention, FA4_MISSING = None, f"flash-attn-4 is not usable here ({error})"

SCHEMA = "flashcore-bench/results"  # tools/bench/report_json.hpp
SCHEMA_VERSION = 1
CHAPTER = "peers"
# flashcore-bench's timing rules, with its constants: tools/bench/timer.{hpp,cpp} (warm-up, sample
# budget, ~2 ms per graph replay) and tools/bench/case_data.cpp (input sets rotated so that the
# working set is twice the L2, within a quarter of the free memory). One rule differs: a Python
# call's host time (50-100 us for a flex call, docs/perf.md session 41) is a sizeable share of
# launches well above flashcore-bench's 200 us graph bound, and a one-launch estimate near that
# bound picked events in one run and a graph in the next (documents of 1024: 181 against 165 us).
# So every launch that can be captured is timed by graph replay here; events only where capture
# fails.
WARMUP_MS, BUDGET_MS, MIN_SAMPLES, MAX_SAMPLES = 20.0, 100.0, 10, 500
WARM_GPU_S = 3.0  # warm_gpu: load before a run's first timed row
TARGET_SAMPLE_US, MAX_LAUNCHES_PER_SAMPLE = 2000.0, 1000
WORKING_SET_OVER_L2, MAX_SETS, MAX_FREE_FRACTION_FOR_SETS = 2.0, 64, 0.25
PARITY_TOLERANCE = {"bf16": 1e-2, "fp16": 5e-3}  # rel L2 against flashcore: reference/tolerance.hpp
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def warm_gpu(seconds=WARM_GPU_S):
    """Dense bf16 matmuls for `seconds` before the first timed row: time_fn's 20 ms warm-up is per
    workload and leaves an idle GPU's clocks and power still ramping, so the first rows of a run
    timed slower than the same kernel later in it (flex_lab's no-mods row: 1.038x its dense twin,
    the same kernel)."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()


def input_sets(case):
    """How many (q, k, v) sets the timed launches rotate over: flashcore-bench's rule, so that a
    small shape is timed from HBM as it would run inside a model, not from a warm L2."""
    elements = case.batch * case.seqlen * case.heads * case.head_dim
    set_bytes = 2 * 4 * elements  # q, k, v and the output, two bytes each
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    sets = min(MAX_SETS, max(1, math.ceil(WORKING_SET_OVER_L2 * l2_bytes / set_bytes)))
    free_bytes, _ = torch.cuda.mem_get_info()
    while sets > 1 and sets * set_bytes > MAX_FREE_FRACTION_FOR_SETS * free_bytes:
        sets -= 1
    return sets


def percentile(ordered, p):
    """Linear interpolation between closest ranks, as flashcore-bench's summarize()."""
    position = p * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def time_fn(fns):
    """Per-launch time (us) of fns[i] (the same work on input set i), by flashcore-bench's rules
    (tools/bench/timer.cpp): launches rotate over the sets; one launch absorbs lazy work, the next
    gives an estimate; warm-up for WARMUP_MS; the launches are captured, a whole number of passes
    over the sets per sample, into a CUDA graph of about TARGET_SAMPLE_US (at least one pass) that
    is replayed, or timed one launch per sample with events where capture fails; samples fill
    BUDGET_MS; median and percentiles over the samples. Every sample is enqueued before one
    synchronize, and a replay runs no Python, so no peer's host time is timed. Returns the
    flashcore-bench timing object, plus the number of input sets."""
    sets = len(fns)
    counter = iter(range(sys.maxsize))

    def launch_next():
        fns[next(counter) % sets]()

    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    launch_next()
    start.record()
    launch_next()
    stop.record()
    stop.synchronize()
    estimate_us = max(1.0, start.elapsed_time(stop) * 1e3)
    for _ in range(int(min(1e5, WARMUP_MS * 1e3 / estimate_us))):
        launch_next()
    torch.cuda.synchronize()

    method, per_sample = "events", 1
    per_graph = math.ceil(TARGET_SAMPLE_US / estimate_us)
    per_graph = max(1, min(MAX_LAUNCHES_PER_SAMPLE, math.ceil(per_graph / sets) * sets))
    graph = capture(fns, per_graph)
    if graph is not None:
        method, per_sample = "graph", per_graph
        graph.replay()  # uploads the graph
        torch.cuda.synchronize()
    samples = int(min(MAX_SAMPLES, max(MIN_SAMPLES, BUDGET_MS * 1e3 / (estimate_us * per_sample))))
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(samples)
    ]
    for begin, end in events:
        begin.record()
        if graph is not None:
            graph.replay()
        else:
            for _ in range(per_sample):
                launch_next()
        end.record()
    torch.cuda.synchronize()
    times = sorted(begin.elapsed_time(end) * 1e3 / per_sample for begin, end in events)
    return dict(
        method=method,
        samples=samples,
        launches_per_sample=per_sample,
        min_us=times[0],
        p50_us=percentile(times, 0.5),
        p90_us=percentile(times, 0.9),
        mean_us=statistics.fmean(times),
        stdev_us=statistics.stdev(times) if samples > 1 else 0.0,
        input_sets=sets,
    )


def capture(fns, launches):
    """A CUDA graph of `launches` calls cycling over fns, or None when they cannot be captured."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in fns:  # torch's warm-up on a side stream before capture, once per set
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for i in range(launches):
                fns[i % len(fns)]()
    except Exception:  # noqa: BLE001 - any peer that cannot be captured is timed with events
        torch.cuda.synchronize()
        return None
    return graph


def parity(out, reference, dtype):
    out, reference = out.float(), reference.float()
    has_nan = bool(torch.isnan(out).any())
    norm = reference.norm().item()
    rel_l2 = (out - reference).norm().item() / (norm if norm > 0 else 1.0)
    tolerance = PARITY_TOLERANCE[dtype]
    return dict(
        reference="flashcore",
        rel_l2=rel_l2,
        tolerance=tolerance,
        has_nan=has_nan,
        passed=not has_nan and rel_l2 <= tolerance,
    )


_compiled_flex = None


def peers(case, q, k, v, providers, wanted):
    """(workload, role, requested_backend, fn -> BSHD output) for flashcore's providers and every
    peer named in `wanted` (PEERS' names), at this case."""
    global _compiled_flex
    # torch's own kernels get their native BHSD layout (same values); flashcore and Triton read
    # BSHD.
    qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    scale = case.head_dim**-0.5

    def sdpa(backend):
        def run():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(qt, kt, vt, is_causal=case.causal)

        return run

    causal_mask = torch.ones(case.seqlen, case.seqlen, dtype=torch.bool, device="cuda").triu(1)

    def unfused():
        scores = (qt @ kt.transpose(-2, -1)) * scale
        if case.causal:
            scores = scores.masked_fill(causal_mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ vt

    def fa4():
        if fa4_attention is None:
            raise RuntimeError(FA4_MISSING)
        # flash-attn-4 reads BSHD as flashcore does; it returns (out, lse).
        return fa4_attention(q, k, v, softmax_scale=scale, causal=case.causal)[0]

    # Built here, outside the timed call, also for no mask (noop_mask: every block full): without
    # one, flex_attention builds a default mask inside each call, on the host, and that is timed
    # too (H100, B1 H8 S512 D64: 171.7 us per call without, 92.1 us with). The unmasked call still
    # fails CUDA-graph capture (the causal one does not), so it stays timed by events, host path
    # included.
    block_mask = None
    if "flex_attention" in wanted:
        if _compiled_flex is None:
            _compiled_flex = torch.compile(flex_attention, dynamic=False)
        block_mask = create_block_mask(
            (lambda b, h, q_idx, kv_idx: q_idx >= kv_idx) if case.causal else noop_mask,
            None,
            None,
            case.seqlen,
            case.seqlen,
            device="cuda",
        )

    bshd = lambda fn: (lambda: fn().transpose(1, 2))  # noqa: E731
    runs = [
        (
            f"flashcore/{p}",
            "step",
            p,
            lambda p=p: flashcore.attention(q, k, v, causal=case.causal, backend=p),
        )
        for p in providers
    ]
    others = [
        ("sdpa_flash", "peer", "flash", bshd(sdpa(SDPBackend.FLASH_ATTENTION))),
        ("sdpa_cudnn", "peer", "cudnn", bshd(sdpa(SDPBackend.CUDNN_ATTENTION))),
        ("sdpa_efficient", "peer", "efficient", bshd(sdpa(SDPBackend.EFFICIENT_ATTENTION))),
        ("sdpa_math", "peer", "math", bshd(sdpa(SDPBackend.MATH))),
        ("eager_unfused", "baseline", "eager", bshd(unfused)),
        (
            "flex_attention",
            "peer",
            "flex",
            bshd(lambda: _compiled_flex(qt, kt, vt, block_mask=block_mask)),
        ),
        ("triton", "peer", "triton", lambda: triton_attention.attention(q, k, v, case.causal)),
        ("flash_attn_4", "peer", "fa4", fa4),
    ]
    assert [name for name, *_ in others] == PEERS  # the report's columns and --peers' names
    return runs + [run for run in others if run[0] in wanted]


def measure(case, record, providers, wanted):
    generator = torch.Generator(device="cuda").manual_seed(0)
    shape = (case.batch, case.seqlen, case.heads, case.head_dim)
    inputs = [
        [torch.randn(shape, device="cuda", dtype=DTYPES[case.dtype], generator=generator)
         for _ in range(3)]
        for _ in range(input_sets(case))
    ]
    with torch.no_grad():
        reference = flashcore.attention(*inputs[0], causal=case.causal)
        results = []
        # Each peer's runs, one per input set: parity on set 0, timing over all of them.
        per_set = [peers(case, *qkv, providers, wanted) for qkv in inputs]
        for index, (workload, role, requested, _) in enumerate(per_set[0]):
            fns = [runs[index][3] for runs in per_set]
            result = dict(
                target=f"{CHAPTER}:{workload}",
                chapter=CHAPTER,
                workload=workload,
                role=role,
                requested_backend=requested,
                provider=requested,
                status="ok",
                reason="",
                case=case.to_json(),
                parity=None,
                timing=None,
            )
            try:
                out = fns[0]()
                if workload.startswith("flashcore/"):
                    result["provider"] = flashcore.last_provider()
                result["parity"] = parity(out, reference, case.dtype)
                if not result["parity"]["passed"]:
                    result.update(status="FAILED", reason="output differs from flashcore's")
                else:
                    result["timing"] = time_fn(fns)
            except Exception as error:  # noqa: BLE001
                # A backend that does not implement a shape, runs out of memory or fails to
                # compile is reported as skipped, with the reason; the other peers still run.
                torch.cuda.synchronize()
                text = str(error).strip()
                result.update(
                    status="SKIPPED", reason=text.splitlines()[0][:200] if text else repr(error)
                )
            torch.cuda.empty_cache()  # the math and unfused peers leave large score buffers
            results.append(result)
            print(
                f"  {workload:22s} {result['status']:8s} "
                + (
                    f"{result['timing']['p50_us']:10.1f} us"
                    if result["timing"]
                    else result["reason"]
                ),
                flush=True,
            )
    best = min(
        (r for r in results if r["workload"].startswith("flashcore/") and r["timing"]),
        key=lambda r: r["timing"]["p50_us"],
        default=None,
    )
    if best is not None:
        results.append(
            dict(best, target=f"{CHAPTER}:flashcore", workload="flashcore", role="optimized")
        )
    record["results"] += results


def derive_metrics(results, gemm_tflops):
    """flashcore-bench's derive_metrics: throughput, and ratios to the baseline and to cuDNN."""

    def p50(workload, label):
        for r in results:
            if r["workload"] == workload and r["case"]["label"] == label and r["timing"]:
                return r["timing"]["p50_us"]
        return None

    for r in results:
        r.update(
            tflops=None,
            gbps=None,
            pct_of_gemm_ceiling=None,
            speedup_vs_baseline=None,
            ratio_vs_cudnn=None,
        )
        if not r["timing"]:
            continue
        seconds = r["timing"]["p50_us"] * 1e-6
        r["tflops"] = r["case"]["flops"] / seconds / 1e12
        r["gbps"] = r["case"]["min_bytes"] / seconds / 1e9
        if gemm_tflops:
            r["pct_of_gemm_ceiling"] = 100.0 * r["tflops"] / gemm_tflops
        label = r["case"]["label"]
        if (base := p50("eager_unfused", label)) is not None:
            r["speedup_vs_baseline"] = base / r["timing"]["p50_us"]
        if (cudnn := p50("sdpa_cudnn", label)) is not None:
            r["ratio_vs_cudnn"] = cudnn / r["timing"]["p50_us"]


def gemm_ceiling(dtype):
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=DTYPES[dtype])
    b = torch.randn(n, n, device="cuda", dtype=DTYPES[dtype])
    timing = time_fn([lambda: a @ b])  # compute-bound: one set, as flashcore-bench's GEMM ceiling
    return f"{dtype} {n}x{n}x{n} torch.matmul", 2.0 * n**3 / (timing["p50_us"] * 1e-6) / 1e12


def environment():
    props = torch.cuda.get_device_properties(0)
    git = subprocess.run(
        ["git", "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        cwd=pathlib.Path(__file__).resolve().parent,
    )
    env = {
        "device": props.name,
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": str(props.multi_processor_count),
        "memory_gib": f"{props.total_memory / 2**30:.1f}",
        "cuda_runtime_torch": str(torch.version.cuda),
        "cudnn": str(torch.backends.cudnn.version()),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "flashcore": flashcore.__version__,
        "flashcore_providers": ",".join(flashcore.providers()),
        "flash_attn_4": package_version("flash-attn-4") if fa4_attention else "not usable",
    }
    # A tree copied without its .git (a lent GPU machine) names its commit in FLASHCORE_GIT_COMMIT.
    fallback = os.environ.get("FLASHCORE_GIT_COMMIT", "")
    commit = git.stdout.strip() if git.returncode == 0 else fallback
    return env, commit


COLUMNS = ["flashcore", *PEERS]



def markdown(record):
    env = record["environment"]
    lines = [
        f"# flashcore peers ({record['profile']})",
        "",
        f"{env['device']} ({env['sm_count']} SMs), torch {env['torch']}, triton "
        f"{env['triton']}, cuDNN {env['cudnn']}. TFLOP/s at the median of CUDA-event timings, "
        "every column by flashcore-bench's rules (inputs rotated past L2), each launch by "
        "CUDA-graph replay where it can be captured (the rule each column used is in the table "
        "below); FLOPs = 4·B·H·S²·D, halved for causal. "
        + (f"flash-attn-4 {env['flash_attn_4']}. " if "flash_attn_4" in env else "")
        + f"GEMM ceiling: {record['gemm_ceiling']['tflops']:.0f} TFLOP/s "
        f"({record['gemm_ceiling']['problem']}).",
        "",
        "| B | H | S | D | causal | " + " | ".join(COLUMNS) + " | vs best peer |",
        "|---" * (6 + len(COLUMNS)) + "|",
    ]
    by_label = {}
    for r in record["results"]:
        by_label.setdefault(r["case"]["label"], {})[r["workload"]] = r
    for row in by_label.values():
        c = next(iter(row.values()))["case"]
        cells = []
        for column in COLUMNS:
            r = row.get(column)
            if r is None:
                cells.append("-")
            elif r["tflops"] is None:
                cells.append(r["status"].lower())
            elif column == "flashcore":
                cells.append(f"**{r['tflops']:.0f}** ({r['provider']})")
            else:
                cells.append(f"{r['tflops']:.0f}")
        ours, best = row.get("flashcore", {}).get("tflops"), best_peer(row)
        cells.append(f"{ours / best[1]:.2f}x {best[0]}" if ours and best else "-")
        lines.append(
            f"| {c['batch']} | {c['heads_q']} | {c['seqlen_q']} | {c['head_dim']} | "
            f"{'yes' if c['causal'] else 'no'} | " + " | ".join(cells) + " |"
        )
    lines += [
        "",
        "Timing rule per column (method: `graph` = CUDA-graph replay of several launches per "
        "sample, `events` = one launch per sample; input sets rotated per launch):",
        "",
        "| column | method | launches per sample | input sets |",
        "|---|---|---|---|",
    ]
    for column in COLUMNS:
        timings = [
            r["timing"] for r in record["results"] if r["workload"] == column and r["timing"]
        ]
        if not timings:
            continue

        def spread(key):
            values = sorted({t.get(key, 1) for t in timings})
            return str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}"

        methods = "/".join(sorted({t["method"] for t in timings}))
        lines.append(
            f"| {column} | {methods} | {spread('launches_per_sample')} | {spread('input_sets')} |"
        )
    notes = [
        f"- {r['case']['label']} {r['workload']}: {r['status']} ({r['reason']})"
        for r in record["results"]
        if r["status"] != "ok"
    ]
    if notes:
        lines += ["", "Not timed:", *notes]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=["minimal", "full"], default="minimal")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--out", default="lab-out/peers", help="directory for the artifacts")
    parser.add_argument(
        "--providers", help="flashcore providers to time, comma-separated (default: all and auto)"
    )
    parser.add_argument("--cases", help="case labels to run, comma-separated (default: all)")
    parser.add_argument("--peers", help="peers to time, comma-separated (default: all of them)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("peers.py needs a CUDA GPU visible to torch")
    try:
        providers = select(
            split_list(args.providers), ["auto", *flashcore.providers()], "flashcore provider"
        )
        selected = select_cases(cases(args.profile, args.dtype), split_list(args.cases))
        wanted = select(split_list(args.peers), PEERS, "peer")
    except ValueError as error:
        parser.error(str(error))
    # Every case compiles FlexAttention for its shape; keep them all compiled (the limit was
    # renamed in torch 2.7).
    config = torch._dynamo.config
    setattr(
        config, "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit", 64
    )

    env, commit = environment()
    problem, gemm_tflops = gemm_ceiling(args.dtype)
    record = dict(
        schema=SCHEMA,
        schema_version=SCHEMA_VERSION,
        created_utc=datetime.datetime.now(datetime.timezone.utc).isoformat(),
        command_line=" ".join(sys.argv),
        profile=args.profile,
        git_commit=commit,
        environment=env,
        knobs=dict(
            warmup_ms=str(WARMUP_MS),
            budget_ms=str(BUDGET_MS),
            graph_replay="every launch that can be captured",
            target_sample_us=str(TARGET_SAMPLE_US),
            working_set_over_l2=str(WORKING_SET_OVER_L2),
            dtype=args.dtype,
            providers=",".join(providers),
            peers=",".join(wanted),
        ),
        gemm_ceiling=dict(problem=problem, tflops=gemm_tflops),
        results=[],
        expectations=dict(checked=False, files=[], regressions=[], passed=True),
    )
    for case in selected:
        print(f"{case.label()}", flush=True)
        measure(case, record, providers, wanted)
    derive_metrics(record["results"], gemm_tflops)

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(record, indent=1) + "\n")
    table = markdown(record)
    (out / "report.md").write_text(table)
    pngs = plot.plot(record, out)
    print(table)
    print(f"wrote {out / 'results.json'}, {out / 'report.md'}, " + ", ".join(map(str, pngs)))
    failed = [r for r in record["results"] if r["status"] == "FAILED"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
