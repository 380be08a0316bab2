"""flashcore against its peers, in one run, on the same inputs and with the same timer.

Peers: flashcore (every provider; the best one is "flashcore"), PyTorch SDPA with its flash,
cuDNN, memory-efficient and math backends, PyTorch eager unfused attention, torch.compile'd
FlexAttention with the matching block mask, and the Triton kernel in triton_attention.py.
Every peer's output is checked against flashcore's before it is timed. Writes results.json (the
flashcore-bench results schema, chapter "peers"), report.md and tflops.png into --out.

    python bench/peers.py --profile minimal
"""

import argparse
import datetime
import json
import pathlib
import platform
import statistics
import subprocess
import sys

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import flashcore
import triton_attention

SCHEMA = "flashcore-bench/results"  # tools/bench/report_json.hpp
SCHEMA_VERSION = 1
CHAPTER = "peers"
# Same knobs as flashcore-bench's timer (tools/bench/timer.hpp).
WARMUP_MS, BUDGET_MS, MIN_SAMPLES, MAX_SAMPLES, GRAPH_BELOW_US = 20.0, 100.0, 10, 500, 200.0
PARITY_TOLERANCE = {"bf16": 1e-2, "fp16": 5e-3}  # rel L2 against flashcore, as flashcore-bench
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class Case:
    def __init__(self, batch, heads, seqlen, head_dim, causal, dtype):
        self.batch, self.heads, self.seqlen, self.head_dim = batch, heads, seqlen, head_dim
        self.causal, self.dtype = causal, dtype

    def label(self):  # flashcore-bench's Case::label()
        return f"B{self.batch}_H{self.heads}_S{self.seqlen}_D{self.head_dim}_{self.dtype}" + (
            "_causal" if self.causal else ""
        )

    def flops(self):  # 4·B·H·S²·D, halved for causal
        dense = 4.0 * self.batch * self.heads * self.seqlen * self.seqlen * self.head_dim
        return dense / 2 if self.causal else dense

    def min_bytes(self):  # q, k, v read and o written once
        return 4.0 * self.batch * self.seqlen * self.heads * self.head_dim * 2

    def to_json(self):
        return dict(
            label=self.label(),
            batch=self.batch,
            heads_q=self.heads,
            heads_kv=self.heads,
            seqlen_q=self.seqlen,
            seqlen_k=self.seqlen,
            head_dim=self.head_dim,
            causal=self.causal,
            window_left=-1,
            dtype=self.dtype,
            flops=self.flops(),
            min_bytes=self.min_bytes(),
        )


def cases(profile, dtype):
    canonical = [Case(1, 8, 512, 64, causal, dtype) for causal in (False, True)]
    # FlashAttention-3's grid: 16k tokens (batch * seqlen) and hidden 2048 (heads * head_dim).
    seqlens = [4096] if profile == "minimal" else [512, 1024, 2048, 4096, 8192, 16384]
    grid = [
        Case(16384 // s, 2048 // d, s, d, causal, dtype)
        for d in (64, 128, 256)
        for s in seqlens
        for causal in (False, True)
    ]
    return canonical + grid


def time_fn(fn):
    """Per-launch time (µs) from CUDA events: median over samples after a warm-up. Launches
    shorter than GRAPH_BELOW_US are captured in a CUDA graph and replayed, so that host overhead
    does not count. Returns the flashcore-bench timing object."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def elapsed_ms(run):
        start.record()
        run()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop)

    warm = 0.0
    while warm < WARMUP_MS:  # compilation and autotuning happen in the first launch
        warm += elapsed_ms(fn)
    estimate_us = elapsed_ms(fn) * 1e3
    method, run, per_sample = "events", fn, 1
    if estimate_us < GRAPH_BELOW_US:
        per_sample = max(1, int(1000.0 / max(estimate_us, 1.0)))
        graph = capture(fn, per_sample)
        if graph is not None:
            method, run = "graph", graph.replay
            elapsed_ms(run)
    samples = int(min(MAX_SAMPLES, max(MIN_SAMPLES, BUDGET_MS * 1e3 / (estimate_us * per_sample))))
    # Every sample is enqueued before one final synchronize, as flashcore-bench and
    # triton.testing.do_bench do: a sample that waited for the previous one would start its
    # events on an idle GPU and count the Python call's host time, which differs between peers
    # (flashcore's op ran 7-15% behind the same kernel in flashcore-bench that way; now 0-3%).
    events = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        for _ in range(samples)
    ]
    for begin, end in events:
        begin.record()
        run()
        end.record()
    torch.cuda.synchronize()
    times = [begin.elapsed_time(end) * 1e3 / per_sample for begin, end in events]
    return dict(
        method=method,
        samples=samples,
        launches_per_sample=per_sample,
        min_us=min(times),
        p50_us=statistics.median(times),
        p90_us=sorted(times)[int(0.9 * (samples - 1))],
        mean_us=statistics.fmean(times),
        stdev_us=statistics.stdev(times) if samples > 1 else 0.0,
    )


def capture(fn, launches):
    """A CUDA graph of `launches` calls of fn, or None when fn cannot be captured."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for _ in range(launches):
                fn()
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


def peers(case, q, k, v):
    """(workload, role, requested_backend, fn -> BSHD output) for every peer of this case."""
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

    if _compiled_flex is None:
        _compiled_flex = torch.compile(flex_attention, dynamic=False)
    block_mask = None
    if case.causal:
        block_mask = create_block_mask(
            lambda b, h, q_idx, kv_idx: q_idx >= kv_idx,
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
        for p in ["auto", *flashcore.providers()]
    ]
    runs += [
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
    ]
    return runs


def measure(case, record):
    generator = torch.Generator(device="cuda").manual_seed(0)
    shape = (case.batch, case.seqlen, case.heads, case.head_dim)
    q, k, v = (
        torch.randn(shape, device="cuda", dtype=DTYPES[case.dtype], generator=generator)
        for _ in range(3)
    )
    with torch.no_grad():
        reference = flashcore.attention(q, k, v, causal=case.causal)
        results = []
        for workload, role, requested, fn in peers(case, q, k, v):
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
                out = fn()
                if workload.startswith("flashcore/"):
                    result["provider"] = flashcore.last_provider()
                result["parity"] = parity(out, reference, case.dtype)
                if not result["parity"]["passed"]:
                    result.update(status="FAILED", reason="output differs from flashcore's")
                else:
                    result["timing"] = time_fn(fn)
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
    timing = time_fn(lambda: a @ b)
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
    }
    return env, git.stdout.strip() if git.returncode == 0 else ""


