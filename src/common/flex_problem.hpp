// The params' built-in mods as every flex kernel runs them: the window (causal / window_left /
// window_right, bound per sequence in the kernels) ANDed into the mask, and softcap applied last,
// after ALiBi and the bias.
#pragma once

#include "common/problem.hpp"
#include "flashcore/flex/builtin_mods.hpp"

namespace flashcore::detail {

inline flex::BuiltinMask builtin_mask(const Problem& problem) {
  flex::BuiltinMask mask = problem.params.flex.mask;
  mask.window = problem.mask;
  return mask;
}
inline flex::BuiltinScoreMod builtin_score_mod(const Problem& problem) {
  flex::BuiltinScoreMod score_mod = problem.params.flex.score_mod;
  score_mod.softcap.cap = problem.params.softcap;
  return score_mod;
}

}  // namespace flashcore::detail
