"""The .cu files that flashcore.jit compiles (python/flashcore/jit.py): a functor per snippet, and
the C entry points of src/api/flex_functors.hpp. An attention object for sm_90a is two or three
files (compiled in parallel, linked into one object): the sm80 flex kernel with the entry points,
the sm90 flex kernel, which the entry point calls when the library's plan says sm90, and at head
dims 64 and 128 its paired twin, which runs BlockMasks of 64-key blocks (the plan's
sm90_paired_walk). Compiler
messages about a snippet name it as `score_mod(LINE)` / `mask_mod(LINE)`, about the rest the
generated file's own lines."""

_ELEMENTS = {"float16": "__half", "bfloat16": "__nv_bfloat16"}
# What each kind of snippet is the body of.
_OPERATORS = {
    "score_mod": "__device__ float operator()(float score, int b, int h, int q_idx, "
                 "int kv_idx) const",
    "mask_mod": "__device__ bool operator()(int b, int h, int q_idx, int kv_idx) const",
}
_STRUCTS = {"score_mod": "JitScoreMod", "mask_mod": "JitMaskMod"}

# What a score part that is no snippet becomes: the params' built-in one, or none at all (a
# kernel without a score_mod, as the library launches when the built-in one is off).
NO_SCORE_MOD = "no_score_mod"

_INCLUDES = {
    "sm80": '#include "api/run_flex.cuh"\n#include "flashcore/flex/create_block_mask.cuh"\n',
    "sm90": '#include "api/run_flex_sm90.cuh"\n#include "common/flex_problem.hpp"\n',
}

_PRELUDE = """#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

{includes}
namespace {{

// A capture's 64-bit word: a pointer, an int64 of an int or bool, or a double of a float.
template <typename T>
void flashcore_unpack(uint64_t word, T** out) {{ std::memcpy(out, &word, sizeof(word)); }}
void flashcore_unpack(uint64_t word, int* out) {{ *out = static_cast<int>(static_cast<int64_t>(word)); }}
void flashcore_unpack(uint64_t word, bool* out) {{ *out = word != 0; }}
void flashcore_unpack(uint64_t word, float* out) {{
  double value;
  std::memcpy(&value, &word, sizeof(value));
  *out = static_cast<float>(value);
}}
"""

_ABI = """
extern "C" __attribute__((visibility("default"))) int flashcore_jit_abi_version() {
  return flashcore::detail::kJitAbiVersion;
}
"""


class _Source:
    """Lines of a generated file, with #line directives that keep its own numbering honest."""

    def __init__(self, header):
        self.lines = header.split("\n")

    def add(self, text):
        self.lines += text.split("\n")

    def snippet(self, kind, body):
        self.lines.append(f'#line 1 "{kind}"')
        self.lines += body.split("\n")
        # The directive names the number of the line after it: its position, counted from 1.
        self.lines.append(f'#line {len(self.lines) + 2} "flashcore_jit.cu"')

    def text(self):
        return "\n".join(self.lines) + "\n"


def _functor(source, kind, mod):
    members = [f"  {ctype} {name};" for name, ctype in mod.signature()]
    source.add(f"struct {_STRUCTS[kind]} {{\n" + "\n".join(members + [f"  {_OPERATORS[kind]} {{"]))
    source.snippet(kind, mod.body)
    source.add("  }\n};\n")


def _unpack(kind, mod, first_word):
    """Declares the functor of `kind` filled from captures[first_word...]."""
    lines = [f"  {_STRUCTS[kind]} {kind}{{}};"]
    lines += [f"  flashcore_unpack(captures[{first_word + i}], &{kind}.{name});"
              for i, (name, _) in enumerate(mod.signature())]
    return "\n".join(lines)


def _is_snippet(mod):
    return mod is not None and mod != NO_SCORE_MOD


def _mods(source, mask, score):
    """Adds the snippets' functors to source; returns the lines that declare `mask_mod` and
    `score_mod` in an entry point (from its captures and `plan`), the mask's captures first."""
    for kind, mod in (("mask_mod", mask), ("score_mod", score)):
        if _is_snippet(mod):
            _functor(source, kind, mod)
    source.add("}  // namespace\n")
    body = []
    if mask is not None:
        body.append(_unpack("mask_mod", mask, 0))
    else:
        body.append("  const auto mask_mod = flashcore::detail::builtin_mask(plan->problem);")
    if score == NO_SCORE_MOD:
        body.append("  const flashcore::flex::NoScoreMod score_mod{};")
    elif score is not None:
        body.append(_unpack("score_mod", score, len(mask.signature()) if mask else 0))
    else:
        body.append("  const auto score_mod = flashcore::detail::builtin_score_mod(plan->problem);")
    body.append("  (void)captures;")
    return "\n".join(body)


