"""bench/peer_cases.py: bench/peers.py's cases and its --cases / --providers selections (no torch,
no GPU)."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import peer_cases  # noqa: E402


def test_minimal_cases_are_the_canonical_shape_and_the_fa3_grid_at_4k():
    labels = [c.label() for c in peer_cases.cases("minimal", "bf16")]
    assert labels[:2] == ["B1_H8_S512_D64_bf16", "B1_H8_S512_D64_bf16_causal"]
    assert "B4_H16_S4096_D128_bf16_causal" in labels
    assert "B4_H8_S4096_D256_bf16" in labels
    assert len(labels) == 8
    assert len(peer_cases.cases("full", "fp16")) == 2 + 3 * 6 * 2


def test_no_selection_keeps_everything_in_order():
    assert peer_cases.split_list(None) is None
    assert peer_cases.split_list("") is None
    available = ["auto", "sm90", "sm80", "wmma", "scalar", "unfused"]
    assert peer_cases.select(None, available, "provider") == available


def test_providers_are_picked_in_the_available_order():
    available = ["auto", "sm90", "sm80", "wmma", "scalar", "unfused"]
    wanted = peer_cases.split_list("sm80, auto,sm90")
    assert wanted == ["sm80", "auto", "sm90"]
    assert peer_cases.select(wanted, available, "provider") == ["auto", "sm90", "sm80"]


def test_an_unknown_name_is_an_error_not_a_silent_drop():
    with pytest.raises(ValueError, match=r"unknown flashcore provider: sm100 \(available: auto"):
        peer_cases.select(["sm90", "sm100"], ["auto", "sm90"], "flashcore provider")
    with pytest.raises(ValueError, match="unknown case: B1_H8_S512_D64_fp16"):
        peer_cases.select_cases(peer_cases.cases("minimal", "bf16"), ["B1_H8_S512_D64_fp16"])


def test_cases_are_picked_by_label():
    all_cases = peer_cases.cases("minimal", "bf16")
    picked = peer_cases.select_cases(
        all_cases, peer_cases.split_list("B4_H16_S4096_D128_bf16_causal,B1_H8_S512_D64_bf16")
    )
    assert [c.label() for c in picked] == [
        "B1_H8_S512_D64_bf16",
        "B4_H16_S4096_D128_bf16_causal",
    ]
    assert picked[1].to_json()["flops"] == 4.0 * 4 * 16 * 4096 * 4096 * 128 / 2


def test_peers_are_picked_by_name_and_a_typo_is_an_error():
    assert peer_cases.select(None, peer_cases.PEERS, "peer") == peer_cases.PEERS
    wanted = peer_cases.split_list("flash_attn_4,sdpa_cudnn")
    assert peer_cases.select(wanted, peer_cases.PEERS, "peer") == ["sdpa_cudnn", "flash_attn_4"]
    with pytest.raises(ValueError, match="unknown peer: fa4 \\(available: sdpa_flash"):
        peer_cases.select(["fa4"], peer_cases.PEERS, "peer")
    assert set(peer_cases.FUSED_PEERS) < set(peer_cases.PEERS)
    assert "eager_unfused" not in peer_cases.FUSED_PEERS  # a baseline, not a peer to beat


def test_the_best_peer_is_the_fastest_fused_one_timed():
    row = {
        "flashcore": {"tflops": 600.0},
        "eager_unfused": {"tflops": 900.0},  # a baseline never counts
        "sdpa_cudnn": {"tflops": 550.0},
        "flash_attn_4": {"tflops": 620.0},
        "triton": {"tflops": None},  # skipped
    }
    assert peer_cases.best_peer(row) == ("flash_attn_4", 620.0)
    assert peer_cases.best_peer({"flashcore": {"tflops": 1.0}, "triton": {"tflops": None}}) is None
