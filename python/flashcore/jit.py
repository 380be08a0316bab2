"""score_mods and mask_mods of your own from Python: CUDA C++ snippets compiled at run time into
flashcore's flex kernels, the sm90 one on an H100 where it takes the problem, else the sm80 one
(docs/flex.md, "Functors of your own (Python)").

    bias = torch.randn(H, device="cuda")
    mod = flashcore.jit_score_mod("return score + bias[h] * (q_idx - kv_idx);", bias=bias)
    dilated = flashcore.jit_mask_mod("return kv_idx <= q_idx && (q_idx - kv_idx) % d == 0;", d=3)
    block_mask = flashcore.create_block_mask(dilated, B, None, S, S)
    out = flashcore.flex_attention(q, k, v, score_mod=mod, block_mask=block_mask)

A score_mod snippet is the body of `__device__ float operator()(float score, int b, int h,
int q_idx, int kv_idx) const`, a mask_mod snippet of `__device__ bool operator()(int b, int h,
int q_idx, int kv_idx) const`, in a functor whose members are the captures: torch tensors become
device pointers (`const float*` for float32, ...; contiguous, on q's device) and Python bool /
int / float become `bool` / `int` / `float`. A generated .cu file (_jit_source.py) includes the
kernel headers that ship with the package (include/flashcore/kernels), instantiates the flex
kernels (sm80, and sm90 in an object for sm_90a; for a mask's create_block_mask, the BlockMask
builder) for the functors and exports C entry points; nvcc builds it into a shared object, which
ctypes loads. The object is cached on
disk (FLASHCORE_JIT_CACHE, default ~/.cache/flashcore/jit) under a hash of the snippets, the
captures' names and types, the dtype, the kernel's head dim, the GPU architecture, the flashcore
version and its kernel headers, so that a second call, in this process or another, compiles
nothing. Captured values are passed at each call and never enter the key.
"""

import collections
import ctypes
import functools
import hashlib
import itertools
import json
import os
import re
import shutil
import struct
import subprocess
import threading
import time
import weakref
from importlib import metadata
from pathlib import Path

from . import _jit_source

__all__ = ["JitCompileError", "JitMaskMod", "JitScoreMod", "Program", "jit_mask_mod",
           "jit_score_mod", "build", "cache_dir", "stats"]

# The ABI of the shared objects' entry points: src/api/flex_functors.hpp's kJitAbiVersion.
_ABI_VERSION = 6
# The flex kernel's head dims (src/sm80/flex_fwd.cu); a smaller head dim runs on the next one up.
_KERNEL_HEAD_DIMS = (64, 128, 256)
_ELEMENTS = {"float16": "__half", "bfloat16": "__nv_bfloat16"}
# Tensor captures: torch dtype name -> the pointer the functor holds.
_POINTER_TYPES = {
    "float32": "const float*",
    "float64": "const double*",
    "float16": "const __half*",
    "bfloat16": "const __nv_bfloat16*",
    "int32": "const int*",
    "int64": "const long long*",
    "int16": "const short*",
    "int8": "const signed char*",
    "uint8": "const unsigned char*",
    "bool": "const bool*",
}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# The operator's parameters, and C++ keywords a member could not be named.
_RESERVED = {
    "score", "b", "h", "q_idx", "kv_idx", "alignas", "alignof", "auto", "bool", "break", "case",
    "char", "class", "const", "constexpr", "continue", "default", "delete", "do", "double",
    "else", "enum", "extern", "false", "float", "for", "goto", "if", "inline", "int", "long",
    "namespace", "new", "operator", "private", "public", "register", "return", "short", "signed",
    "sizeof", "static", "struct", "switch", "template", "this", "true", "typedef", "typename",
    "union", "unsigned", "using", "void", "volatile", "while",
}
_MAX_SNIPPET = 1 << 16
_DEFAULT_NVCC = "/usr/local/cuda/bin/nvcc"

