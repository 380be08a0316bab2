// The sm90 flex kernel (sm90/flex_kernel.cuh: persistent, warp-specialized, TMA and wgmma) for
// functors of one's own: launch_functor_sm90 enqueues it for a plan of prepare_functor_flex.
// run_flex (api/run_flex.cuh) includes this where FLASHCORE_RUN_FLEX_SM90 is set (CMake's
// flashcore::flex_kernels sets it for targets with 90a among their CUDA_ARCHITECTURES), and
// flashcore.jit compiles it into the objects it builds for sm_90a. The kernel is sm_90a code: a
// file including this must be compiled for sm_90a (and may add other architectures).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <cutlass/numeric_types.h>

#include <type_traits>

#include "api/flex_functors.hpp"
#include "sm90/flex_kernel.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error \
    "the sm90 flex kernel is sm_90a code: compile for sm_90a only (nvcc -gencode=arch=compute_90a,code=sm_90a, CMake 90a); plain sm_90 or compute_90 (which nvcc 13's -arch=sm_90a also emits) cannot hold it"
#endif

namespace flashcore::detail {

#if defined(__CUDA_ARCH_LIST__)
// Whether this compile has sm_90 device code (nvcc's architecture list, the same in every pass):
// without it the kernel would be an empty stub that a newer GPU could run from PTX.
inline constexpr int kCompiledArchitectures[] = {__CUDA_ARCH_LIST__};
constexpr bool compiles_sm90() {
  for (const int arch : kCompiledArchitectures) {
    if (arch == 900) return true;
  }
  return false;
}
static_assert(compiles_sm90(),
              "api/run_flex_sm90.cuh needs sm_90a among the architectures this file is compiled "
              "for; without it leave FLASHCORE_RUN_FLEX_SM90 unset (run_flex then runs sm80)");
#endif

template <typename Element>
using Sm90Element =
    std::conditional_t<std::is_same_v<Element, __half>, cutlass::half_t, cutlass::bfloat16_t>;

// Whether the sm90 flex kernel is built for these functors: head dims 64, 128 and 256 (its
// tiles), and the tile state of both consumer warpgroups (the mods bound to a sequence) fits its
// shared memory.
template <typename Element, int kHeadDim, typename Mask, typename ScoreMod>
constexpr bool functor_sm90_fits() {
  if constexpr (kHeadDim != 64 && kHeadDim != 128 && kHeadDim != 256) {
    return false;
  } else {
    using Traits = sm90::FlexTraits<Sm90Element<Element>, kHeadDim>;
    return sm90::flex_smem_bytes<Traits, Mask, ScoreMod, /*kPaired=*/false>() <=
           Traits::kSmemLimitBytes;
  }
}

// Whether the paired sm90 flex kernel (two 64-key BlockMask blocks to each 128-key step,
// sm90/flex_load.hpp) is built for these functors beside the unpaired one: the kernels of 128-key
// tiles (head dims 64 and 128), with the paired walk's step words in shared memory.
template <typename Element, int kHeadDim, typename Mask, typename ScoreMod>
constexpr bool functor_sm90_paired_fits() {
  if constexpr (!functor_sm90_fits<Element, kHeadDim, Mask, ScoreMod>()) {
    return false;
  } else {
    using Traits = sm90::FlexTraits<Sm90Element<Element>, kHeadDim>;
    if constexpr (!sm90::kHasPairedKernels<Traits>) {
      return false;
    } else {
      return sm90::flex_smem_bytes<Traits, Mask, ScoreMod, /*kPaired=*/true>() <=
             Traits::kSmemLimitBytes;
    }
  }
}

// Enqueues one walk's sm90 flex kernel for (Element, kHeadDim, Mask, ScoreMod): the paired one
// where kPaired (plan.sm90_paired_walk), else the unpaired one; plan.sm90 is set and its tile
// counter zeroed (launch_functor_flex). A BlockMask's walks are built (launch_functor_flex) for
// the kernel's tile, so 64-row query blocks merge as in the library's kernels. flashcore.jit
// compiles the two in files of their own, which nvcc builds in parallel.
template <typename Element, int kHeadDim, bool kPaired, typename Mask, typename ScoreMod>
cudaError_t launch_functor_sm90_walk(const FunctorFlex& plan, const Mask& mask,
                                     const ScoreMod& score_mod, cudaStream_t stream) {
  static_assert(std::is_same_v<Element, __half> || std::is_same_v<Element, __nv_bfloat16>,
                "Element is __half or __nv_bfloat16");
  static_assert(functor_sm90_fits<Element, kHeadDim, Mask, ScoreMod>(),
                "the sm90 flex kernel runs head dims 64, 128 and 256, with mods that fit its "
                "shared memory (functor_sm90_fits)");
  static_assert(!kPaired || functor_sm90_paired_fits<Element, kHeadDim, Mask, ScoreMod>(),
                "the paired sm90 flex kernel runs head dims 64 and 128, with mods that fit its "
                "shared memory (functor_sm90_paired_fits)");
  using Traits = sm90::FlexTraits<Sm90Element<Element>, kHeadDim>;
  const AttentionParams& a = plan.problem.params;
  const sm90::FlexArgs<Mask, ScoreMod> flex{
      mask,         score_mod,      plan.problem.scale, a.flex.block_mask,
      a.flex.sinks, a.cu_seqlens_q, a.cu_seqlens_k,     plan.sm90_walks};
  return sm90::launch_flex_kernel<Traits, kPaired>(plan.sm90_plan, flex, stream);
}

// Enqueues the sm90 flex kernel that plan's walk needs (run_flex compiles both walks' kernels
// where the paired one fits).
template <typename Element, int kHeadDim, typename Mask, typename ScoreMod>
cudaError_t launch_functor_sm90(const FunctorFlex& plan, const Mask& mask,
                                const ScoreMod& score_mod, cudaStream_t stream) {
  if constexpr (functor_sm90_paired_fits<Element, kHeadDim, Mask, ScoreMod>()) {
    if (plan.sm90_paired_walk) {
      return launch_functor_sm90_walk<Element, kHeadDim, true>(plan, mask, score_mod, stream);
    }
  }
  return launch_functor_sm90_walk<Element, kHeadDim, false>(plan, mask, score_mod, stream);
}

}  // namespace flashcore::detail
