"""flashcore.jit_score_mod on a GPU: snippets compiled at run time into the flex kernels (the sm90
one on an H100 where it takes the problem, else sm80; the provider is checked), against a float64
computation of the same score function written in torch; the built-in mask (BlockMask, causal
varlen) around a JIT score_mod; on an H100 the same mods on sm90 and on sm80 (backend="sm80"),
with partial tails, GQA and fully masked rows; the checks before launch; and the disk cache (a
fresh process compiles nothing). Fresh inputs every run (the seed is in every failure).

FLASHCORE_TEST_JIT_PRELOAD (a directory of objects that jit.build made elsewhere for this very
package) seeds each module's fresh cache, for device runs too short to compile every object; the
compile-error and second-process tests compile their own snippets either way."""

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip(
    "torch", reason="SKIPPED: torch is not installed, so no GPU test of flashcore.jit runs"
)
if not torch.cuda.is_available():
    pytest.skip("SKIPPED: torch sees no CUDA device, so no GPU test of flashcore.jit runs",
                allow_module_level=True)

import flashcore  # noqa: E402
from flashcore import jit, mods  # noqa: E402

try:
    jit.find_nvcc()
except RuntimeError:
    pytest.skip("SKIPPED: nvcc not found (CUDA_HOME, PATH, /usr/local/cuda), so no "
                "jit_score_mod can be compiled", allow_module_level=True)

RUN_SEED = int(os.environ.get("FLASHCORE_TEST_SEED", secrets.randbelow(2**31)))
TOLERANCE = {torch.float16: 5e-3, torch.bfloat16: 1e-2}
LSE_TOLERANCE = 1e-2
BIAS = "return score + bias[h] * (q_idx - kv_idx);"


@pytest.fixture(autouse=True, scope="module")
def cache(tmp_path_factory):
    """A cache of this module's own, so that the first call of each snippet compiles."""
    path = tmp_path_factory.mktemp("jit")
    preload = os.environ.get("FLASHCORE_TEST_JIT_PRELOAD")
    if preload:
        for built in Path(preload).glob("jit_*.so"):
            shutil.copy(built, path / built.name)
    previous = os.environ.get("FLASHCORE_JIT_CACHE")
    os.environ["FLASHCORE_JIT_CACHE"] = str(path)
    yield path
    if previous is None:
        del os.environ["FLASHCORE_JIT_CACHE"]
    else:
        os.environ["FLASHCORE_JIT_CACHE"] = previous


def reference(q, k, v, score_fn, visible_fn=None):
    """(out, lse) in float64, BHSD (Sq == Sk); score_fn(score, b, h, q_idx, kv_idx) on tensors."""
    B, Hq, S, D = q.shape
    group = Hq // k.shape[1]
    kd = k.double().repeat_interleave(group, 1)
    vd = v.double().repeat_interleave(group, 1)
    scores = (q.double() @ kd.transpose(-1, -2)) * D**-0.5
    b = torch.arange(B, device=q.device)[:, None, None, None]
    h = torch.arange(Hq, device=q.device)[None, :, None, None]
    qi = torch.arange(S, device=q.device)[None, None, :, None]
    ki = torch.arange(k.shape[2], device=q.device)[None, None, None, :]
    scores = score_fn(scores, b, h, qi, ki)
    if visible_fn is not None:
        scores = scores.masked_fill(~visible_fn(b, h, qi, ki).expand_as(scores), float("-inf"))
    lse = torch.logsumexp(scores, -1)
    return torch.exp(scores - lse[..., None]).nan_to_num(0.0) @ vd, lse


def check(out, lse, ref_out, ref_lse, dtype, what):
    assert torch.isfinite(out).all(), f"{what}: NaN/inf in out (seed {RUN_SEED})"
    err = ((out.double() - ref_out).norm() / ref_out.norm()).item()
    assert err <= TOLERANCE[dtype], f"{what}: rel L2 {err:.2e} (seed {RUN_SEED})"
    lse_err = (lse.double() - ref_lse).abs().max().item()
    assert lse_err <= LSE_TOLERANCE, f"{what}: lse error {lse_err:.2e} (seed {RUN_SEED})"