_lock = threading.Lock()
# key -> (ctypes library, entry address, sm90 kernels): loaded objects of this process; sm90
# kernels is the object's flashcore_jit_has_sm90() (detail::kJitSm90 | kJitSm90Paired), or 0.
_loaded = {}
_key_memo = {}  # (tokens, entry, dtype, head dim, arch) -> key: each key hashed once
_stats = {"compiles": 0, "disk_hits": 0, "memory_hits": 0, "last_compile_s": None}
# token -> JitScoreMod / JitMaskMod, for the custom op flashcore::flex_attention (_flex_ops.py), whose schema
# cannot hold a Python object. Weak: a mod nobody holds is gone, and so is its entry.
_registry = weakref.WeakValueDictionary()
_tokens = itertools.count()


class JitCompileError(RuntimeError):
    """nvcc rejected a snippet; the message holds the compiler's output (lines of the snippet
    are numbered as `score_mod:LINE`)."""


class _JitMod:
    """A snippet and its captures; JitScoreMod and JitMaskMod say which operator it is."""

    kind = None  # "score_mod" or "mask_mod": the operator of _jit_source

    def __init__(self, body, captures):
        what = f"the {self.kind} snippet"
        if not isinstance(body, str):
            raise TypeError(f"{what} must be a str, got {type(body).__name__}")
        if not body.strip():
            raise ValueError(f"{what} is empty; write e.g. '{self._example}'")
        if len(body) > _MAX_SNIPPET or "\0" in body:
            raise ValueError(f"{what} must be text under 64 KiB without NUL bytes")
        if "return" not in body:
            raise ValueError(
                f"{what} returns nothing: it is the body of a function that returns "
                f"{self._returns}, e.g. '{self._example}'"
            )
        self.body = body
        self.captures = {}
        for name in sorted(captures):
            self.captures[name] = _capture_type(name, captures[name]), captures[name]
        self.token = f"jit_{self.kind}_{next(_tokens)}"
        _registry[self.token] = self

    def token_and_tensors(self):
        """(token, the tensor captures in signature order): what the custom op takes for it."""
        tensors = [value for ctype, value in self.captures.values() if ctype.endswith("*")]
        return self.token, tensors

    def signature(self):
        """((name, C++ type), ...) of the captures, sorted by name: part of the cache key."""
        return tuple((name, ctype) for name, (ctype, _) in self.captures.items())

    def __call__(self, *args):
        raise TypeError(
            f"a jit_{self.kind} runs only inside flashcore's kernels (flashcore.flex_attention, "
            f"flashcore.create_block_mask); torch's flex_attention cannot evaluate its C++ snippet"
        )

    def __repr__(self):
        return f"flashcore.jit_{self.kind}({self.body!r}, captures={dict(self.signature())})"


class JitScoreMod(_JitMod):
    """A score_mod compiled from a CUDA C++ snippet; build it with jit_score_mod."""

    kind = "score_mod"
    _returns = "the new score"
    _example = "return score + bias[h];"


class JitMaskMod(_JitMod):
    """A mask_mod compiled from a CUDA C++ snippet; build it with jit_mask_mod."""

    kind = "mask_mod"
    _returns = "whether q_idx sees kv_idx"
    _example = "return kv_idx <= q_idx;"


# What one attention object compiles: the mask's snippet and the score_mod's (either may be None:
# the params' built-in part; score may also be NO_SCORE_MOD, no score_mod at all).
Program = collections.namedtuple("Program", ["mask", "score"])
NO_SCORE_MOD = _jit_source.NO_SCORE_MOD


def _snippets(program):
    return [m for m in program if isinstance(m, _JitMod)]


def _program(mods):
    if isinstance(mods, Program):
        return mods
    if isinstance(mods, JitMaskMod):
        return Program(mods, None)
    if isinstance(mods, JitScoreMod):
        return Program(None, mods)
    raise TypeError(f"expected a jit_score_mod, a jit_mask_mod or a jit.Program, got {mods!r}")


