"""The backward issue's speed bars, read off one device call: the lines of
`flashcore_time_backward` and of `scripts/time_sdpa_backward.py` (run in the same call), matched by
shape. Prints a markdown table of each shape's time beside SDPA cuDNN's and FlashAttention-2's,
the ratios and whether the bars hold, and exits 1 when one misses.

The bars (docs/backward.md): bf16 hd128 at S 4096-16384 and bf16 hd64 at least 1.0x cuDNN's
backward; hd256 at least 0.9x; every shape at least 1.3x FlashAttention-2's. A shape timed more than
once counts by its median time, ours and the peers' alike: a call that alternates the two (ours,
the peers, ours, the peers, ...) compares medians of runs taken side by side in time, so that
the machine's drift between runs (3-11% on cuDNN's own times) weighs on both. Where the peers'
lines carry their training forward's time, a second table states forward + backward beside
theirs (the issue sets no bar on it).

Usage: python3 scripts/backward_bars.py TIME_BACKWARD_LOG SDPA_LOG"""

import re
import statistics
import sys
from dataclasses import dataclass

# B4 Hq16 Hkv16 S4096 D128 bf16 causal | fwd 0.584 ms (sm90) | bwd 1.487 ms 462.3 TFLOP/s (sm90) ...
OURS = re.compile(
    r"^B(?P<b>\d+) Hq(?P<hq>\d+) Hkv(?P<hkv>\d+) S(?P<s>\d+) D(?P<d>\d+) (?P<dtype>bf16|fp16)"
    r"(?P<flags>(?: [a-z]+)*) \| fwd [\d.]+ ms \(\w+\) \| bwd (?P<ms>[\d.]+) ms [\d.]+ TFLOP/s "
    r"\((?P<backend>\w+)\)"
)
# B4 H16 S4096 D128 bfloat16 causal | cudnn bwd 1.607 ms 427.7 TFLOP/s | flash2 bwd 2.912 ms ...
PEERS = re.compile(
    r"^B(?P<b>\d+) H(?P<h>\d+) S(?P<s>\d+) D(?P<d>\d+) (?P<dtype>bfloat16|float16)"
    r"(?P<causal> causal)? \| (?P<rest>.*)$"
)
PEER_TIME = re.compile(r"(?P<peer>cudnn|flash2) bwd (?P<ms>[\d.]+) ms")
# ... | cudnn bwd 2.662 ms 516.3 TFLOP/s fwd 0.790 ms | ... (the training forward, where timed)
PEER_FORWARD = re.compile(
    r"(?P<peer>cudnn|flash2) bwd [\d.]+ ms [\d.]+ TFLOP/s fwd (?P<ms>[\d.]+) ms")
# ... | fwd+bwd 3.355 ms | ... on one of our rows
OURS_FORWARD_BACKWARD = re.compile(r"\| fwd\+bwd (?P<ms>[\d.]+) ms")


@dataclass(frozen=True)
class Shape:
    batch: int
    heads: int
    seqlen: int
    head_dim: int
    dtype: str  # bf16 or fp16
    causal: bool

    def label(self):
        return (f"B{self.batch} H{self.heads} S{self.seqlen} D{self.head_dim} {self.dtype}"
                f"{' causal' if self.causal else ''}")


def read_ours(lines):
    """{shape: [bwd ms, ...]} of the plain MHA rows on the sm90 backward (not GQA, deterministic
    or softcapped: the bars' rows)."""
    times = {}
    for line in lines:
        m = OURS.match(line.strip())
        if not m or m["hq"] != m["hkv"] or m["backend"] != "sm90":
            continue
        flags = m["flags"].split()
        if any(flag != "causal" for flag in flags):
            continue
        shape = Shape(int(m["b"]), int(m["hq"]), int(m["s"]), int(m["d"]), m["dtype"],
                      "causal" in flags)
        times.setdefault(shape, []).append(float(m["ms"]))
    return times


def read_ours_forward_backward(lines):
    """{shape: [forward + backward ms, ...]} of the rows read_ours takes."""
    times = {}
    for line in lines:
        total = OURS_FORWARD_BACKWARD.search(line)
        for shape in read_ours([line]) if total else ():
            times.setdefault(shape, []).append(float(total["ms"]))
    return times


def read_peers_forward_backward(lines):
    """{shape: {peer: [forward + backward ms, ...]}} of the peer lines that carry a forward time."""
    totals = {}
    for line in lines:
        m = PEERS.match(line.strip())
        if not m:
            continue
        backward = {t["peer"]: float(t["ms"]) for t in PEER_TIME.finditer(m["rest"])}
        shape = peer_shape(m)
        for t in PEER_FORWARD.finditer(m["rest"]):
            totals.setdefault(shape, {}).setdefault(t["peer"], []).append(
                float(t["ms"]) + backward[t["peer"]])
    return totals


