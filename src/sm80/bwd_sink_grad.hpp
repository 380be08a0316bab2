// The attention sinks' gradient (flashcore/flex/sinks.hpp), for both backwards. A sink logit only
// scales its head's rows: P_ij = exp(s_ij - LSE_i) with d LSE_i / d sink = exp(sink - LSE_i), so
//
//   d loss / d sink[h] = -sum_i exp(sink[h] - LSE_i) * D_i,  D_i = rowsum(dO * O)_i,
//
// over every row i of head h (every batch entry or sequence). The preprocess has already put D and
// LSE (log2 domain, +inf on rows without a key or past a sequence) in the workspace, so this is a
// reduction over those two arrays: one CTA per query head, each thread's rows in a fixed order and
// the CTA's sum by cub::BlockReduce, so the result has the same bits run to run (as deterministic
// mode's gradients do). Written, not accumulated.
#pragma once

#include <cuda_runtime_api.h>

#include "sm80/bwd_params.hpp"

namespace flashcore::sm80 {

// Enqueues d_sinks[h] (fp32 [heads_q]) for the workspace p describes, after the preprocess has
// written it. sink_logits: the forward's fp32 [heads_q].
cudaError_t launch_sink_grad(const BwdParams& p, const float* sink_logits, float* d_sinks,
                             cudaStream_t stream);

}  // namespace flashcore::sm80