def _registered_mod(token):
    mod = _registry.get(token)
    if mod is None:
        raise RuntimeError(
            f"{token} no longer exists: a compiled graph outlived the jit mod it was traced "
            "with; keep the mod alive as long as the compiled function"
        )
    return mod


def tensor_count(token):
    """How many tensor captures the mod of `token` has (token_and_tensors' second part)."""
    return len(_registered_mod(token).token_and_tensors()[1])


def registered(token, tensors):
    """The mod of `token` (token_and_tensors), with `tensors` as its tensor captures: the custom
    op's arguments, which under torch.compile are the traced graph's tensors."""
    mod = _registered_mod(token)
    pointer_names = [name for name, (ctype, _) in mod.captures.items() if ctype.endswith("*")]
    if len(tensors) != len(pointer_names):
        raise ValueError(f"{token} has {len(pointer_names)} tensor captures, got {len(tensors)}")
    view = object.__new__(type(mod))
    view.body, view.token = mod.body, mod.token  # the same token: the same cache keys
    view.captures = dict(mod.captures)
    for name, tensor in zip(pointer_names, tensors):
        view.captures[name] = (mod.captures[name][0], tensor)
    return view


def jit_mask_mod(body, **captures):
    """A mask_mod from a CUDA C++ snippet: the body of `bool operator()(int b, int h, int q_idx,
    int kv_idx) const` (true: query q_idx of batch b, query head h, sees key kv_idx; indices as
    PyTorch passes them, from the start of each sequence), with captures as jit_score_mod's.
    flashcore.create_block_mask builds its BlockMask, and flex_attention with that BlockMask
    evaluates it on partial blocks, fused; it may be combined with any score_mod."""
    return JitMaskMod(body, captures)


def jit_score_mod(body, **captures):
    """A score_mod from a CUDA C++ snippet: the body of `float operator()(float score, int b,
    int h, int q_idx, int kv_idx) const` (natural-log domain, score = q . k * scale, h the query
    head), with each keyword a capture visible by its name: a torch tensor (a device pointer,
    e.g. `const float* bias` for float32, contiguous on q's device) or a bool / int / float."""
    return JitScoreMod(body, captures)


def _capture_type(name, value):
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise ValueError(f"capture name {name!r} is not a C++ identifier")
    if name in _RESERVED or name.startswith("__") or name.startswith("flashcore"):
        raise ValueError(
            f"capture name {name!r} is taken (the operator's parameters score, b, h, q_idx, kv_idx, "
            "C++ keywords, names starting with __ or flashcore); rename it"
        )
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        if not -(2**31) <= value < 2**31:
            raise ValueError(f"capture {name} = {value} does not fit an int (32 bits)")
        return "int"
    if isinstance(value, float):
        return "float"
    dtype = str(getattr(value, "dtype", "")).replace("torch.", "")
    if not hasattr(value, "data_ptr") or dtype not in _POINTER_TYPES:
        raise TypeError(
            f"capture {name} is a {type(value).__name__}{' of ' + dtype if dtype else ''}; "
            f"captures are torch tensors of {', '.join(_POINTER_TYPES)} or bool / int / float"
        )
    return _POINTER_TYPES[dtype]


def _capture_words(mods, device_index):
    """The captures of mods (None skipped) as the entry points take them: one 64-bit word each,
    mod after mod, each in its signature order."""
    words = []
    items = [item for mod in mods if isinstance(mod, _JitMod) for item in mod.captures.items()]
    for name, (ctype, value) in items:
        if ctype == "bool" or ctype == "int":
            words.append(int(value) & 0xFFFFFFFFFFFFFFFF)
        elif ctype == "float":
            words.append(struct.unpack("<Q", struct.pack("<d", value))[0])
        else:
            if not value.is_cuda or value.device.index != device_index:
                raise ValueError(
                    f"capture {name} is on {value.device} but q is on cuda:{device_index}; move "
                    f"it there ({name}.to(q.device))"
                )
            if not value.is_contiguous():
                raise ValueError(
                    f"capture {name} is not contiguous; the snippet indexes it as a flat array: "
                    f"pass {name}.contiguous()"
                )
            words.append(value.data_ptr())
    return words


