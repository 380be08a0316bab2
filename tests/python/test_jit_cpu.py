"""flashcore.jit_score_mod and jit_mask_mod without a GPU and without torch: the snippets' and captures' checks, the
cache key (stable across processes, blind to captured values), the generated source, and with
nvcc: a compile error raised with the compiler's message, and a snippet compiled once into a
shared object that the second build finds in the cache."""

import ctypes
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import flashcore
from flashcore import jit


class FakeTensor:
    """What the captures read of a torch tensor: dtype and data_ptr."""

    def __init__(self, dtype="torch.float32"):
        self.dtype = dtype

    def data_ptr(self):
        return 0


BIAS = "return score + bias[h] * (q_idx - kv_idx);"


def nvcc_or_skip():
    try:
        return jit.find_nvcc()
    except RuntimeError:
        pytest.skip("SKIPPED: nvcc not found (CUDA_HOME, PATH, /usr/local/cuda), so the JIT "
                    "compile tests do not run")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASHCORE_JIT_CACHE", str(tmp_path / "jit"))
    return tmp_path / "jit"


@pytest.mark.parametrize(
    "body, error, message",
    [
        (7, TypeError, r"snippet must be a str"),
        ("  \n", ValueError, r"snippet is empty"),
        ("score * 2;", ValueError, r"returns nothing"),
        ("return score;\0", ValueError, r"without NUL"),
        ("return score;" + " " * (1 << 16), ValueError, r"under 64 KiB"),
    ],
)
def test_snippet_errors(body, error, message):
    with pytest.raises(error, match=message):
        flashcore.jit_score_mod(body)


@pytest.mark.parametrize(
    "captures, error, message",
    [
        ({"h": 1.0}, ValueError, r"capture name 'h' is taken"),
        ({"class": 1.0}, ValueError, r"capture name 'class' is taken"),
        ({"__x": 1.0}, ValueError, r"capture name '__x' is taken"),
        ({"flashcore_x": 1.0}, ValueError, r"capture name 'flashcore_x' is taken"),
        ({"bias": np.zeros(4, np.float32)}, TypeError, r"capture bias is a ndarray of float32"),
        ({"bias": "text"}, TypeError, r"captures are torch tensors of float32"),
        ({"bias": FakeTensor("torch.complex64")}, TypeError, r"capture bias is a FakeTensor of complex64"),
        ({"n": 2**31}, ValueError, r"capture n = 2147483648 does not fit an int"),
    ],
)
def test_capture_errors(captures, error, message):
    with pytest.raises(error, match=message):
        flashcore.jit_score_mod(BIAS, **captures)


def test_capture_names_must_be_identifiers():
    with pytest.raises(ValueError, match=r"capture name '2x' is not a C\+\+ identifier"):
        jit.JitScoreMod(BIAS, {"2x": 1.0})


def test_capture_types_and_sorted_signature():
    mod = flashcore.jit_score_mod(
        BIAS, bias=FakeTensor(), ids=FakeTensor("torch.int32"), half=FakeTensor("torch.bfloat16"),
        on=True, n=3, alpha=0.5,
    )
    assert mod.signature() == (
        ("alpha", "float"), ("bias", "const float*"), ("half", "const __nv_bfloat16*"),
        ("ids", "const int*"), ("n", "int"), ("on", "bool"),
    )


def test_a_jit_mod_is_not_a_torch_function():
    with pytest.raises(TypeError, match=r"runs only inside flashcore's kernels"):
        flashcore.jit_score_mod(BIAS, bias=FakeTensor())(0.0, 0, 0, 0, 0)


def test_flex_attention_with_a_jit_mod_needs_torch_cuda_tensors():
    q = np.zeros((1, 2, 16, 64), np.float16)
    with pytest.raises(TypeError, match=r"q is a ndarray on the host; a jit_score_mod runs on torch"):
        flashcore.flex_attention(q, q, q, score_mod=flashcore.jit_score_mod("return score;"))
    with pytest.raises(ValueError,
                       match=r"backend 'wmma': a jit_score_mod runs on 'sm90' or 'sm80'"):
        flashcore.flex_attention(q, q, q, score_mod=flashcore.jit_score_mod("return score;"),
                                 backend="wmma")


