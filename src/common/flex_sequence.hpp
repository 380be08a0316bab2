// Where one sequence of a flex problem lives: its first query and key rows in the packed tensors
// of a varlen batch (cu_seqlens, AttentionParams' meaning), or row 0 of batch entry b otherwise,
// and its lengths. Shared by the flex kernels.
#pragma once

#include <cstdint>

#include "flashcore/mask.hpp"

namespace flashcore::detail {

struct FlexSequence {
  int q_start, k_start;  // rows before the sequence in the packed q/o and k/v (0 when not varlen)
  int seqlen_q, seqlen_k;
};

FLASHCORE_HOST_DEVICE FlexSequence flex_sequence(const int32_t* cu_seqlens_q,
                                                 const int32_t* cu_seqlens_k, int b, int seqlen_q,
                                                 int seqlen_k) {
  if (cu_seqlens_q == nullptr) return {0, 0, seqlen_q, seqlen_k};
  const int q_start = cu_seqlens_q[b], k_start = cu_seqlens_k[b];
  return {q_start, k_start, cu_seqlens_q[b + 1] - q_start, cu_seqlens_k[b + 1] - k_start};
}

}  // namespace flashcore::detail
