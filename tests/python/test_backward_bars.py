"""scripts/backward_bars.py: the backward issue's speed bars read off flashcore_time_backward's and
time_sdpa_backward.py's lines (no torch, no GPU). The lines are session 13's, from the H100."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
import backward_bars  # noqa: E402

OURS = """\
B4 Hq16 Hkv16 S4096 D128 bf16 | fwd 0.820 ms (sm90) | bwd 2.535 ms 542.2 TFLOP/s (sm90) | fwd+bwd 3.355 ms | workspace 146.5 MiB
B2 Hq16 Hkv16 S8192 D128 bf16 | fwd 1.568 ms (sm90) | bwd 5.150 ms 533.8 TFLOP/s (sm90) | fwd+bwd 6.718 ms | workspace 146.5 MiB
B4 Hq32 Hkv32 S4096 D64 bf16 causal | fwd 0.706 ms (sm90) | bwd 1.861 ms 369.3 TFLOP/s (sm90) | fwd+bwd 2.567 ms | workspace 132.0 MiB
B4 Hq16 Hkv16 S4096 D128 bf16 | fwd 0.814 ms (sm90) | bwd 2.492 ms 551.4 TFLOP/s (sm90) | fwd+bwd 3.306 ms | workspace 146.5 MiB
B4 Hq16 Hkv2 S4096 D128 bf16 causal | fwd 0.600 ms (sm90) | bwd 2.100 ms 327.2 TFLOP/s (sm90) | fwd+bwd 2.700 ms | workspace 130.0 MiB
B4 Hq16 Hkv16 S4096 D128 bf16 deterministic | fwd 0.820 ms (sm90) | bwd 3.202 ms 429.2 TFLOP/s (sm90) | fwd+bwd 4.022 ms | workspace 130.0 MiB
B4 Hq16 Hkv16 S4096 D128 bf16 causal deterministic | fwd 0.5 ms (sm80) | bwd 4.884 ms 140.7 TFLOP/s (sm80) | fwd+bwd 5.4 ms | workspace 130.0 MiB
B4 Hq16 Hkv16 S4096 D256 bf16 causal | fwd 1.0 ms (sm90) | bwd 4.263 ms 322.4 TFLOP/s (sm90) | fwd+bwd 5.2 ms | workspace 260.0 MiB
B1 Hq4 Hkv4 S2048 D128 bf16 | fwd 0.059 ms (sm90) | bwd 0.083 ms 258.4 TFLOP/s (sm90) | fwd+bwd 0.142 ms | workspace 20.0 MiB
workspace B2 H16 S8192 D128: sm90 146.5 MiB (causal 130.0 MiB), sm80 130.0 MiB
"""
PEERS = """\
2.11.0+cu130 NVIDIA H100 80GB HBM3 cudnn 91900
B4 H16 S4096 D128 bfloat16 | cudnn bwd 2.662 ms 516.3 TFLOP/s | flash2 bwd 5.084 ms 270.3 TFLOP/s
B2 H16 S8192 D128 bfloat16 | cudnn bwd 5.277 ms 520.9 TFLOP/s | flash2 bwd 9.463 ms 290.5 TFLOP/s
B4 H32 S4096 D64 bfloat16 causal | cudnn bwd 2.055 ms 334.4 TFLOP/s | flash2 bwd 3.227 ms 213.0 TFLOP/s
B4 H16 S4096 D256 bfloat16 causal | cudnn bwd 3.977 ms 345.6 TFLOP/s | flash2 bwd 6.501 ms 211.4 TFLOP/s
B1 H4 S2048 D128 bfloat16 | cudnn bwd 0.177 ms 97.0 TFLOP/s | flash2 bwd 0.190 ms 90.4 TFLOP/s
"""


def shape(b, h, s, d, causal=False, dtype="bf16"):
    return backward_bars.Shape(b, h, s, d, dtype, causal)


def test_rows_are_the_plain_sm90_ones_with_repeats_kept():
    ours = backward_bars.read_ours(OURS.splitlines())
    # GQA, deterministic and sm80 rows are not the bars' rows; the workspace line is no row.
    assert set(ours) == {shape(4, 16, 4096, 128), shape(2, 16, 8192, 128),
                         shape(4, 32, 4096, 64, True), shape(4, 16, 4096, 256, True),
                         shape(1, 4, 2048, 128)}
    assert ours[shape(4, 16, 4096, 128)] == [2.535, 2.492]


def test_peers_by_shape_and_a_peer_without_the_shape():
    peers = backward_bars.read_peers(PEERS.splitlines())
    assert peers[shape(2, 16, 8192, 128)] == {"cudnn": [5.277], "flash2": [9.463]}
    assert peers[shape(1, 4, 2048, 128)] == {"cudnn": [0.177], "flash2": [0.19]}
    missing = backward_bars.read_peers(["B1 H4 S2048 D128 bfloat16 | cudnn bwd 0.177 ms 97.0 "
                                        "TFLOP/s | flash2 n/a (no kernel)"])
    assert missing[shape(1, 4, 2048, 128)] == {"cudnn": [0.177]}


def test_the_issue_bars_per_shape():
    assert backward_bars.cudnn_bar(shape(2, 16, 8192, 128)) == 1.0
    assert backward_bars.cudnn_bar(shape(4, 32, 4096, 64, True)) == 1.0
    assert backward_bars.cudnn_bar(shape(4, 16, 4096, 256, True)) == 0.9
    assert backward_bars.cudnn_bar(shape(4, 16, 4096, 128, dtype="fp16")) is None
    assert backward_bars.cudnn_bar(shape(1, 4, 2048, 128)) is None  # below the FA3 grid's S


def test_a_missed_bar_fails_and_the_table_says_which():
    ours = backward_bars.read_ours(OURS.splitlines())
    peers = backward_bars.read_peers(PEERS.splitlines())
    rows, all_hold = backward_bars.table(ours, peers)
    assert all_hold, "\n".join(rows)
    # The same rows against a cuDNN 10% faster at S8192: that row's bar misses.
    peers[shape(2, 16, 8192, 128)]["cudnn"] = [4.7]
    rows, all_hold = backward_bars.table(ours, peers)
    assert not all_hold
    assert any("S8192" in row and "**misses**" in row for row in rows)
    # A barred shape with no peer time at all is a miss, not a pass.
    peers[shape(2, 16, 8192, 128)]["cudnn"] = [5.277]
    del peers[shape(4, 32, 4096, 64, True)]
    rows, all_hold = backward_bars.table(ours, peers)
    assert not all_hold
    assert any("D64" in row and "no peer time" in row for row in rows)


def test_alternated_runs_compare_medians():
    # Session 15's call on the H100: main's hd128 B2 S8192 and SDPA cuDNN alternated five times.
    ours = backward_bars.read_ours(
        f"B2 Hq16 Hkv16 S8192 D128 bf16 | fwd 1.57 ms (sm90) | bwd {ms} ms 540.0 TFLOP/s (sm90)"
        for ms in ("5.072", "4.937", "5.118", "5.071", "5.056"))
    peers = backward_bars.read_peers(
        f"B2 H16 S8192 D128 bfloat16 | cudnn bwd {ms} ms 538.6 TFLOP/s | flash2 bwd 9.4 ms 1 TFLOP/s"
        for ms in ("5.104", "5.345", "5.050", "5.129", "5.205"))
    assert peers[shape(2, 16, 8192, 128)]["cudnn"] == [5.104, 5.345, 5.050, 5.129, 5.205]
    rows, all_hold = backward_bars.table(ours, peers)
    # Medians 5.071 and 5.129: 1.011x, although cuDNN was faster in round 3 (5.050 against 5.118).
    assert all_hold, "\n".join(rows)
    assert "1.011x" in rows[2] and "(median 5.129)" in rows[2] and "(median 5.071)" in rows[2]
    # A cuDNN 2% faster in every round misses, whatever one round says.
    faster = {"cudnn": [t * 0.98 for t in peers[shape(2, 16, 8192, 128)]["cudnn"]],
              "flash2": [9.4]}
    rows, all_hold = backward_bars.table(ours, {shape(2, 16, 8192, 128): faster})
    assert not all_hold


def test_main_exit_status(tmp_path):
    ours, peers = tmp_path / "ours.log", tmp_path / "peers.log"
    ours.write_text(OURS)
    peers.write_text(PEERS)
    assert backward_bars.main(["backward_bars.py", str(ours), str(peers)]) == 0
    peers.write_text(PEERS.replace("cudnn bwd 2.662", "cudnn bwd 2.0"))
    assert backward_bars.main(["backward_bars.py", str(ours), str(peers)]) == 1
    assert backward_bars.main(["backward_bars.py", str(ours)]) == 2


def test_forward_backward_beside_the_peers_forward_backward():
    ours = backward_bars.read_ours_forward_backward(OURS.splitlines())
    # Only the bars' rows, each run's fwd+bwd kept.
    assert ours[shape(4, 16, 4096, 128)] == [3.355, 3.306]
    assert shape(4, 16, 4096, 128, True) not in ours
    peers = backward_bars.read_peers_forward_backward([
        "B4 H16 S4096 D128 bfloat16 | cudnn bwd 2.662 ms 516.3 TFLOP/s fwd 0.790 ms | "
        "flash2 bwd 5.084 ms 270.3 TFLOP/s fwd 1.500 ms",
        "B4 H16 S4096 D128 bfloat16 | cudnn bwd 2.700 ms 509.0 TFLOP/s fwd 0.800 ms | "
        "flash2 n/a (no kernel)",
    ])
    assert peers[shape(4, 16, 4096, 128)]["cudnn"] == [2.662 + 0.790, 2.700 + 0.800]
    assert peers[shape(4, 16, 4096, 128)]["flash2"] == [5.084 + 1.500]
    # Lines without forward times (older runs) give no totals, and no table.
    assert backward_bars.read_peers_forward_backward(PEERS.splitlines()) == {}
    rows = backward_bars.forward_backward_table(ours, peers)
    (row,) = [r for r in rows if r.startswith("| B4 H16 S4096 D128 bf16 |")]
    # Median of ours 3.3305 (shown 3.330); cuDNN's 3.476: 1.044x; FA2 6.584: 1.977x.
    assert "| 3.330 | 3.476 | 6.584 | 1.044x | 1.977x |" in row
    # A shape the peers did not time shows dashes.
    (row,) = [r for r in rows if r.startswith("| B2 H16 S8192 D128 bf16 |")]
    assert row.endswith("| - | - | - | - |")