def on_h100():
    return torch.cuda.get_device_capability() == (9, 0)


def expected_provider(head_dim):
    """The flex kernel that auto picks for a jit mod without a BlockMask: sm90 on an sm_90 GPU,
    else sm80."""
    jit.kernel_head_dim(head_dim)  # a head dim the jit objects run
    return "sm90" if on_h100() else "sm80"


def walked(block_mask):
    """The same lists as a plain BlockMask, which flex_attention walks: it drops a window's own
    (docs/flex.md, "A window's own BlockMask"), and these tests are of the list walk."""
    return flashcore.BlockMask(block_mask.kv_num_blocks, block_mask.kv_indices,
                               block_mask.full_kv_num_blocks, block_mask.full_kv_indices,
                               block_mask.BLOCK_SIZE, block_mask.seq_lengths, block_mask.mask_mod)


def inputs(dtype, B=2, Hq=4, Hkv=2, S=300, D=128, seed=0):
    g = torch.Generator(device="cuda").manual_seed(RUN_SEED + seed)
    return [torch.randn(B, h, S, D, dtype=dtype, device="cuda", generator=g)
            for h in (Hq, Hkv, Hkv)]


@pytest.mark.parametrize("dtype, head_dim", [(torch.float16, 64), (torch.bfloat16, 128),
                                             (torch.float16, 40), (torch.bfloat16, 256)])
def test_bias_example_matches_float64(dtype, head_dim):
    q, k, v = inputs(dtype, D=head_dim)
    bias = torch.randn(q.shape[1], device="cuda") * 0.05
    mod = flashcore.jit_score_mod(BIAS, bias=bias)
    out, lse = flashcore.flex_attention(q, k, v, score_mod=mod, enable_gqa=True, return_lse=True)
    assert flashcore.last_provider() == expected_provider(head_dim)
    ref_out, ref_lse = reference(
        q, k, v, lambda s, b, h, qi, ki: s + bias.double()[h] * (qi - ki))
    check(out, lse, ref_out, ref_lse, dtype, f"bias {dtype} hd{head_dim}")
    # Captured values are read at each call: new values, same compiled object.
    compiles = jit.stats()["compiles"]
    bias.mul_(-3.0)
    out, lse = flashcore.flex_attention(q, k, v, score_mod=mod, enable_gqa=True, return_lse=True)
    ref_out, ref_lse = reference(
        q, k, v, lambda s, b, h, qi, ki: s + bias.double()[h] * (qi - ki))
    check(out, lse, ref_out, ref_lse, dtype, "new bias values")
    assert jit.stats()["compiles"] == compiles


def test_decode_splits_the_keys_of_a_jit_score_mod():
    """Decode, one query per batch and head over 4097 keys, 4 query heads per kv head: it runs on
    the sm80 flex kernel with the group's query heads packed into one tile, split over the keys
    (auto leaves it there on an sm_90 GPU too), for a snippet as for the built-in mods, which
    sees each packed row's own head (bias[h]); the object is the bias example's bf16 hd128 one."""
    g = torch.Generator(device="cuda").manual_seed(RUN_SEED + 5)
    q = torch.randn(2, 8, 1, 128, dtype=torch.bfloat16, device="cuda", generator=g)
    k, v = (torch.randn(2, 2, 4097, 128, dtype=torch.bfloat16, device="cuda", generator=g)
            for _ in range(2))
    bias = torch.randn(8, device="cuda", generator=g) * 1e-3
    mod = flashcore.jit_score_mod(BIAS, bias=bias)
    out, lse = flashcore.flex_attention(q, k, v, score_mod=mod, enable_gqa=True, return_lse=True)
    assert flashcore.last_provider() == "sm80"
    ref_out, ref_lse = reference(
        q, k, v, lambda s, b, h, qi, ki: s + bias.double()[h] * (qi - ki))
    check(out, lse, ref_out, ref_lse, torch.bfloat16, "decode bias")