def forward_backward_table(ours, peers):
    """Markdown rows of forward + backward times (medians) next to the peers'; the issue states
    them, it sets no bar on them."""
    rows = ["| shape | flashcore fwd+bwd ms | cuDNN fwd+bwd ms | FA2 fwd+bwd ms | vs cuDNN "
            "| vs FA2 |", "|---|---|---|---|---|---|"]
    for shape, times in ours.items():
        ms = statistics.median(times)
        peer = {p: statistics.median(t) for p, t in peers.get(shape, {}).items()}
        cells = [f"{peer[p]:.3f}" if p in peer else "-" for p in ("cudnn", "flash2")]
        cells += [f"{peer[p] / ms:.3f}x" if p in peer else "-" for p in ("cudnn", "flash2")]
        rows.append(f"| {shape.label()} | {ms:.3f} | " + " | ".join(cells) + " |")
    return rows


def peer_shape(m):
    """The Shape of a PEERS match."""
    dtype = "bf16" if m["dtype"] == "bfloat16" else "fp16"
    return Shape(int(m["b"]), int(m["h"]), int(m["s"]), int(m["d"]), dtype, m["causal"] is not None)


def read_peers(lines):
    """{shape: {"cudnn": [ms, ...], "flash2": [ms, ...]}} (a peer that did not take the shape is
    absent)."""
    peers = {}
    for line in lines:
        m = PEERS.match(line.strip())
        if not m:
            continue
        shape = peer_shape(m)
        for t in PEER_TIME.finditer(m["rest"]):
            peers.setdefault(shape, {}).setdefault(t["peer"], []).append(float(t["ms"]))
    return peers


def cudnn_bar(shape):
    """The least ratio to cuDNN the issue asks of shape, or None where it asks none."""
    if shape.head_dim == 256:
        return 0.9
    if shape.dtype != "bf16":
        return None
    if shape.head_dim == 64:
        return 1.0
    if shape.head_dim == 128 and 4096 <= shape.seqlen <= 16384:
        return 1.0
    return None


FLASH2_BAR = 1.3


def verdict(ratio, bar):
    if bar is None or ratio is None:
        return ""
    return "holds" if ratio >= bar else "**misses**"


def runs(times):
    """A shape's times as the table shows them: each run, then the median where there are
    several."""
    if not times:
        return "-"
    shown = " / ".join(f"{t:.3f}" for t in times)
    return shown if len(times) == 1 else f"{shown} (median {statistics.median(times):.3f})"


def table(ours, peers):
    """The markdown rows and whether every bar held."""
    rows = ["| shape | flashcore ms | cuDNN ms | FA2 ms | vs cuDNN | bar | vs FA2 | bar |",
            "|---|---|---|---|---|---|---|---|"]
    all_hold = True
    for shape, times in ours.items():
        ms = statistics.median(times)
        peer = peers.get(shape, {})
        cudnn, flash2 = (statistics.median(peer[p]) if peer.get(p) else None
                         for p in ("cudnn", "flash2"))
        vs_cudnn = cudnn / ms if cudnn else None
        vs_flash2 = flash2 / ms if flash2 else None
        bar = cudnn_bar(shape)
        cudnn_verdict = verdict(vs_cudnn, bar)
        flash2_verdict = verdict(vs_flash2, FLASH2_BAR)
        # A barred shape the peer has no time for cannot be said to hold.
        if bar is not None and cudnn is None:
            cudnn_verdict = "**no peer time**"
        if flash2 is None:
            flash2_verdict = "**no peer time**"
        all_hold &= "**" not in cudnn_verdict + flash2_verdict
        rows.append(
            f"| {shape.label()} | {runs(times)} | {runs(peer.get('cudnn'))} | "
            f"{runs(peer.get('flash2'))} | "
            f"{f'{vs_cudnn:.3f}x' if vs_cudnn else '-'} | "
            f"{f'>= {bar}x ' if bar else ''}{cudnn_verdict} | "
            f"{f'{vs_flash2:.2f}x' if vs_flash2 else '-'} | {flash2_verdict} |")
    return rows, all_hold


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as ours_file, open(argv[2]) as peers_file:
        our_lines, peer_lines = ours_file.readlines(), peers_file.readlines()
    ours, peers = read_ours(our_lines), read_peers(peer_lines)
    if not ours:
        print(f"no flashcore_time_backward rows in {argv[1]}", file=sys.stderr)
        return 2
    rows, all_hold = table(ours, peers)
    print("\n".join(rows))
    print("every bar holds" if all_hold else "a bar misses")
    peer_totals = read_peers_forward_backward(peer_lines)
    if peer_totals:
        print("\nforward + backward (no bar):")
        print("\n".join(forward_backward_table(read_ours_forward_backward(our_lines),
                                                peer_totals)))
    return 0 if all_hold else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