def attention_sources(mask, score, dtype, head_dim, sm90):
    """The attention object's files: [the sm80 kernel and the entry points] and, with sm90, the
    sm90 kernel's file, then at head dims 64 and 128 the paired sm90 kernel's. mask / score: a
    snippet, or None for the params' built-in part; score may also be NO_SCORE_MOD (no score_mod).
    The entry point takes the mask's captures first, then the score_mod's, and runs the kernel that
    the library's plan (FunctorFlex) names."""
    element = _ELEMENTS[dtype]
    entry = ("const flashcore::detail::FunctorFlex* plan, const uint64_t* captures, "
             "cudaStream_t stream")
    source = _Source(f"// Generated by flashcore.jit: the sm80 flex kernel ({dtype}, head dim "
                     f"{head_dim}) with mods of the caller's own, and the entry points.\n"
                     + _PRELUDE.format(includes=_INCLUDES["sm80"]))
    body = _mods(source, mask, score)
    source.add(_ABI)
    # The kernel head dims whose sm90 tiles have 128 keys, where 64-key BlockMask blocks walk in
    # pairs (src/sm90/flex_params.hpp, flex_tile_keys).
    paired = sm90 and int(head_dim) <= 128
    if sm90:
        source.add(f"""// The sm90 kernels' files.
extern "C" int flashcore_jit_launch_sm90({entry});
extern "C" int flashcore_jit_sm90_fits();""")
    if paired:
        source.add(f"""extern "C" int flashcore_jit_launch_sm90_paired({entry});
extern "C" int flashcore_jit_sm90_paired_fits();""")
    has = ("flashcore_jit_sm90_fits() | flashcore_jit_sm90_paired_fits()" if paired
           else "flashcore_jit_sm90_fits()" if sm90 else "0")
    sm90_launch = ("plan->sm90_paired_walk ? flashcore_jit_launch_sm90_paired(plan, captures, stream)"
                   "\n                                : flashcore_jit_launch_sm90(plan, captures, stream)"
                   if paired else "flashcore_jit_launch_sm90(plan, captures, stream)" if sm90
                   else "static_cast<int>(cudaErrorInvalidDeviceFunction)")
    source.add(f"""
// flashcore::detail::JitHasSm90Fn.
extern "C" __attribute__((visibility("default"))) int flashcore_jit_has_sm90() {{
  return {has};
}}

// flashcore::detail::JitLaunchFn.
extern "C" __attribute__((visibility("default"))) int flashcore_jit_launch({entry}) {{
  if (plan->sm90) {{
    return {sm90_launch};
  }}
{body}
  return static_cast<int>(flashcore::detail::launch_functor_sm80<{element}, {head_dim}>(
      *plan, mask_mod, score_mod, stream));
}}""")
    sources = [source.text()]
    if sm90:
        sources.append(_sm90_source(mask, score, dtype, head_dim, entry, paired=False))
    if paired:
        sources.append(_sm90_source(mask, score, dtype, head_dim, entry, paired=True))
    return sources


def _sm90_source(mask, score, dtype, head_dim, entry, paired):
    """One sm90 kernel's file: the unpaired walk's, or the paired one's (64-key blocks)."""
    element = _ELEMENTS[dtype]
    walk = "paired" if paired else "unpaired"
    suffix = "_paired" if paired else ""
    fits = "functor_sm90_paired_fits" if paired else "functor_sm90_fits"
    flag = "kJitSm90Paired" if paired else "kJitSm90"
    kernel = _Source(f"// Generated by flashcore.jit: the sm90 flex kernel ({dtype}, head dim "
                     f"{head_dim}, {walk} walk) with mods of the caller's own.\n"
                     + _PRELUDE.format(includes=_INCLUDES["sm90"]))
    body = _mods(kernel, mask, score)
    kernel.add(f"""using FlashcoreJitMask = {_type_of("mask_mod", mask)};
using FlashcoreJitScore = {_type_of("score_mod", score)};
constexpr bool kFlashcoreJitFits = flashcore::detail::{fits}<
    {element}, {head_dim}, FlashcoreJitMask, FlashcoreJitScore>();

// flashcore::detail::{flag} when this kernel is built, else 0.
extern "C" int flashcore_jit_sm90{suffix}_fits() {{
  return kFlashcoreJitFits ? flashcore::detail::{flag} : 0;
}}

extern "C" int flashcore_jit_launch_sm90{suffix}({entry}) {{
{body}
  if constexpr (kFlashcoreJitFits) {{
    return static_cast<int>(
        flashcore::detail::launch_functor_sm90_walk<{element}, {head_dim}, {str(paired).lower()}>(
            *plan, mask_mod, score_mod, stream));
  }} else {{
    (void)mask_mod, (void)score_mod, (void)stream;
    return static_cast<int>(cudaErrorInvalidDeviceFunction);
  }}
}}""")
    return kernel.text()


def _type_of(kind, mod):
    if _is_snippet(mod):
        return _STRUCTS[kind]
    if mod == NO_SCORE_MOD:
        return "flashcore::flex::NoScoreMod"
    return f"flashcore::flex::{'BuiltinMask' if kind == 'mask_mod' else 'BuiltinScoreMod'}"


def block_mask_source(mask):
    """The create_block_mask object of a mask snippet (no element type or head dim in it)."""
    source = _Source("// Generated by flashcore.jit: create_block_mask for a mask_mod of the "
                     "caller's own.\n" + _PRELUDE.format(includes=_INCLUDES["sm80"]))
    _functor(source, "mask_mod", mask)
    source.add("}  // namespace\n" + _ABI)
    source.add(f"""// flashcore::detail::JitBlockMaskFn.
extern "C" __attribute__((visibility("default"))) int flashcore_jit_block_mask(
    const flashcore::flex::BlockMask* out, const flashcore::flex::detail::BlockMaskArrays* arrays,
    const uint64_t* captures, cudaStream_t stream) {{
{_unpack("mask_mod", mask, 0)}
  (void)captures;
  return static_cast<int>(
      flashcore::flex::detail::launch_block_mask_builder(mask_mod, *out, *arrays, stream));
}}""")
    return source.text()