def test_captures_of_every_kind_under_a_causal_block_mask():
    dtype = torch.bfloat16
    q, k, v = inputs(dtype, Hq=4, Hkv=4, S=320, D=64, seed=1)
    B, H, S = q.shape[:3]
    g = torch.Generator(device="cuda").manual_seed(RUN_SEED + 2)
    temperature = torch.rand(H, device="cuda", generator=g) + 0.5
    period = torch.randint(2, 9, (B,), device="cuda", generator=g).int()
    mod = flashcore.jit_score_mod(
        "float s = score * temperature[h];\n"
        "if (enabled && kv_idx % period[b] == 0) s += boost;\n"
        "return s;",
        temperature=temperature, period=period, boost=0.75, enabled=True)
    block_mask = walked(flashcore.create_block_mask(mods.causal(), B, None, S, S, BLOCK_SIZE=64))

    def score(s, b, h, qi, ki):
        return s * temperature.double()[h] + 0.75 * (ki % period[b] == 0)

    ref_out, ref_lse = reference(q, k, v, score, lambda b, h, qi, ki: ki <= qi)
    # 64-key blocks: the object's paired sm90 kernel on an H100, and its sm80 kernel.
    for backend in ("auto", "sm80"):
        out, lse = flashcore.flex_attention(q, k, v, score_mod=mod, block_mask=block_mask,
                                            return_lse=True, backend=backend)
        assert flashcore.last_provider() == (expected_provider(64) if backend == "auto"
                                             else "sm80")
        check(out, lse, ref_out, ref_lse, dtype, f"captures + causal BlockMask, {backend}")


def test_softcap_snippet_equals_the_built_in_softcap():
    dtype = torch.float16
    q, k, v = inputs(dtype, Hq=2, Hkv=2, S=256, D=64, seed=3)
    mod = flashcore.jit_score_mod("return cap * tanhf(score / cap);", cap=5.0)
    out, lse = flashcore.flex_attention(q, k, v, score_mod=mod, return_lse=True)
    builtin = flashcore.flex_attention(q, k, v, score_mod=mods.softcap(5.0))
    err = ((out.float() - builtin.float()).norm() / builtin.float().norm()).item()
    assert err <= 1e-3, f"JIT softcap vs built-in: {err:.2e} (seed {RUN_SEED})"
    ref_out, ref_lse = reference(q, k, v, lambda s, b, h, qi, ki: 5.0 * torch.tanh(s / 5.0))
    check(out, lse, ref_out, ref_lse, dtype, "softcap snippet")


def test_varlen_causal_with_a_jit_score_mod():
    dtype = torch.float16
    lengths = [0, 1, 7, 200, 64]
    Hq, Hkv, D = 4, 2, 64
    g = torch.Generator(device="cuda").manual_seed(RUN_SEED + 4)
    total = sum(lengths)
    q, k, v = (torch.randn(total, h, D, dtype=dtype, device="cuda", generator=g)
               for h in (Hq, Hkv, Hkv))
    bias = torch.randn(Hq, device="cuda", generator=g) * 0.05
    cu = torch.tensor([0] + lengths, device="cuda").cumsum(0).int()
    mod = flashcore.jit_score_mod(BIAS, bias=bias)
    out, lse = flashcore.attention_varlen(q, k, v, cu, cu, max(lengths), max(lengths),
                                          causal=True, score_mod=mod, return_lse=True)
    start = 0
    for n in lengths:
        if n:
            seq = [x[start:start + n].transpose(0, 1)[None] for x in (q, k, v)]
            ref_out, ref_lse = reference(
                *seq, lambda s, b, h, qi, ki: s + bias.double()[h] * (qi - ki),
                lambda b, h, qi, ki: ki <= qi)
            check(out[start:start + n].transpose(0, 1)[None], lse[:, start:start + n][None],
                  ref_out, ref_lse, dtype, f"varlen sequence of {n}")
        start += n


