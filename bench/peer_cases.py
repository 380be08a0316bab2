"""The cases bench/peers.py measures, and its --cases and --providers selections. Kept free of
torch so that CI (no GPU, no torch) tests them: tests/python/test_peer_cases.py."""


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


# Every peer bench/peers.py can time beside flashcore, in its report's column order; --peers picks
# some. flash_attn_4 (flash-attn-4's CuTe DSL kernels, the strongest open peer on Hopper) is
# optional: it is timed where it is installed and reported as skipped where it is not.
PEERS = [
    "sdpa_flash",
    "sdpa_cudnn",
    "sdpa_efficient",
    "sdpa_math",
    "eager_unfused",
    "flex_attention",
    "triton",
    "flash_attn_4",
]
# The baselines among them (unfused, as written in PyTorch): "best peer" in the report is the
# fastest of the others, the fused kernels of other projects.
BASELINE_PEERS = ["sdpa_math", "eager_unfused"]
FUSED_PEERS = [name for name in PEERS if name not in BASELINE_PEERS]

def best_peer(row):
    """(workload, TFLOP/s) of the fastest fused peer timed in a case's row ({workload: result}),
    or None when none was timed."""
    timed = [(name, row[name]["tflops"]) for name in FUSED_PEERS if row.get(name, {}).get("tflops")]
    return max(timed, key=lambda entry: entry[1], default=None)


def split_list(text):
    """'a,b, c' -> ['a', 'b', 'c']; None or '' -> None (no selection: everything)."""
    if not text:
        return None
    return [item.strip() for item in text.split(",") if item.strip()]


def select(wanted, available, what):
    """The entries of `available` named in `wanted` (all of them when wanted is None), in
    `available`'s order. A name that is not available raises ValueError naming the choices, so
    that a typo cannot silently drop a measurement."""
    if wanted is None:
        return list(available)
    unknown = [name for name in wanted if name not in available]
    if unknown:
        raise ValueError(
            f"unknown {what}: {', '.join(unknown)} (available: {', '.join(available)})"
        )
    return [name for name in available if name in wanted]


def select_cases(all_cases, wanted):
    """--cases: the cases whose labels are named, in profile order."""
    labels = select(wanted, [c.label() for c in all_cases], "case")
    return [c for c in all_cases if c.label() in labels]