def test_cache_key_covers_the_compiled_parts_only():
    key = jit.cache_key(flashcore.jit_score_mod(BIAS, bias=FakeTensor(), alpha=0.5),
                        "float16", 64, 90)
    same = [
        jit.JitScoreMod(BIAS, {"alpha": 0.7, "bias": FakeTensor()}),  # another value, order
    ]
    different = [
        flashcore.jit_score_mod(BIAS + " ", bias=FakeTensor(), alpha=0.5),
        flashcore.jit_score_mod(BIAS, bias=FakeTensor("torch.float16"), alpha=0.5),
        flashcore.jit_score_mod(BIAS, bias=FakeTensor(), alpha=1),
        flashcore.jit_score_mod(BIAS, bias=FakeTensor(), beta=0.5),
    ]
    assert all(jit.cache_key(m, "float16", 64, 90) == key for m in same)
    assert all(jit.cache_key(m, "float16", 64, 90) != key for m in different)
    mod = same[0]
    assert jit.cache_key(mod, "bfloat16", 64, 90) != key
    assert jit.cache_key(mod, "float16", 128, 90) != key
    assert jit.cache_key(mod, "float16", 64, 80) != key


def test_cache_key_is_the_same_in_another_process():
    code = ("import flashcore\nfrom flashcore import jit\n"
            "print(jit.cache_key(flashcore.jit_score_mod(%r, alpha=0.5), 'bfloat16', 128, 90))"
            % BIAS)
    keys = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env=dict(os.environ, PYTHONHASHSEED=str(seed))).stdout.strip()
        for seed in (1, 2)
    }
    keys.add(jit.cache_key(flashcore.jit_score_mod(BIAS, alpha=0.5), "bfloat16", 128, 90))
    assert len(keys) == 1 and len(keys.pop()) == 32


def test_generated_source_numbers_the_snippet_and_its_own_lines():
    body = "float x = score;\nreturn x + bias[h];"
    source = jit.generate_source(jit.JitScoreMod(body, {"bias": FakeTensor()}), "bfloat16", 128)
    lines = source.split("\n")
    start = lines.index('#line 1 "score_mod"')
    assert lines[start + 1:start + 3] == body.split("\n")
    directive = lines[start + 3]
    assert directive.startswith("#line ")
    # The line after the directive gets the number it names: its own line in the file.
    assert int(directive.split()[1]) == start + 5
    assert "  const float* bias;" in lines
    assert "launch_functor_sm80<__nv_bfloat16, 128>" in source
    # sm_80: one file, the sm80 kernel alone; the entry point refuses a plan that names sm90.
    assert len(jit.generate_sources(jit.JitScoreMod(body, {}), "bfloat16", 128, 80)) == 1
    assert "flashcore_jit_has_sm90() {\n  return 0;" in source


