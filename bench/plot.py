"""Plots a results.json of the flashcore-bench/results schema, written by flashcore-bench or by
bench/peers.py: the one plotter of both (scripts/lab.sh and peers.py call it).

tflops.png: TFLOP/s against sequence length, one line per target (its providers in the legend),
one panel per head dim and mask; peers are drawn dashed. Only square problems (seqlen_q ==
seqlen_k) are on a sequence-length axis; decode is memory-bound and is read in report.md.
speedup.png: each target's speedup over the run's baseline (speedup_vs_baseline), per case.

    python3 bench/plot.py lab-out/<run>/results.json [--out DIR]
"""

import argparse
import json
import pathlib
import sys

SCHEMA = "flashcore-bench/results"  # tools/bench/report_json.hpp
SCHEMA_VERSION = 1


def load(path):
    record = json.loads(pathlib.Path(path).read_text())
    if record.get("schema") != SCHEMA or record.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path} is not a {SCHEMA} v{SCHEMA_VERSION} file")
    return record


def timed(record):
    return [r for r in record["results"] if r["status"] == "ok" and r.get("tflops") is not None]


def mask_name(case):
    if case["window_left"] >= 0:
        return f"window {case['window_left']}"
    return "causal" if case["causal"] else "no mask"


def panels(record):
    """{(head_dim, mask): {workload: {seqlen: (tflops, provider, role)}}}, square problems only.
    A target that runs twice on one shape keeps its best time, as the reports do."""
    out = {}
    for r in timed(record):
        c = r["case"]
        if c["seqlen_q"] != c["seqlen_k"]:
            continue
        series = out.setdefault((c["head_dim"], mask_name(c)), {}).setdefault(r["workload"], {})
        best = series.get(c["seqlen_q"])
        if best is None or r["tflops"] > best[0]:
            series[c["seqlen_q"]] = (r["tflops"], r["provider"], r["role"])
    return out


def speedups(record):
    """[(case label, workload, provider, speedup)] of every timed non-baseline result."""
    return [
        (r["case"]["label"], r["workload"], r["provider"], r["speedup_vs_baseline"])
        for r in timed(record)
        if r["role"] != "baseline" and r.get("speedup_vs_baseline") is not None
    ]


def title(record):
    env = record.get("environment", {})
    device = env.get("device", "unknown GPU")
    return f"{device}, profile {record.get('profile', '?')}, commit {record.get('git_commit', '')[:8]}"


def plot_tflops(record, path, plt):
    groups = panels(record)
    if not groups:
        return False
    keys = sorted(groups)
    columns = min(3, len(keys))
    rows = (len(keys) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.9 * rows), squeeze=False)
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    workloads = sorted({w for series in groups.values() for w in series})
    providers = {w: sorted({p for r in timed(record) if r["workload"] == w for p in [r["provider"]]})
                 for w in workloads}
    handles = {}
    for ax, key in zip(axes.flat, keys):
        top = 0.0
        for workload, points in sorted(groups[key].items()):
            seqlens = sorted(points)
            peer = any(points[s][2] == "peer" for s in seqlens)
            (line,) = ax.plot(
                seqlens,
                [points[s][0] for s in seqlens],
                marker="s" if peer else "o",
                linestyle="--" if peer else "-",
                color=palette[workloads.index(workload) % len(palette)],
            )
            handles.setdefault(f"{workload} ({', '.join(providers[workload])})", line)
            top = max(top, *(points[s][0] for s in seqlens))
        ax.set_xscale("log", base=2)
        ax.set_title(f"head dim {key[0]}, {key[1]}", fontsize=10)
        ax.set_xlabel("sequence length")
        ax.set_ylabel("TFLOP/s")
        ax.set_ylim(0, 1.1 * top)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys) :]:
        ax.axis("off")
    fig.suptitle(f"TFLOP/s against sequence length (peers dashed)\n{title(record)}", fontsize=11)
    legend_rows = (len(handles) + 2) // 3
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=3, fontsize=8)
    fig.tight_layout(rect=(0, 0.05 * legend_rows / rows, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_speedup(record, path, plt):
    bars = speedups(record)
    if not bars:
        return False
    labels = list(dict.fromkeys(label for label, *_ in bars))
    workloads = list(dict.fromkeys(workload for _, workload, *_ in bars))
    width = 0.8 / len(workloads)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(labels) * max(1, len(workloads) / 3)), 4.6))
    for i, workload in enumerate(workloads):
        xs, ys = [], []
        for x, label in enumerate(labels):
            for bar_label, bar_workload, _, speedup in bars:
                if bar_label == label and bar_workload == workload:
                    xs.append(x + (i - (len(workloads) - 1) / 2) * width)
                    ys.append(speedup)
        ax.bar(xs, ys, width, label=workload)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(labels)), labels, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("speedup over the baseline (x)")
    ax.set_title(f"Speedup over the baseline\n{title(record)}", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot(record, out_dir):
    """Writes tflops.png and speedup.png into out_dir; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")  # files only; no display on the GPU machines
    import matplotlib.pyplot as plt

    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in (("tflops.png", plot_tflops), ("speedup.png", plot_speedup)):
        if draw(record, out_dir / name, plt):
            written.append(out_dir / name)
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="a results.json (flashcore-bench or bench/peers.py)")
    parser.add_argument("--out", help="directory for the PNGs (default: next to results.json)")
    args = parser.parse_args()
    try:
        record = load(args.results)
    except (OSError, ValueError) as error:
        sys.exit(f"plot.py: {error}")
    try:
        written = plot(record, args.out or pathlib.Path(args.results).parent)
    except ImportError:
        # flashcore-bench report quotes this line in its HTML and still renders the tables.
        sys.exit("plot.py: matplotlib is not installed (pip install -c constraints.txt matplotlib)")
    print("wrote " + (", ".join(str(p) for p in written) if written else "nothing (no timed results)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