def cache_dir():
    """Where compiled score_mods are kept: FLASHCORE_JIT_CACHE, else $XDG_CACHE_HOME/flashcore/jit
    (default ~/.cache/flashcore/jit)."""
    if os.environ.get("FLASHCORE_JIT_CACHE"):
        return Path(os.environ["FLASHCORE_JIT_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "flashcore" / "jit"


def stats():
    """This process's counts: compiles (nvcc runs), disk_hits (shared objects loaded from the
    cache), memory_hits (calls that found one loaded) and last_compile_s (seconds)."""
    return dict(_stats)


def _include_dir():
    return Path(__file__).resolve().parent / "include"


_headers_digest = None


def _headers_hash():
    """A hash of the kernel headers the package ships (CuTe aside, pinned by the version), so that
    a rebuilt package with changed kernels never reuses an object of the old ones."""
    global _headers_digest
    if _headers_digest is None:
        root = _include_dir() / "flashcore"
        if not (root / "kernels" / "api" / "run_flex.cuh").is_file():
            raise RuntimeError(
                f"flashcore's kernel headers are missing under {root}: this installation cannot "
                "compile score_mods (reinstall the wheel built with its include/ tree)"
            )
        digest = hashlib.sha256()
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "cutlass" not in p.parts):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
        _headers_digest = digest.hexdigest()
    return _headers_digest


@functools.lru_cache(maxsize=None)
def _version():
    # Once per process: importlib.metadata scans the installed distributions (about 0.2 ms).
    try:
        return metadata.version("flashcore")
    except metadata.PackageNotFoundError:
        return "source"


_ATTENTION, _BLOCK_MASK = "attention", "block_mask"  # the two kinds of object


def cache_key(mods, dtype, head_dim, arch, entry=_ATTENTION):
    """The hex key of (the snippets, their captures' names and types, the entry point, dtype,
    kernel head dim, arch, ABI, flashcore version, kernel headers). mods: a jit_score_mod, a
    jit_mask_mod or a Program; head_dim is the kernel's (64, 128 or 256); a block-mask object has no
    dtype or head dim (None)."""
    program = _program(mods)
    memo = (tuple(m.token if isinstance(m, _JitMod) else m for m in program), entry, dtype,
            head_dim, arch)
    if memo in _key_memo:
        return _key_memo[memo]
    fields = {
        "mods": [[m.kind, m.body, m.signature()] if isinstance(m, _JitMod) else m
                 for m in program],
        "entry": entry,
        "dtype": dtype,
        "head_dim": head_dim,
        "arch": arch,
        "abi": _ABI_VERSION,
        "flashcore": _version(),
        "headers": _headers_hash(),
    }
    key = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]
    _key_memo[memo] = key
    return key


def generate_sources(mods, dtype, head_dim, arch=80):
    """The .cu files of an attention object for mods (a jit mod or a Program) on sm_<arch>: the
    sm80 kernel with the entry points, and for sm_90 the sm90 kernel's."""
    program = _program(mods)
    return _jit_source.attention_sources(program.mask, program.score, dtype, head_dim,
                                         sm90=int(arch) == 90)


def generate_source(mods, dtype, head_dim, arch=80):
    """The first .cu file of generate_sources (the entry points)."""
    return generate_sources(mods, dtype, head_dim, arch)[0]


def find_nvcc():
    """nvcc from CUDA_HOME / CUDA_PATH, then PATH, then /usr/local/cuda; RuntimeError if none."""
    candidates = [os.path.join(os.environ[v], "bin", "nvcc") for v in ("CUDA_HOME", "CUDA_PATH")
                  if os.environ.get(v)]
    candidates += [shutil.which("nvcc") or "", _DEFAULT_NVCC]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise RuntimeError(
        "flashcore.jit_score_mod compiles its snippet with nvcc, which was not found: install the "
        "CUDA toolkit (12.x or 13.x) and set CUDA_HOME or put nvcc on PATH"
    )