def test_an_sm90_object_has_the_sm90_kernels_in_files_of_their_own():
    mod = jit.JitScoreMod(BIAS, {"bias": FakeTensor()})
    entry, kernel, paired = jit.generate_sources(mod, "float16", 64, 90)
    # The plan's walk picks the kernel: 64-key BlockMask blocks under 128-key tiles walk in pairs.
    assert ("plan->sm90_paired_walk ? flashcore_jit_launch_sm90_paired(plan, captures, stream)"
            in entry)
    assert "flashcore_jit_launch_sm90(plan, captures, stream)" in entry
    assert "return flashcore_jit_sm90_fits() | flashcore_jit_sm90_paired_fits();" in entry
    for text in (kernel, paired):
        assert '#include "api/run_flex_sm90.cuh"' in text and "run_flex.cuh" not in text
        assert "using FlashcoreJitMask = flashcore::flex::BuiltinMask;" in text
        assert "using FlashcoreJitScore = JitScoreMod;" in text
    assert "launch_functor_sm90_walk<__half, 64, false>" in kernel
    assert "functor_sm90_fits<" in kernel and "flashcore::detail::kJitSm90 :" in kernel
    assert "launch_functor_sm90_walk<__half, 64, true>" in paired
    assert "functor_sm90_paired_fits<" in paired and "flashcore::detail::kJitSm90Paired :" in paired
    # Every file declares the functor with its snippet.
    for text in (entry, kernel, paired):
        assert text.count('#line 1 "score_mod"') == 1
    # Every kernel head dim has the sm90 kernel on sm_90; 256's tiles have 64 keys, which every
    # BlockMask it takes fills whole, so it has no paired twin.
    entry, kernel = jit.generate_sources(mod, "bfloat16", 256, 90)
    assert "return flashcore_jit_sm90_fits();" in entry and "paired" not in entry
    assert "launch_functor_sm90_walk<__nv_bfloat16, 256, false>" in kernel
    assert len(jit.generate_sources(mod, "bfloat16", 128, 90)) == 3
    # The object is built for sm_90a: the sm90 kernel is wgmma / TMA code.
    assert jit._gencode(90) == "-gencode=arch=compute_90a,code=sm_90a"
    assert jit._gencode(80) == "-gencode=arch=compute_80,code=sm_80"


def test_build_arguments_are_checked():
    mod = flashcore.jit_score_mod("return score;")
    with pytest.raises(ValueError, match=r"runs float16 and bfloat16"):
        jit.build(mod, "float32", 64, 90)
    with pytest.raises(ValueError, match=r"compiled for 64, 128 and 256"):
        jit.build(mod, "float16", 96, 90)
    with pytest.raises(ValueError, match=r"needs sm_80 or newer"):
        jit.build(mod, "float16", 64, 75)
    with pytest.raises(ValueError, match=r"head dims up to 256"):
        jit.kernel_head_dim(264)
    assert [jit.kernel_head_dim(d) for d in (8, 64, 72, 128, 136, 192, 256)] == [
        64, 64, 128, 128, 256, 256, 256]


def test_missing_nvcc_is_a_clear_error(monkeypatch, cache):
    for name in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(jit, "_DEFAULT_NVCC", "/nonexistent/nvcc")
    with pytest.raises(RuntimeError, match=r"nvcc, which was not found: .* set CUDA_HOME"):
        jit.build(flashcore.jit_score_mod("return score;"), "float16", 64, 80)


def test_compile_error_shows_nvcc_message(cache):
    nvcc_or_skip()
    mod = flashcore.jit_score_mod("float x = score\nreturn x + undeclared_thing;")
    with pytest.raises(flashcore.JitCompileError) as raised:
        jit.build(mod, "float16", 64, 80)
    message = str(raised.value)
    assert "nvcc could not compile the score_mod snippet" in message
    assert "score_mod(2): error" in message  # the snippet's own line number
    assert not list(cache.glob("*.so"))


def test_compiles_once_then_hits_the_cache(cache):
    nvcc_or_skip()
    mod = flashcore.jit_score_mod("return score * scale_h[h] + (on ? bias : 0.f);",
                                  scale_h=FakeTensor(), on=True, bias=0.25)
    compiles = jit.stats()["compiles"]
    path, compiled = jit.build(mod, "bfloat16", 64, 80)
    assert compiled and path.parent == cache and jit.stats()["compiles"] == compiles + 1
    assert jit.stats()["last_compile_s"] > 0
    library = ctypes.CDLL(str(path))
    assert library.flashcore_jit_abi_version() == jit._ABI_VERSION
    assert library.flashcore_jit_launch  # the entry point is exported
    again, compiled = jit.build(jit.JitScoreMod(mod.body, {"bias": 1.5, "on": False,
                                                           "scale_h": FakeTensor()}),
                                "bfloat16", 64, 80)
    assert again == path and not compiled and jit.stats()["compiles"] == compiles + 1


DILATED = "return kv_idx <= q_idx && (q_idx - kv_idx) % step == 0;"