COLUMNS = [
    "flashcore",
    "sdpa_flash",
    "sdpa_cudnn",
    "sdpa_efficient",
    "sdpa_math",
    "eager_unfused",
    "flex_attention",
    "triton",
]


def markdown(record):
    env = record["environment"]
    lines = [
        f"# flashcore peers ({record['profile']})",
        "",
        f"{env['device']} ({env['sm_count']} SMs), torch {env['torch']}, triton "
        f"{env['triton']}, cuDNN {env['cudnn']}. TFLOP/s at the median of CUDA-event timings "
        "(graph replay below 200 µs); FLOPs = 4·B·H·S²·D, halved for causal. "
        f"GEMM ceiling: {record['gemm_ceiling']['tflops']:.0f} TFLOP/s "
        f"({record['gemm_ceiling']['problem']}).",
        "",
        "| B | H | S | D | causal | " + " | ".join(COLUMNS) + " |",
        "|---" * (5 + len(COLUMNS)) + "|",
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
        lines.append(
            f"| {c['batch']} | {c['heads_q']} | {c['seqlen_q']} | {c['head_dim']} | "
            f"{'yes' if c['causal'] else 'no'} | " + " | ".join(cells) + " |"
        )
    notes = [
        f"- {r['case']['label']} {r['workload']}: {r['status']} ({r['reason']})"
        for r in record["results"]
        if r["status"] != "ok"
    ]
    if notes:
        lines += ["", "Not timed:", *notes]
    return "\n".join(lines) + "\n"


def plot(record, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(r["case"]["label"] for r in record["results"]))
    width = 0.8 / len(COLUMNS)
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(labels)), 5))
    for i, column in enumerate(COLUMNS):
        values = []
        for label in labels:
            match = [
                r
                for r in record["results"]
                if r["workload"] == column and r["case"]["label"] == label
            ]
            values.append((match[0]["tflops"] or 0.0) if match else 0.0)
        ax.bar(
            [x + (i - len(COLUMNS) / 2 + 0.5) * width for x in range(len(labels))],
            values,
            width,
            label=column,
        )
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"flashcore and peers, {record['environment']['device']}")
    ax.legend(fontsize=8, ncol=4)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=["minimal", "full"], default="minimal")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--out", default="lab-out/peers", help="directory for the artifacts")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("peers.py needs a CUDA GPU visible to torch")
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
            graph_below_us=str(GRAPH_BELOW_US),
            dtype=args.dtype,
        ),
        gemm_ceiling=dict(problem=problem, tflops=gemm_tflops),
        results=[],
        expectations=dict(checked=False, files=[], regressions=[], passed=True),
    )
    for case in cases(args.profile, args.dtype):
        print(f"{case.label()}", flush=True)
        measure(case, record)
    derive_metrics(record["results"], gemm_tflops)

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(record, indent=1) + "\n")
    table = markdown(record)
    (out / "report.md").write_text(table)
    plot(record, out / "tflops.png")
    print(table)
    print(f"wrote {out / 'results.json'}, {out / 'report.md'}, {out / 'tflops.png'}")
    failed = [r for r in record["results"] if r["status"] == "FAILED"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
