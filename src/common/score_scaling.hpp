// How scores reach the softmax in the tensor-core backends (sm80, sm90). Without softcap (and with
// a positive scale) they stay raw dot products: max commutes with a positive scale, so the softmax
// folds scale * log2(e) into its one exp2 FFMA per element (exp_factor = scale_log2). Softcap
// needs the scaled score, and a scale <= 0 would flip the max, so then prescale is set, the kernel
// takes the scores to the log2 domain first, and exp_factor is 1. With softcap that is
// softcap_out * tanh(score * softcap_in) (= cap * tanh(score * scale / cap) * log2(e)): two
// multiplies around the tanh instead of a division per element.
#pragma once

#include "common/online_softmax.hpp"
#include "common/problem.hpp"

namespace flashcore {

// tanh.approx.f32: one MUFU op, max relative error 2^-10.99 (PTX ISA), below bf16's precision of
// the scores it caps. tanhf is a long sequence that needs registers the softcap variant of the
// sm90 hd256 kernel does not have (it spilled); FlashAttention-2 and -3 use the same instruction.
__device__ __forceinline__ float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace flashcore

namespace flashcore::detail {

struct ScoreScaling {
  float scale;
  float scale_log2;  // scale * log2(e)
  bool prescale;
  float exp_factor;
  float softcap_in;   // scale / cap
  float softcap_out;  // cap * log2(e)
};

inline ScoreScaling score_scaling(const Problem& problem) {
  const float scale_log2 = problem.scale * kLog2e;
  const bool prescale = problem.softcap.cap > 0.f || !(scale_log2 > 0.f);
  const float cap = problem.softcap.cap;
  return {problem.scale,
          scale_log2,
          prescale,
          prescale ? 1.f : scale_log2,
          cap > 0.f ? problem.scale / cap : 0.f,
          cap * kLog2e};
}

}  // namespace flashcore::detail