@pytest.mark.parametrize(
    "body, error, message",
    [
        (None, TypeError, r"the mask_mod snippet must be a str"),
        ("", ValueError, r"the mask_mod snippet is empty; write e.g. 'return kv_idx <= q_idx;'"),
        ("kv_idx <= q_idx;", ValueError, r"returns whether q_idx sees kv_idx"),
    ],
)
def test_mask_snippet_errors(body, error, message):
    with pytest.raises(error, match=message):
        flashcore.jit_mask_mod(body)


def test_a_jit_mask_mod_goes_to_create_block_mask():
    mask = flashcore.jit_mask_mod(DILATED, step=3)
    with pytest.raises(TypeError, match=r"runs only inside flashcore's kernels"):
        mask(0, 0, 0, 0)
    q = np.zeros((1, 2, 16, 64), np.float16)
    with pytest.raises(TypeError, match=r"score_mod is a jit_mask_mod; pass it to create_block_mask"):
        flashcore.flex_attention(q, q, q, score_mod=mask)


def test_cache_keys_of_masks_scores_and_their_programs_differ():
    mask = flashcore.jit_mask_mod("return score > 0;")
    score = flashcore.jit_score_mod("return score > 0;")  # the same text, another operator
    both = jit.Program(mask, score)
    keys = {jit.cache_key(m, "float16", 64, 90) for m in (mask, score, both)}
    keys.add(jit.cache_key(mask, None, None, 90, "block_mask"))
    assert len(keys) == 4
    assert jit.cache_key(jit.Program(mask, None), "float16", 64, 90) == jit.cache_key(
        mask, "float16", 64, 90)


def test_generated_sources_of_a_mask():
    mask = jit.JitMaskMod(DILATED, {"step": 3, "ids": FakeTensor("torch.int32")})
    score = jit.JitScoreMod(BIAS, {"bias": FakeTensor()})
    source = jit.generate_source(jit.Program(mask, score), "float16", 64)
    lines = source.split("\n")
    assert lines[lines.index('#line 1 "mask_mod"') + 1] == DILATED
    assert "  __device__ bool operator()(int b, int h, int q_idx, int kv_idx) const {" in lines
    # The mask's captures come first (ids, step), then the score_mod's (bias).
    assert "  flashcore_unpack(captures[0], &mask_mod.ids);" in lines
    assert "  flashcore_unpack(captures[1], &mask_mod.step);" in lines
    assert "  flashcore_unpack(captures[2], &score_mod.bias);" in lines
    alone = jit.generate_source(mask, "float16", 64)
    assert "builtin_score_mod(plan->problem)" in alone and "builtin_mask" not in alone
    # A mask with no score_mod at all: a kernel without one (its own cache key).
    plain = jit.generate_sources(jit.Program(mask, jit.NO_SCORE_MOD), "float16", 64, 90)
    assert all("flashcore::flex::NoScoreMod score_mod{};" in f for f in plain)
    assert "using FlashcoreJitScore = flashcore::flex::NoScoreMod;" in plain[1]
    assert jit.cache_key(jit.Program(mask, jit.NO_SCORE_MOD), "float16", 64, 90) != jit.cache_key(
        mask, "float16", 64, 90)
    builder = jit._jit_source.block_mask_source(mask)
    assert "flashcore_jit_block_mask" in builder and "launch_block_mask_builder" in builder
    assert "flashcore_jit_launch" not in builder


def test_a_mask_and_its_block_mask_builder_compile(cache):
    nvcc_or_skip()
    mask = flashcore.jit_mask_mod(DILATED, step=3)
    score = flashcore.jit_score_mod(BIAS, bias=FakeTensor())
    path, compiled = jit.build(jit.Program(mask, score), "bfloat16", 64, 80)
    assert compiled and ctypes.CDLL(str(path)).flashcore_jit_launch
    builder, compiled = jit.build_block_mask(mask, 80)
    library = ctypes.CDLL(str(builder))
    assert compiled and library.flashcore_jit_abi_version() == jit._ABI_VERSION
    assert library.flashcore_jit_block_mask
    assert jit.build_block_mask(jit.JitMaskMod(DILATED, {"step": 5}), 80) == (builder, False)