def test_bad_arguments_fail_before_launch():
    q, k, v = inputs(torch.float16, Hq=2, Hkv=2, S=64, D=64, seed=5)
    bias = torch.randn(2, device="cuda")
    with pytest.raises(ValueError, match=r"capture bias is on cpu but q is on cuda:0"):
        flashcore.flex_attention(q, k, v, score_mod=flashcore.jit_score_mod(BIAS, bias=bias.cpu()))
    strided = torch.randn(2, 2, device="cuda")[:, 0]
    with pytest.raises(ValueError, match=r"capture bias is not contiguous"):
        flashcore.flex_attention(q, k, v, score_mod=flashcore.jit_score_mod(BIAS, bias=strided))
    wide = inputs(torch.float16, Hq=2, Hkv=2, S=64, D=264, seed=6)
    with pytest.raises(ValueError, match=r"head dims up to 256"):
        flashcore.flex_attention(*wide, score_mod=flashcore.jit_score_mod(BIAS, bias=bias))
    cu = torch.tensor([0, 64], device="cuda").int()
    packed = [x[0].transpose(0, 1) for x in (q, k, v)]
    with pytest.raises(ValueError, match=r"replaces softcap"):
        flashcore.attention_varlen(*packed, cu, cu, 64, 64, softcap=5.0,
                                   score_mod=flashcore.jit_score_mod(BIAS, bias=bias))
    with pytest.raises(flashcore.JitCompileError, match=r"score_mod\(1\): error"):
        flashcore.flex_attention(q, k, v, score_mod=flashcore.jit_score_mod("return nope;"))


def test_a_second_process_compiles_nothing(cache):
    q, k, v = inputs(torch.bfloat16, Hq=2, Hkv=2, S=128, D=64, seed=7)
    snippet = "return score - slope[h] * fabsf(float(q_idx - kv_idx));"
    slope = torch.rand(2, device="cuda")
    out = flashcore.flex_attention(q, k, v, score_mod=flashcore.jit_score_mod(snippet, slope=slope))
    assert list(cache.glob("*.so")), "the first call left no shared object in the cache"
    torch.save({"q": q, "k": k, "v": v, "slope": slope, "out": out}, cache / "case.pt")
    child = (
        "import sys, torch, flashcore\nfrom flashcore import jit\n"
        "d = torch.load(sys.argv[1])\n"
        f"mod = flashcore.jit_score_mod({snippet!r}, slope=d['slope'])\n"
        "out = flashcore.flex_attention(d['q'], d['k'], d['v'], score_mod=mod)\n"
        "s = jit.stats()\n"
        "print(s['compiles'], s['disk_hits'], torch.equal(out, d['out']))\n"
    )
    result = subprocess.run([sys.executable, "-c", child, str(cache / "case.pt")],
                            capture_output=True, text=True, env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "1", "True"], (
        f"the second process compiled or differed: compiles, disk hits, equal = {result.stdout}")


needs_h100 = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
    reason="SKIPPED: not an sm_90 GPU, so the jit mods' sm90 flex kernel does not run here")


@needs_h100
@pytest.mark.parametrize("dtype, head_dim, block_size", [(torch.bfloat16, 128, 128),
                                                         (torch.float16, 64, 128),
                                                         (torch.bfloat16, 128, (64, 128)),
                                                         (torch.float16, 64, 64),
                                                         (torch.bfloat16, 128, 64),
                                                         (torch.bfloat16, 256, 64),
                                                         (torch.bfloat16, 200, (128, 192))])
