// Attention sinks (gpt-oss, StreamingLLM's learned variant): one learned logit per query head that
// joins every row's softmax denominator without a value, so a row can put weight "nowhere":
//
//   O[i]   = sum_j exp(s_ij - m) v_j / (sum_j exp(s_ij - m) + exp(sink[h] - m))
//   LSE[i] = log(sum_j exp(s_ij) + exp(sink[h]))
//
// with s_ij the scores after score_mod and masking (natural-log domain, scale applied). It is not a
// score_mod: it touches no (q, kv) pair, only each row's normalization, so kernels add it once per
// row when they finish the softmax (after any split-KV merge, never per split). The LSE it reports
// includes the sink, which is what a backward pass needs. A row that sees no key has O = 0 and
// LSE = sink[h] (-inf when the sink is -inf, as for a fully masked row without sinks).
#pragma once

#include "flashcore/mask.hpp"

namespace flashcore::flex {

struct AttentionSinks {
  const float* logits = nullptr;  // fp32 [Hq]; null: no sinks

  FLASHCORE_HOST_DEVICE bool enabled() const { return logits != nullptr; }
  FLASHCORE_HOST_DEVICE float logit(int h) const { return logits[h]; }
};

}  // namespace flashcore::flex
