// The validated problem as every backend sees it: AttentionParams with its defaults resolved
// (softmax scale, causal folded into the window) and the mask/score functors built once.
#pragma once

#include <cmath>

#include "flashcore/attention.hpp"
#include "flashcore/mask.hpp"

namespace flashcore::detail {

struct Problem {
  AttentionParams params;
  float scale;               // softmax scale, default 1/sqrt(D) resolved
  WindowMask<int64_t> mask;  // causal folded in as right == 0
  Softcap softcap;

  int64_t group() const { return params.heads_q / params.heads_kv; }
};

inline float resolved_scale(const AttentionParams& p) {
  return p.softmax_scale != 0.f ? p.softmax_scale : 1.f / std::sqrt(static_cast<float>(p.head_dim));
}

// Assumes can_implement() passed (causal and window_right are consistent).
inline Problem make_problem(const AttentionParams& p) {
  const int64_t right = p.causal ? 0 : p.window_right;
  return Problem{p, resolved_scale(p),
                 WindowMask<int64_t>{p.seqlen_q, p.seqlen_k, p.window_left, right},
                 Softcap{p.softcap}};
}

}  // namespace flashcore::detail
