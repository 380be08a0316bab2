// Where one sequence of a flex problem lives: its first query and key rows in the packed tensors
// of a varlen batch (cu_seqlens, AttentionParams' meaning), or row 0 of batch entry b otherwise,
// and its lengths. Shared by every kernel that reads cu_seqlens.
#pragma once

#include <cstdint>

#include "flashcore/mask.hpp"

namespace flashcore::detail {

struct FlexSequence {
  int q_start, k_start;  // rows before the sequence in the packed q/o and k/v (0 when not varlen)
  int seqlen_q, seqlen_k;
};

// Rows [cu[b], cu[b + 1]) of a packed tensor of total rows, clamped into [0, total]. run() does
// not read cu_seqlens (that would cost a copy and a synchronization, flashcore/varlen.hpp), so an
// array that breaks its contract (past the total, negative, decreasing) reaches the kernels: the
// clamp keeps every read and write of theirs inside the tensors, at the price of wrong numbers
// for such input, which check_varlen_on_device reports.
struct PackedRows {
  int start, length;
};
FLASHCORE_HOST_DEVICE PackedRows packed_rows(const int32_t* cu, int b, int total) {
  const int start = cu[b] < 0 ? 0 : (cu[b] > total ? total : cu[b]);
  const int end = cu[b + 1] < start ? start : (cu[b + 1] > total ? total : cu[b + 1]);
  return {start, end - start};
}

// seqlen_q and seqlen_k are the problem's: the packed totals of a varlen batch.
FLASHCORE_HOST_DEVICE FlexSequence flex_sequence(const int32_t* cu_seqlens_q,
                                                 const int32_t* cu_seqlens_k, int b, int seqlen_q,
                                                 int seqlen_k) {
  if (cu_seqlens_q == nullptr) return {0, 0, seqlen_q, seqlen_k};
  const PackedRows q = packed_rows(cu_seqlens_q, b, seqlen_q);
  const PackedRows k = packed_rows(cu_seqlens_k, b, seqlen_k);
  return {q.start, k.start, q.length, k.length};
}

}  // namespace flashcore::detail