def build(mods, dtype="float16", head_dim=64, arch=80):
    """The path of the attention object of mods (a jit mod or a Program) for (dtype, kernel head
    dim 64/128/256, sm_<arch>), compiled now unless the cache has it; (path, compiled now). Needs
    nvcc, not a GPU."""
    if dtype not in _ELEMENTS:
        raise ValueError(f"dtype {dtype!r}: the flex kernel runs float16 and bfloat16")
    if head_dim not in _KERNEL_HEAD_DIMS:
        raise ValueError(f"head_dim {head_dim}: the flex kernels are compiled for 64, 128 and 256")
    _check_arch(arch)
    key = cache_key(mods, dtype, head_dim, int(arch))
    what = " and ".join(m.kind for m in _snippets(_program(mods)))
    return _compile(key, lambda: generate_sources(mods, dtype, head_dim, arch), arch, what)


def build_block_mask(mask, arch=80):
    """The path of a jit_mask_mod's create_block_mask object for sm_<arch>; (path, compiled
    now)."""
    if not isinstance(mask, JitMaskMod):
        raise TypeError(f"build_block_mask takes a jit_mask_mod, got {type(mask).__name__}")
    _check_arch(arch)
    key = cache_key(mask, None, None, int(arch), _BLOCK_MASK)
    return _compile(key, lambda: [_jit_source.block_mask_source(mask)], arch, "mask_mod")


def _check_arch(arch):
    if int(arch) < 80:
        raise ValueError(f"sm_{arch}: the flex kernel needs sm_80 or newer")


def _gencode(arch):
    # The sm90 flex kernel is sm_90a code (wgmma, TMA, setmaxnreg).
    arch = f"{arch}a" if int(arch) == 90 else str(arch)
    return f"-gencode=arch=compute_{arch},code=sm_{arch}"


def _compile(key, source_texts, arch, what):
    """Compiles the files of source_texts() into the object of key unless it is cached: one nvcc
    per file, in parallel, then one link; what names the snippets for a compile error."""
    directory = cache_dir()
    target = directory / f"jit_{key}.so"
    if target.is_file():
        return target, False
    directory.mkdir(parents=True, exist_ok=True)
    sources = []
    for i, text in enumerate(source_texts()):
        sources.append(directory / f"jit_{key}{'' if i == 0 else f'_{i}'}.cu")
        sources[-1].write_text(text)
    include = _include_dir()
    # Per-process names, renamed into place: processes that compile one key at once each get a
    # whole object, and a reader never sees a partial one.
    partial = directory / f"jit_{key}.{os.getpid()}.{threading.get_ident()}.tmp"
    nvcc = [find_nvcc(), "-std=c++17", "-O3", "--expt-relaxed-constexpr", "-Xcompiler",
            "-fPIC,-fvisibility=hidden", _gencode(arch)]
    includes = [f"-I{include}", f"-I{include / 'flashcore' / 'kernels'}",
                "-isystem", str(include / "flashcore" / "cutlass")]
    if len(sources) == 1:
        commands = [nvcc + includes + ["-shared", "-o", str(partial), str(sources[0])]]
    else:
        objects = [Path(f"{partial}.{i}.o") for i in range(len(sources))]
        commands = [nvcc + includes + ["-c", "-o", str(o), str(c)]
                    for o, c in zip(objects, sources)]
    start = time.perf_counter()
    runs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for c in commands]
    outputs = [run.communicate() for run in runs]
    results = [(run.returncode, out, err) for run, (out, err) in zip(runs, outputs)]
    if len(sources) > 1 and all(code == 0 for code, _, _ in results):
        link = subprocess.run(nvcc + ["-shared", "-o", str(partial)] + [str(o) for o in objects],
                              capture_output=True, text=True)
        results.append((link.returncode, link.stdout, link.stderr))
    if len(sources) > 1:
        for o in objects:
            o.unlink(missing_ok=True)
    failed = [(out, err) for code, out, err in results if code != 0]
    if failed:
        partial.unlink(missing_ok=True)
        out, err = failed[0]
        raise JitCompileError(
            f"nvcc could not compile the {what} snippet (its lines are numbered "
            f"score_mod:LINE / mask_mod:LINE; the generated file is {sources[0]}):\n"
            f"{err.strip() or out.strip()}"
        )
    os.replace(partial, target)
    _stats["compiles"] += 1
    _stats["last_compile_s"] = time.perf_counter() - start
    return target, True


