// The query side of a problem as a kernel indexes it, shared by the sm80 and sm90 backends:
// heads, rows and strides after GQA packing for decode, and the window clamped to int.
//
// Decode with GQA (one query row, no left window) packs the group's query heads into the row
// dimension, as FlashAttention-2 does: query head kv*G + j becomes row j of kv head kv, so one CTA
// reads each K/V tile once for the whole group instead of G times. With Sq == 1 the bottom-right
// causal/right window lets row 0 see every key, so the packed rows need no mask; a left window
// depends on the row and disables packing. LSE [B, Hq, 1] is already [B, Hkv, G] contiguous. A
// varlen batch (seqlen_q is then the packed total) is never packed.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/problem.hpp"
#include "flashcore/varlen.hpp"

namespace flashcore::detail {

struct QueryView {
  int heads;     // query heads as the kernel indexes them
  int kv_group;  // query heads per kv head
  int seqlen_q;  // query rows per head
  int64_t q_seq, q_head;
  int64_t o_seq, o_head;
  WindowMask<int> mask;  // sizes in int; a side beyond the sequence is unbounded (-1)
};

// A side of the window beyond this many keys is the same as unbounded; clamping keeps int math.
inline int clamp_window(int64_t side, int64_t unbounded_at) {
  return side < 0 ? -1 : static_cast<int>(std::min(side, unbounded_at));
}

inline QueryView query_view(const Problem& problem) {
  const AttentionParams& a = problem.params;
  const int64_t group = problem.group();
  const int seqlen_k = static_cast<int>(a.seqlen_k);
  if (a.seqlen_q == 1 && group > 1 && problem.mask.left < 0 && !is_varlen(a)) {
    const int rows = static_cast<int>(group);
    return {static_cast<int>(a.heads_kv),
            1,
            rows,
            a.q.strides.head,
            a.q.strides.head * group,
            a.o.strides.head,
            a.o.strides.head * group,
            WindowMask<int>{rows, seqlen_k, -1, -1}};
  }
  const int seqlen_q = static_cast<int>(a.seqlen_q);
  return {static_cast<int>(a.heads_q),
          static_cast<int>(group),
          seqlen_q,
          a.q.strides.seq,
          a.q.strides.head,
          a.o.strides.seq,
          a.o.strides.head,
          WindowMask<int>{seqlen_q, seqlen_k, clamp_window(problem.mask.left, a.seqlen_k),
                          clamp_window(problem.mask.right, a.seqlen_q)}};
}

}  // namespace flashcore::detail
