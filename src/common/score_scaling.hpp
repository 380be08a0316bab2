// How scores reach the softmax in the tensor-core backends (sm80, sm90). Without softcap (and with
// a positive scale) they stay raw dot products: max commutes with a positive scale, so the softmax
// folds scale * log2(e) into its one exp2 FFMA per element (exp_factor = scale_log2). Softcap
// needs the scaled score, and a scale <= 0 would flip the max, so then prescale is set, the kernel
// takes the scores to the log2 domain first, and exp_factor is 1.
#pragma once

#include "common/online_softmax.hpp"
#include "common/problem.hpp"

namespace flashcore::detail {

struct ScoreScaling {
  float scale;
  float scale_log2;  // scale * log2(e)
  bool prescale;
  float exp_factor;
};

inline ScoreScaling score_scaling(const Problem& problem) {
  const float scale_log2 = problem.scale * kLog2e;
  const bool prescale = problem.softcap.cap > 0.f || !(scale_log2 > 0.f);
  return {problem.scale, scale_log2, prescale, prescale ? 1.f : scale_log2};
}

}  // namespace flashcore::detail