def test_sm90_runs_a_jit_score_mod_under_a_causal_block_mask(dtype, head_dim, block_size):
    # S = 300: a partial last tile of queries and keys; GQA 4 / 2. Query blocks of 64 rows: each
    # 128-row tile's two blocks merged into one walk (src/sm90/flex_merged_walk.hpp). 64-key blocks
    # up to head dim 128: the object's paired kernel, two blocks to each 128-key step (S = 300 has
    # five key blocks, so the last step has one). Above head dim 128 the kernel's tiles have 64
    # keys: blocks of 64 and 192 keys are whole tiles, and head dim 200 runs zero-filled on the
    # head dim 256 object.
    q, k, v = inputs(dtype, Hq=4, Hkv=2, S=300, D=head_dim, seed=8)
    B, _, S = q.shape[:3]
    bias = torch.randn(q.shape[1], device="cuda") * 0.05
    mod = flashcore.jit_score_mod(BIAS, bias=bias)
    block_mask = walked(flashcore.create_block_mask(mods.causal(), B, None, S, S,
                                                    BLOCK_SIZE=block_size))
    out, lse = flashcore.flex_attention(q, k, v, score_mod=mod, block_mask=block_mask,
                                        enable_gqa=True, return_lse=True)
    assert flashcore.last_provider() == "sm90"
    ref_out, ref_lse = reference(q, k, v, lambda s, b, h, qi, ki: s + bias.double()[h] * (qi - ki),
                                 lambda b, h, qi, ki: ki <= qi)
    check(out, lse, ref_out, ref_lse, dtype, f"sm90 bias {dtype} hd{head_dim} {block_size}")
    # The same object's sm80 kernel, and the built-in ALiBi with the same scores (bias = -slope)
    # on the library's sm90 kernel.
    sm80, lse80 = flashcore.flex_attention(q, k, v, score_mod=mod, block_mask=block_mask,
                                           enable_gqa=True, return_lse=True, backend="sm80")
    assert flashcore.last_provider() == "sm80"
    check(sm80, lse80, ref_out, ref_lse, dtype, "the same mod on sm80")
    builtin = flashcore.flex_attention(q, k, v, score_mod=mods.alibi(-bias), block_mask=block_mask,
                                       enable_gqa=True)
    err = ((out.float() - builtin.float()).norm() / builtin.float().norm()).item()
    assert err <= TOLERANCE[dtype], f"sm90 jit vs built-in ALiBi: {err:.2e} (seed {RUN_SEED})"


@needs_h100
@pytest.mark.parametrize("dtype, block_size", [(torch.bfloat16, 128), (torch.float16, 128),
                                               (torch.bfloat16, 64)])
def test_sm90_runs_a_jit_mask_mod_with_fully_masked_rows(dtype, block_size):
    # Block size 64: the mask's partial blocks inside the paired kernel's two-block steps.
    q, k, v = inputs(dtype, Hq=4, Hkv=2, S=300, D=64, seed=9)
    B, _, S = q.shape[:3]
    mask = flashcore.jit_mask_mod("return q_idx % period != 3 && kv_idx <= q_idx;", period=7)
    block_mask = flashcore.create_block_mask(mask, B, None, S, S, BLOCK_SIZE=block_size)
    out, lse = flashcore.flex_attention(q, k, v, block_mask=block_mask, enable_gqa=True,
                                        return_lse=True)
    assert flashcore.last_provider() == "sm90"
    hidden = torch.arange(S, device="cuda") % 7 == 3
    assert (out[:, :, hidden] == 0).all() and (lse[:, :, hidden] == float("-inf")).all()

    def visible(b, h, qi, ki):
        return (qi % 7 != 3) & (ki <= qi)

    ref_out, ref_lse = reference(q, k, v, lambda s, b, h, qi, ki: s, visible)
    shown = ~hidden
    check(out[:, :, shown], lse[:, :, shown], ref_out[:, :, shown], ref_lse[:, :, shown], dtype,
          "sm90 jit mask")
    # With a jit score_mod too, and with the built-in ALiBi and sinks: both kernels agree.
    score = flashcore.jit_score_mod("return score * t;", t=0.5)
    both, lse_both = flashcore.flex_attention(q, k, v, score_mod=score, block_mask=block_mask,
                                              enable_gqa=True, return_lse=True)
    assert flashcore.last_provider() == "sm90"
    ref_half, ref_lse_half = reference(q, k, v, lambda s, b, h, qi, ki: s * 0.5, visible)
    check(both[:, :, shown], lse_both[:, :, shown], ref_half[:, :, shown],
          ref_lse_half[:, :, shown], dtype, "sm90 jit mask + jit score")
    slopes, sinks = torch.rand(q.shape[1], device="cuda"), torch.randn(q.shape[1], device="cuda")
    runs = []
    for backend in ("auto", "sm80"):
        runs.append(flashcore.flex_attention(q, k, v, score_mod=mods.alibi(slopes),
                                             block_mask=block_mask, enable_gqa=True, sinks=sinks,
                                             backend=backend))
        assert flashcore.last_provider() == ("sm90" if backend == "auto" else "sm80")
    assert torch.isfinite(runs[0]).all(), f"NaN with ALiBi and sinks (seed {RUN_SEED})"
    err = ((runs[0].float() - runs[1].float()).norm() / runs[1].float().norm()).item()
    assert err <= TOLERANCE[dtype], f"sm90 vs sm80, ALiBi + sinks: {err:.2e} (seed {RUN_SEED})"


