// The problem as the sm90 persistent kernel indexes it: sizes, the score scaling
// (common/score_scaling.hpp), outputs, and the query view (common/query_view.hpp: with GQA packing
// for decode the Q descriptor reads the packed rows through their strides directly). The schedule
// fields (tiles, splits, grid) are left for the planner: the backend's plan() in sm90_fwd.cu, or
// the lab's tuner (tools/bench/tune_plan.cpp) with a candidate's tile.
#pragma once

#include "common/problem.hpp"
#include "sm90/launch_args.hpp"

namespace flashcore::sm90 {

LaunchArgs kernel_view(const detail::Problem& problem);

// A varlen batch's inputs as the descriptors see them, one batch of every packed row: the caller's
// batch strides are ignored for packed tensors, and the descriptors still get valid ones. Shared by
// the persistent kernel's plan and the flex kernel's.
void use_packed_batch_strides(const AttentionParams& a, LaunchArgs* in);

}  // namespace flashcore::sm90
