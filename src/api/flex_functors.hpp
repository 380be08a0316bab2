// The host side of running the flex kernels with functors compiled outside the library: run_flex
// (api/run_flex.cuh, a C++ caller's own structs) and flashcore.jit_score_mod / jit_mask_mod (CUDA
// snippets compiled at run time into a shared object, python/flashcore/jit.py). Both validate
// through prepare_functor_flex and launch through launch_functor_flex, which the library
// compiles, so that they check, choose the kernel (sm90 where it takes the problem, else sm80, as
// for the built-in mods) and report the provider exactly alike.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/problem.hpp"
#include "flashcore/attention.hpp"
#include "flashcore/flex/block_mask.hpp"
#include "sm90/flex_params.hpp"
#include "sm90/launch_args.hpp"

namespace flashcore::detail {

// Which mods the functors supply. The params' own fields for a supplied part must stay off
// (causal, the window and flex.mask for the mask; softcap and flex.score_mod for the score_mod);
// a part not supplied is the params' built-in one (sm80::builtin_mask / builtin_score_mod).
struct FunctorMods {
  bool mask = true;
  bool score = true;
};

// The flex kernels compiled for the functors: their dtype and head dim, whether the sm90 flex
// kernel (sm_90a code, api/run_flex_sm90.cuh) is among them beside the sm80 one, and whether its
// paired twin is too (BlockMasks of 64-key blocks under 128-key tiles, functor_sm90_paired_fits).
struct FunctorKernels {
  DType dtype = DType::kFloat16;
  int head_dim = 0;
  bool sm90 = false;
  bool sm90_paired = false;
};

// What prepare_functor_flex decided: the problem, and the kernel that runs it.
struct FunctorFlex {
  Problem problem;
  bool sm90 = false;  // the sm90 flex kernel with sm90_plan; else the sm80 one
  // The head dim that kernel was compiled for: its tile, which the plan and walks follow
  // (sm90_flex_kernel_head_dim), may be narrower than the library's kernel for the problem's.
  int sm90_head_dim = 0;
  // Whether the sm90 kernel walks the BlockMask's 64-key blocks in pairs (needs_paired_walk for
  // that kernel's tile): the paired kernel runs it.
  bool sm90_paired_walk = false;
  sm90::LaunchArgs sm90_plan;    // its grid and views; launch_functor_flex sets the tile counter
  sm90::MergedWalks sm90_walks;  // a BlockMask's walks, built by launch_functor_flex
  // The sm80 kernel's split-KV (sm80_flex_splits; 1: unsplit) and the workspace of its partials,
  // which launch_functor_flex places.
  int sm80_splits = 1;
  void* sm80_workspace = nullptr;
};

// Everything checked before a launch of the functor kernels: the arguments (validate_arguments),
// the fields the functors replace, the sm80 flex kernel's limits (BlockMask block sizes, one
// tile, a varlen batch unsplit) and the device (validate_device). Then the kernel: sm90 where
// functor_sm90_rejects says nothing and auto does not leave the problem to sm80 (decode grids,
// sm90_flex_auto_declines), else sm80 with its split count; params.backend sm80 or sm90 forces
// one (sm90 fails with its reason where it cannot run the problem), other backends are refused.
Status prepare_functor_flex(const AttentionParams& params, FunctorKernels kernels, FunctorMods mods,
                            FunctorFlex* out);

// Why the sm90 flex kernel does not run `problem` with `kernels` on `device`, "" if it does: no
// sm90 kernel compiled, not an sm_90 GPU, a head dim other than 64 / 128 / 256, BlockMasks of
// 64-key blocks up to head dim 128 without the paired kernel, or what the kernel cannot run
// whatever its mods (sm90_flex_shape_rejects: strides the TMA cannot describe, ...).
const char* functor_sm90_rejects(const Problem& problem, const cudaDeviceProp& device,
                                 FunctorKernels kernels);

// The scratch the kernel of `plan` needs: sm90's tile counter (256 bytes), the sm80 split's
// partials, or nothing.
size_t functor_workspace_bytes(const FunctorFlex& plan);

// Enqueues the kernel of `plan` through launch(plan, context, stream), which returns a
// cudaError_t. It first points the plan at its scratch (functor_workspace_bytes; sm90's tile
// counter zeroed): in params.workspace when one is passed (it must hold that many bytes), else in
// a stream-ordered allocation freed after the launch. info (optional) gets the provider, "sm90"
// or "sm80".
using FunctorLaunchFn = int (*)(const FunctorFlex* plan, const void* context, cudaStream_t stream);
Status launch_functor_flex(FunctorFlex* plan, FunctorLaunchFn launch, const void* context,
                           RunInfo* info);

// The C entry points of a shared object that flashcore.jit_score_mod / jit_mask_mod compile.
// JitLaunchFn: launches the flex kernel that a plan of prepare_functor_flex names, with the
// snippets' captures (one 64-bit word each, in the order of their declaration); returns the
// launch's cudaError_t. JitHasSm90Fn: which sm90 kernels the object has (an object built for
// sm_90a), kJitSm90 for FunctorKernels::sm90 and kJitSm90Paired for ::sm90_paired, or'ed; 0 for
// none. kJitAbiVersion changes whenever FunctorFlex, Problem or these signatures do; it is part
// of the JIT cache key and the shared object reports it
// (flashcore_jit_abi_version), so a stale one is never called.
using JitLaunchFn = int (*)(const FunctorFlex* plan, const uint64_t* captures, cudaStream_t stream);
using JitHasSm90Fn = int (*)();
// The entry point of a jit_mask_mod's create_block_mask object: enqueues create_block_mask's
// builder for its mask into a BlockMask the library placed (flex::detail::prepare_block_mask),
// with the mask's captures; returns the launch's cudaError_t.
using JitBlockMaskFn = int (*)(const flex::BlockMask* out,
                               const flex::detail::BlockMaskArrays* arrays,
                               const uint64_t* captures, cudaStream_t stream);
inline constexpr int kJitAbiVersion = 6;
inline constexpr int kJitSm90 = 1;
inline constexpr int kJitSm90Paired = 2;

}  // namespace flashcore::detail
