// prepare_functor_flex and launch_functor_flex (api/flex_functors.hpp): the functor kernels'
// checks, choice of kernel and launch around them, compiled once into the library. A .cu file
// because the sm80 flex tile's limits live in its kernel traits.
#include <string>

#include "api/flex_functors.hpp"
#include "api/validate.hpp"
#include "common/launch_status.hpp"
#include "common/status_message.hpp"
#include "flashcore/varlen.hpp"
#include "sm80/flex_fwd.hpp"
#include "sm80/flex_view.hpp"
#include "sm90/flex_fwd.hpp"
#include "sm90/flex_launch.hpp"

namespace flashcore::detail {

const char* functor_sm90_rejects(const Problem& problem, const cudaDeviceProp& device,
                                 FunctorKernels kernels) {
  if (!kernels.sm90) {
    return "is not compiled for these functors (compile them for sm_90a with "
           "FLASHCORE_RUN_FLEX_SM90, api/run_flex.cuh)";
  }
  if (device.major != 9 || device.minor != 0) {
    return "needs an sm_90 GPU (H100, H200): its code is built for sm_90a (wgmma, TMA)";
  }
  if (kernels.head_dim != 64 && kernels.head_dim != 128 && kernels.head_dim != 256) {
    return "runs functors compiled for head dim 64, 128 or 256";
  }
  // 64-key blocks under 128-key tiles run on the paired kernel (api/run_flex_sm90.cuh), which
  // run_flex and flashcore.jit compile where it fits the functors' state
  // (functor_sm90_paired_fits). The head dim 256 kernel's tiles have 64 keys, so every block size
  // it takes is whole tiles.
  const flex::BlockMask& block_mask = problem.params.flex.block_mask;
  if (!kernels.sm90_paired && block_mask.kv_block_size == sm90::kFlexPairedBlockKeys &&
      sm90::needs_paired_walk(block_mask, sm90::flex_tile_keys(kernels.head_dim))) {
    return "runs these functors' BlockMasks of kv_block_size a multiple of 128 up to head dim "
           "128: the paired kernel for 64-key blocks is not compiled for them (their state does "
           "not fit its shared memory, functor_sm90_paired_fits); 64-key blocks run on sm80";
  }
  return sm90_flex_shape_rejects(problem, kernels.head_dim);
}

Status prepare_functor_flex(const AttentionParams& params, FunctorKernels kernels, FunctorMods mods,
                            FunctorFlex* out) {
  if (Status s = validate_arguments(params); !s.ok()) return s;
  if (params.q.dtype != kernels.dtype) {
    return invalid_argument("q's dtype is not the one the flex kernel was compiled for");
  }
  if (params.head_dim > kernels.head_dim) {
    return invalid_argument(cat("head_dim ", params.head_dim, " exceeds the ", kernels.head_dim,
                                " the kernel was compiled for"));
  }
  if (mods.mask && (params.causal || params.window_left >= 0 || params.window_right >= 0 ||
                    params.flex.has_mask_mod())) {
    return invalid_argument(
        "the mask_mod is a functor here: leave causal, the window and flex.mask off (AND a "
        "flex::WindowMod into the functor)");
  }
  if (mods.score && (params.softcap != 0.f || params.flex.has_score_mod())) {
    return invalid_argument(
        "the score_mod is a functor here: leave softcap and flex.score_mod off (compose a "
        "flex::SoftcapScore into the functor)");
  }
  const flex::BlockMask& m = params.flex.block_mask;
  if (params.flex.has_block_mask() && (m.q_block_size % sm80::kFlexQBlockMultiple != 0 ||
                                       m.kv_block_size % sm80::kFlexBlockKV != 0)) {
    return {StatusCode::kUnsupported,
            "the flex kernel runs BlockMasks whose block sizes are multiples of 64; rebuild the "
            "BlockMask with such block sizes"};
  }
  if (params.tile == TileShape::kSmall) {
    return {StatusCode::kUnsupported, "the flex kernel runs one tile: pass tile auto or large"};
  }
  if (params.num_splits > 1 && is_varlen(params)) {
    return {StatusCode::kUnsupported,
            "the flex kernel runs varlen batches unsplit: pass num_splits 0 or 1"};
  }
  if (params.backend != Backend::kAuto && params.backend != Backend::kSm90 &&
      params.backend != Backend::kSm80) {
    return {StatusCode::kUnsupported,
            "functors of one's own run on the sm90 or sm80 flex kernel: pass backend auto, sm90 "
            "or sm80"};
  }
  cudaDeviceProp device{};
  if (Status s = validate_device(params, &device); !s.ok()) return s;
  out->problem = make_problem(params);
  out->sm90 = false;
  out->sm90_paired_walk = false;
  if (params.backend != Backend::kSm80) {
    const char* why = functor_sm90_rejects(out->problem, device, kernels);
    if (why[0] == '\0' && params.backend == Backend::kAuto) {
      why = sm90_flex_auto_declines(out->problem, device, /*builtin_mask=*/!mods.mask);
    }
    if (why[0] == '\0') {
      out->sm90 = true;
      out->sm90_head_dim = kernels.head_dim;
      out->sm90_paired_walk = sm90::needs_paired_walk(out->problem.params.flex.block_mask,
                                                      sm90::flex_tile_keys(kernels.head_dim));
      out->sm90_plan = sm90_flex_plan(out->problem, device, kernels.head_dim);
      return {};
    }
    if (params.backend == Backend::kSm90) {
      return {StatusCode::kUnsupported, std::string("the sm90 flex kernel ") + why};
    }
  }
  out->sm80_splits = sm80_flex_splits(out->problem, device, /*builtin_mask=*/!mods.mask);
  return {};
}

size_t functor_workspace_bytes(const FunctorFlex& plan) {
  return plan.sm90 ? sm90_flex_workspace_bytes(plan.problem, plan.sm90_head_dim)
                   : sm80_flex_split_bytes(plan.problem, plan.sm80_splits);
}

Status launch_functor_flex(FunctorFlex* plan, FunctorLaunchFn launch, const void* context,
                           RunInfo* info) {
  const AttentionParams& a = plan->problem.params;
  const cudaStream_t stream = a.stream;
  const char* what =
      plan->sm90 ? "sm90 flex_fwd_kernel (functors)" : "sm80 flex_fwd_kernel (functors)";
  // The sm90 kernel's tile counter and walks (or tile list), or the sm80 split's partials (run()
  // sizes the same scratch).
  const size_t needed = functor_workspace_bytes(*plan);
  void* workspace = a.workspace;
  if (needed > 0 && workspace != nullptr && a.workspace_bytes < needed) {
    return invalid_argument(
        cat("workspace_bytes is ", a.workspace_bytes, " but the ",
            plan->sm90 ? "sm90 flex kernel's tile counter and walks (or tile list)"
                       : "sm80 split's partials",
            " need ", needed, "; pass at least that or null to let run_flex allocate it"));
  }
  const bool owned = needed > 0 && workspace == nullptr;
  if (owned) {
    if (Status s = launch_status(cudaMallocAsync(&workspace, needed, stream),
                                 "allocating the flex kernel's workspace");
        !s.ok()) {
      return s;
    }
  }
  Status status;
  if (plan->sm90) {
    status = prepare_sm90_flex_workspace(plan->problem, plan->sm90_head_dim, workspace,
                                         &plan->sm90_plan, &plan->sm90_walks, stream);
  } else {
    plan->sm80_workspace = workspace;
  }
  if (status.ok()) {
    status = launch_status(static_cast<cudaError_t>(launch(plan, context, stream)), what);
  }
  if (owned) {
    const Status freed =
        launch_status(cudaFreeAsync(workspace, stream), "freeing the flex kernel's workspace");
    if (status.ok()) status = freed;
  }
  if (status.ok() && info != nullptr) {
    info->backend = plan->sm90 ? Backend::kSm90 : Backend::kSm80;
    info->provider = plan->sm90 ? "sm90" : "sm80";
  }
  return status;
}

}  // namespace flashcore::detail
