// The host side of running the flex kernel with functors compiled outside the library: run_flex
// (api/run_flex.cuh, a C++ caller's own structs) and flashcore.jit_score_mod (a CUDA snippet
// compiled at run time into a shared object, python/flashcore/jit.py). Both validate through
// prepare_functor_flex, which the library compiles, so that they check exactly the same things.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/problem.hpp"
#include "flashcore/attention.hpp"
#include "flashcore/flex/block_mask.hpp"

namespace flashcore::detail {

// Which mods the functors supply. The params' own fields for a supplied part must stay off
// (causal, the window and flex.mask for the mask; softcap and flex.score_mod for the score_mod);
// a part not supplied is the params' built-in one (sm80::builtin_mask / builtin_score_mod).
struct FunctorMods {
  bool mask = true;
  bool score = true;
};

// Everything run_flex checks before a launch with a kernel compiled for (dtype, head_dim): the
// arguments (validate_arguments), the fields the functors replace, the flex kernel's limits
// (BlockMask block sizes, one unsplit tile) and the device (validate_device). Fills *problem.
Status prepare_functor_flex(const AttentionParams& params, DType dtype, int head_dim,
                            FunctorMods mods, Problem* problem);

// The C entry point of a shared object that flashcore.jit_score_mod / jit_mask_mod compile:
// launches its flex kernel for a problem that prepare_functor_flex accepted, with the snippet's
// captures (one 64-bit word each, in the order of their declaration), and returns the launch's
// cudaError_t. kJitAbiVersion changes whenever Problem or this signature does; it is part of the
// JIT cache key and the shared object reports it (flashcore_jit_abi_version), so a stale one is
// never called.
using JitLaunchFn = int (*)(const Problem* problem, const uint64_t* captures, cudaStream_t stream);
// The second entry point of a jit_mask_mod's shared object: enqueues create_block_mask's builder
// for its mask into a BlockMask the library placed (flex::detail::prepare_block_mask), with the
// mask's captures; returns the launch's cudaError_t.
using JitBlockMaskFn = int (*)(const flex::BlockMask* out,
                               const flex::detail::BlockMaskArrays* arrays,
                               const uint64_t* captures, cudaStream_t stream);
inline constexpr int kJitAbiVersion = 2;

}  // namespace flashcore::detail
