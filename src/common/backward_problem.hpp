// The validated backward problem as a backend sees it: BackwardParams with the forward's defaults
// resolved (softmax scale, causal folded into the window) and its mask and softcap functors, built
// by the forward's make_problem() so that the two passes cannot disagree on them.
#pragma once

#include "common/problem.hpp"
#include "flashcore/backward.hpp"

namespace flashcore::detail {

// The AttentionParams of the forward that params differentiates: sizes, options, and q, k, v, o
// and lse (the forward's validation checks them; the references take their sizes from it).
inline AttentionParams forward_params(const BackwardParams& params) {
  AttentionParams p;
  p.batch = params.batch;
  p.seqlen_q = params.seqlen_q;
  p.seqlen_k = params.seqlen_k;
  p.heads_q = params.heads_q;
  p.heads_kv = params.heads_kv;
  p.head_dim = params.head_dim;
  p.q = params.q;
  p.k = params.k;
  p.v = params.v;
  // Read here, never written: the forward's struct only has an output slot for them.
  p.o = {const_cast<void*>(params.o.data), params.o.dtype, params.o.strides};
  p.lse = const_cast<float*>(params.lse);
  p.softmax_scale = params.softmax_scale;
  p.causal = params.causal;
  p.window_left = params.window_left;
  p.window_right = params.window_right;
  p.softcap = params.softcap;
  p.cu_seqlens_q = params.cu_seqlens_q;
  p.cu_seqlens_k = params.cu_seqlens_k;
  p.max_seqlen_q = params.max_seqlen_q;
  p.max_seqlen_k = params.max_seqlen_k;
  p.flex = params.flex;
  return p;
}

struct BackwardProblem {
  BackwardParams params;
  float scale;               // softmax scale, default 1/sqrt(D) resolved
  WindowMask<int64_t> mask;  // causal folded in as right == 0
  Softcap softcap;

  int64_t group() const { return params.heads_q / params.heads_kv; }
  bool is_varlen() const { return params.cu_seqlens_q != nullptr; }
  // Runs the flex backward (varlen, or any FlexOptions part on) rather than the dense one.
  bool is_flex() const { return is_varlen() || params.flex.active(); }
};

// Assumes can_implement_backward() passed.
inline BackwardProblem make_backward_problem(const BackwardParams& params) {
  const Problem forward = make_problem(forward_params(params));
  return {params, forward.scale, forward.mask, forward.softcap};
}

}  // namespace flashcore::detail
