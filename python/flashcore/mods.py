"""Built-in mask_mods and score_mods for flashcore.flex_attention (docs/flex.md).

Each is a small object whose parts flashcore runs fused in its kernels. Its __call__ is the same
function as a PyTorch FlexAttention mask_mod(b, h, q_idx, kv_idx) / score_mod(score, b, h, q_idx,
kv_idx) on tensors, so one object also works with torch's create_block_mask and flex_attention,
and a torch BlockMask built from it runs on flashcore with the same meaning. Positions are
bottom-right aligned in flashcore (query i stands at key i + Sk - Sq); __call__ assumes Sq == Sk,
where that is the same as PyTorch's top-left alignment.
"""

__all__ = [
    "MaskMod",
    "ScoreMod",
    "causal",
    "sliding_window",
    "documents",
    "prefix_lm",
    "and_masks",
    "alibi",
    "relative_bias",
    "softcap",
    "compose",
]


class MaskMod:
    """A built-in mask_mod: window (left, right; -1 = unbounded), documents (doc_ids, doc_ids_k)
    and prefix-LM (prefix: an int or an int32 tensor [B]), ANDed. Build it with the functions of
    this module."""

    def __init__(self, window=(-1, -1), doc_ids=None, doc_ids_k=None, prefix=None):
        self.window = (int(window[0]), int(window[1]))
        self.doc_ids = doc_ids
        self.doc_ids_k = doc_ids_k
        self.prefix = prefix
        if prefix is not None and self.window != (-1, -1):
            raise ValueError(
                "prefix_lm is causal past the prefix already; do not AND it with a window or causal"
            )

    def __call__(self, b, h, q_idx, kv_idx):
        left, right = self.window
        visible = q_idx == q_idx  # all True, of the broadcast shape
        if right >= 0:
            visible = visible & (kv_idx <= q_idx + right)
        if left >= 0:
            visible = visible & (kv_idx >= q_idx - left)
        if self.doc_ids is not None:
            keys = self.doc_ids if self.doc_ids_k is None else self.doc_ids_k
            visible = visible & (self.doc_ids[b, q_idx] == keys[b, kv_idx])
        if self.prefix is not None:
            prefix = self.prefix if isinstance(self.prefix, int) else self.prefix[b]
            visible = visible & ((kv_idx <= q_idx) | (kv_idx < prefix))
        return visible

    def fields(self):
        """The native keyword fields of the non-window parts (python/src/flex_args.hpp)."""
        f = {}
        if self.doc_ids is not None:
            f["doc_ids_q"] = self.doc_ids
            f["doc_ids_k"] = self.doc_ids if self.doc_ids_k is None else self.doc_ids_k
        if self.prefix is not None:
            if isinstance(self.prefix, int):
                f["prefix_length"] = self.prefix
            else:
                f["prefix_lengths"] = self.prefix
        return f


class ScoreMod:
    """A built-in score_mod: ALiBi (slopes, float32 [Hq]), then a relative-position bias (table,
    float32 [Hq, 2S - 1]), then softcap (cap), each optional. Build it with this module's
    functions."""

    def __init__(self, alibi_slopes=None, bias_table=None, cap=0.0):
        self.alibi_slopes = alibi_slopes
        self.bias_table = bias_table
        self.cap = float(cap)
        if self.cap < 0:
            raise ValueError(f"softcap is {cap}; it must be > 0")

    def __call__(self, score, b, h, q_idx, kv_idx):
        if self.alibi_slopes is not None:
            score = score - self.alibi_slopes[h] * (q_idx - kv_idx).abs()
        if self.bias_table is not None:
            limit = (self.bias_table.shape[1] - 1) // 2
            score = score + self.bias_table[h, (kv_idx - q_idx).clamp(-limit, limit) + limit]
        if self.cap > 0:
            score = self.cap * (score / self.cap).tanh()
        return score

    def fields(self):
        f = {}
        if self.alibi_slopes is not None:
            f["alibi_slopes"] = self.alibi_slopes
        if self.bias_table is not None:
            f["rel_bias"] = self.bias_table
        return f


def causal():
    """Query i sees keys up to its own position."""
    return MaskMod(window=(-1, 0))


def sliding_window(left, right=0):
    """Query i sees keys in [pos - left, pos + right]; -1 leaves a side unbounded."""
    return MaskMod(window=(left, right))


def documents(doc_ids, doc_ids_k=None):
    """A query sees the keys of its own document: doc_ids int32 [B, Sq] (and doc_ids_k [B, Sk]
    for cross-attention; default doc_ids)."""
    return MaskMod(doc_ids=doc_ids, doc_ids_k=doc_ids_k)


def prefix_lm(prefix):
    """The first `prefix` keys are seen by every query, the rest causally. prefix: an int, or an
    int32 tensor [B] of per-batch lengths."""
    if isinstance(prefix, bool) or (isinstance(prefix, int) and prefix < 0):
        raise ValueError(f"prefix must be an int >= 0 or an int32 tensor [B], got {prefix!r}")
    return MaskMod(prefix=prefix)


def and_masks(*mods):
    """The AND of built-in mask_mods (PyTorch's and_masks); each part may come from one mod only."""
    window, doc_ids, doc_ids_k, prefix = (-1, -1), None, None, None
    for mod in mods:
        if not isinstance(mod, MaskMod):
            raise TypeError(f"and_masks takes flashcore.mods mask_mods, got {type(mod).__name__}")
        if mod.window != (-1, -1):
            if window != (-1, -1):
                raise ValueError("and_masks: two windows; pass one sliding_window / causal")
            window = mod.window
        if mod.doc_ids is not None:
            if doc_ids is not None:
                raise ValueError("and_masks: two document masks; pass one")
            doc_ids, doc_ids_k = mod.doc_ids, mod.doc_ids_k
        if mod.prefix is not None:
            prefix = mod.prefix
    return MaskMod(window, doc_ids, doc_ids_k, prefix)


def alibi(slopes):
    """score - slopes[h] * |q_pos - kv_idx|: float32 [Hq] slopes."""
    return ScoreMod(alibi_slopes=slopes)


def relative_bias(table):
    """score + table[h, clamp(kv_idx - q_pos, -(S-1), S-1) + S - 1]: float32 [Hq, 2S - 1]."""
    return ScoreMod(bias_table=table)


def softcap(cap):
    """cap * tanh(score / cap)."""
    if not cap > 0:
        raise ValueError(f"softcap is {cap}; it must be > 0")
    return ScoreMod(cap=cap)


def compose(*mods):
    """The built-in score_mods applied in flashcore's fixed order: ALiBi, bias, softcap."""
    slopes, table, cap = None, None, 0.0
    for mod in mods:
        if not isinstance(mod, ScoreMod):
            raise TypeError(f"compose takes flashcore.mods score_mods, got {type(mod).__name__}")
        slopes = mod.alibi_slopes if mod.alibi_slopes is not None else slopes
        table = mod.bias_table if mod.bias_table is not None else table
        cap = mod.cap or cap
    return ScoreMod(slopes, table, cap)
