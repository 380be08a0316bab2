// The derivative of a score_mod, for the backward: dS with respect to the raw score is
// P (dP - D) times d score_mod(x) / dx at the forward's x. ScoreModGrad<Mod>::apply returns the
// forward's value (through the mod's own functor, so P is recomputed exactly as the forward
// computed it) and that slope. Only the built-ins have one: ALiBi and the relative bias add a
// constant (slope 1), softcap's slope is 1 - tanh^2 of its argument, recovered from its value
// (tanh = value / cap). A score_mod without a specialization has no backward. T is float in the
// kernels and double in the float64 reference (tests/support), which so shares the rule.
#pragma once

#include "flashcore/flex/builtin_mods.hpp"
#include "flashcore/flex/score_mods.hpp"

namespace flashcore::detail {

template <typename ScoreMod>
struct ScoreModGrad;  // no definition: that score_mod has no backward

template <>
struct ScoreModGrad<flex::NoScoreMod> {
  template <typename T>
  FLASHCORE_HOST_DEVICE static T apply(const flex::NoScoreMod&, T score, int, int, int, int,
                                       T* slope) {
    *slope = T(1);
    return score;
  }
};

template <>
struct ScoreModGrad<flex::BuiltinScoreMod> {
  template <typename T>
  FLASHCORE_HOST_DEVICE static T apply(const flex::BuiltinScoreMod& mod, T score, int b, int h,
                                       int q_idx, int kv_idx, T* slope) {
    const T value = mod(score, b, h, q_idx, kv_idx);
    T d = T(1);
    if (mod.softcap.cap > 0.f) {
      const T t = value / T(mod.softcap.cap);
      d = T(1) - t * t;
    }
    *slope = d;
    return value;
  }
};

}  // namespace flashcore::detail
