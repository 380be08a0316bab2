// Features the API accepts and validates before every backend runs them. Each backend's rejects()
// asks here first, and drops the call once its kernels implement the feature.
#pragma once

#include "common/problem.hpp"
#include "flashcore/varlen.hpp"

namespace flashcore::detail {

// Whether the problem needs the flex kernels: a varlen batch, or any FlexAttention part on
// (flashcore/flex/options.hpp). Dense problems without them take the dense kernels.
inline bool needs_flex_kernel(const Problem& problem) {
  return is_varlen(problem.params) || problem.params.flex.active();
}

// "" when the problem needs no flex kernel, else the reason a backend without them gives. (The
// name is older than the flex kernels: varlen was the first feature behind this gate.)
inline const char* rejects_varlen(const Problem& problem) {
  if (!needs_flex_kernel(problem)) return "";
  return is_varlen(problem.params)
             ? "has no varlen kernel (cu_seqlens_q/k): varlen and flex mods run on the sm90 and "
               "sm80 backends (backend auto, sm90 or sm80)"
             : "has no flex kernel (mask_mod, score_mod, BlockMask, sinks): flex mods run on the "
               "sm90 and sm80 backends (backend auto, sm90 or sm80)";
}

}  // namespace flashcore::detail
