"""bench/plot.py, the one plotter of flashcore-bench's and bench/peers.py's results.json: which
results go on the sequence-length axis, and that both PNGs are written."""

import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import plot  # noqa: E402


def result(workload, role, provider, seqlen_q, seqlen_k, tflops, speedup=None, head_dim=64):
    return dict(
        workload=workload,
        role=role,
        provider=provider,
        status="ok",
        case=dict(
            label=f"S{seqlen_q}_{seqlen_k}_D{head_dim}",
            seqlen_q=seqlen_q,
            seqlen_k=seqlen_k,
            head_dim=head_dim,
            causal=False,
            window_left=-1,
        ),
        tflops=tflops,
        speedup_vs_baseline=speedup,
    )


RECORD = dict(
    schema=plot.SCHEMA,
    schema_version=plot.SCHEMA_VERSION,
    profile="full",
    git_commit="0123456789abcdef",
    environment=dict(device="test GPU"),
    results=[
        result("baseline", "baseline", "unfused", 512, 512, 10.0),
        result("optimized", "optimized", "sm80", 512, 512, 50.0, 5.0),
        result("optimized", "optimized", "sm90", 4096, 4096, 400.0, 8.0),
        result("cudnn_sdpa", "peer", "cudnn", 4096, 4096, 420.0),
        result("optimized", "optimized", "sm80", 1, 4096, 1.0, 2.0, head_dim=128),  # decode
        dict(result("wmma", "step", "wmma", 512, 512, None), status="SKIPPED"),
    ],
)


def test_square_problems_only_and_best_per_point():
    panels = plot.panels(RECORD)
    assert list(panels) == [(64, "no mask")], "decode (Sq != Sk) is not on a seqlen axis"
    assert panels[(64, "no mask")]["optimized"] == {
        512: (50.0, "sm80", "optimized"),
        4096: (400.0, "sm90", "optimized"),
    }
    assert "wmma" not in panels[(64, "no mask")], "untimed results are not drawn"


def test_speedups_leave_out_the_baseline():
    assert [(w, s) for _, w, _, s in plot.speedups(RECORD)] == [
        ("optimized", 5.0),
        ("optimized", 8.0),
        ("optimized", 2.0),
    ]


def test_writes_both_pngs(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed, so nothing is drawn")
    results = tmp_path / "results.json"
    results.write_text(json.dumps(RECORD))
    written = plot.plot(plot.load(results), tmp_path)
    assert [p.name for p in written] == ["tflops.png", "speedup.png"]
    for path in written:
        assert path.read_bytes().startswith(b"\x89PNG")


def test_rejects_other_schemas(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps(dict(RECORD, schema_version=2)))
    with pytest.raises(ValueError, match="flashcore-bench/results v1"):
        plot.load(path)