@needs_h100
def test_sm90_plans_a_narrower_problem_for_the_object_s_own_tile(monkeypatch):
    """A functor kernel runs problems of its head dim or below (run_flex<Element, 256> called at
    head dim 128, say). The head dim 256 kernel's tiles have 64 keys where the library's kernel for
    head dim 128 has 128, and the plan, the BlockMask's checks and its merged walks must follow the
    kernel's tile (FunctorFlex::sm90_head_dim), not the problem's: here the jit path is made to
    load its head dim 256 object for a head dim 128 problem under 64-key blocks, which only that
    tile takes on sm90."""
    monkeypatch.setattr(jit, "kernel_head_dim", lambda head_dim: 256)
    dtype = torch.bfloat16
    q, k, v = inputs(dtype, Hq=4, Hkv=2, S=300, D=128, seed=11)
    B, _, S = q.shape[:3]
    bias = torch.randn(q.shape[1], device="cuda") * 0.05
    mod = flashcore.jit_score_mod(BIAS, bias=bias)
    ref_out, ref_lse = reference(q, k, v, lambda s, b, h, qi, ki: s + bias.double()[h] * (qi - ki),
                                 lambda b, h, qi, ki: ki <= qi)
    for block_size in (64, (64, 128), (128, 192)):
        block_mask = walked(flashcore.create_block_mask(mods.causal(), B, None, S, S,
                                                        BLOCK_SIZE=block_size))
        out, lse = flashcore.flex_attention(q, k, v, score_mod=mod, block_mask=block_mask,
                                            enable_gqa=True, return_lse=True)
        assert flashcore.last_provider() == "sm90"
        check(out, lse, ref_out, ref_lse, dtype, f"hd128 on the hd256 object, {block_size}")


@needs_h100
def test_sm90_forced_names_what_it_cannot_run():
    # 192-key blocks up to head dim 128: neither whole 128-key tiles nor pairs of 64-key blocks;
    # the sm80 kernel runs them.
    q, k, v = inputs(torch.float16, Hq=2, Hkv=2, S=384, D=64, seed=10)
    mod = flashcore.jit_score_mod("return score;")
    block_mask = walked(flashcore.create_block_mask(mods.causal(), 2, None, 384, 384,
                                                    BLOCK_SIZE=(128, 192)))
    with pytest.raises(ValueError, match=r"the sm90 flex kernel runs BlockMasks whose "
                                         r"q_block_size is a multiple of 64 and kv_block_size 64 "
                                         r"or a multiple of 128"):
        flashcore.flex_attention(q, k, v, score_mod=mod, block_mask=block_mask, backend="sm90")
    flashcore.flex_attention(q, k, v, score_mod=mod, block_mask=block_mask)
    assert flashcore.last_provider() == "sm80"