def _load(key, build_object, entry_name):
    """(address of entry_name, the object's sm90 kernels: flags, 0 for none) in the object of key
    (built by build_object() when this process has not loaded it)."""
    with _lock:
        if key in _loaded:
            _stats["memory_hits"] += 1
            return _loaded[key][1:]
        path, compiled = build_object()
        if not compiled:
            _stats["disk_hits"] += 1
        library = ctypes.CDLL(str(path))
        if library.flashcore_jit_abi_version() != _ABI_VERSION:
            raise RuntimeError(f"{path} was built for another flashcore; delete it and call again")
        address = ctypes.cast(getattr(library, entry_name), ctypes.c_void_p).value
        sm90_kernels = (int(library.flashcore_jit_has_sm90())
                        if hasattr(library, "flashcore_jit_has_sm90") else 0)
        _loaded[key] = (library, address, sm90_kernels)
        return _loaded[key][1:]


def launcher(mods, dtype, head_dim, arch):
    """(the attention entry point's address, its object's sm90 kernels: flags) for mods (compiled
    and loaded once per key)."""
    key = cache_key(mods, dtype, head_dim, arch)
    return _load(key, lambda: build(mods, dtype, head_dim, arch), "flashcore_jit_launch")


def kernel_head_dim(head_dim):
    for d in _KERNEL_HEAD_DIMS:
        if head_dim <= d:
            return d
    raise ValueError(
        f"head_dim {head_dim}: a jit_score_mod runs on the flex kernels, head dims up to 256"
    )


@functools.lru_cache(maxsize=None)
def _arch(device_index):
    import torch

    major, minor = torch.cuda.get_device_capability(device_index)
    return major * 10 + minor


def run(mods, q, builtin_score, run_native):
    """Compiles or loads the attention object of mods (a jit mod or a Program) for q (torch,
    [B, S, H, D] view) and calls run_native(address, sm90_kernels, replaces_score, captures, fp16,
    kernel head dim). builtin_score: whether the params carry a built-in score_mod (ALiBi, a bias
    table or softcap); a mask snippet without one compiles a kernel with no score_mod, as the
    library launches for the built-in mods."""
    program = _program(mods)
    if program.score is None and not builtin_score:
        program = Program(program.mask, NO_SCORE_MOD)
    if not getattr(q, "is_cuda", False):
        kind = "score_mod" if isinstance(program.score, JitScoreMod) else "mask_mod"
        raise TypeError(
            f"q is a {type(q).__name__} on the host; a jit_{kind} runs on torch CUDA tensors"
        )
    dtype = str(q.dtype).replace("torch.", "")
    if dtype not in _ELEMENTS:
        raise TypeError(f"q has dtype {dtype}; the flex kernel takes float16 or bfloat16")
    head_dim = kernel_head_dim(q.shape[-1])
    captures = _capture_words(program, q.device.index)
    address, sm90_kernels = launcher(program, dtype, head_dim, _arch(q.device.index))
    return run_native(address, sm90_kernels, program.score is not None, captures,
                      dtype == "float16", head_dim)


def block_mask(mask, device_index, run_native):
    """Compiles or loads mask's create_block_mask object for the GPU and calls
    run_native(address, captures)."""
    arch = _arch(device_index)
    key = cache_key(mask, None, None, arch, _BLOCK_MASK)
    address, _ = _load(key, lambda: build_block_mask(mask, arch), "flashcore_jit_block_mask")
    return run_native(address, _capture_words([mask], device_index))
