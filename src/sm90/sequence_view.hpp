// The sequence a tile's rows belong to, for the dense sm90 kernel's two sides. Batch entry b of a
// dense problem is rows [0, seqlen_q) of its own tensors; sequence b of a varlen batch is rows
// [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of the packed ones (one TMA batch), over keys
// [cu_seqlens_k[b], cu_seqlens_k[b + 1]), each clamped into the packed tensors
// (detail::flex_sequence), so arrays that break their contract never move a store outside O or
// LSE. The producer and the consumers read it from the same arrays, so they agree on every tile
// without telling each other.
//
// A varlen tile that runs past its sequence's last row reads the next sequence's rows of Q (or
// zeros past the last one), and a key block past its last key the next sequence's keys: the mask,
// bound to the sequence's lengths, hides those keys (visible() requires key < seqlen_k) and the
// epilogue stores no row at or past seqlen_q, so nothing of another sequence reaches an output.
#pragma once

#include "common/flex_sequence.hpp"
#include "sm90/fwd_params.hpp"

namespace flashcore::sm90 {

struct SequenceView {
  int q_start;           // rows of the packed Q and O before the sequence (0 when dense)
  int k_start;           // the same for K and V
  WindowMask<int> mask;  // bound to the sequence: its lengths are mask.seqlen_q and mask.seqlen_k
};

__device__ __forceinline__ bool is_varlen_batch(const FwdArgs& a) {
  return a.cu_seqlens_q != nullptr;
}

__device__ __forceinline__ SequenceView sequence_view(const FwdArgs& a, int batch) {
  if (!is_varlen_batch(a)) return {0, 0, a.mask};
  const detail::FlexSequence s =
      detail::flex_sequence(a.cu_seqlens_q, a.cu_seqlens_k, batch, a.seqlen_q, a.seqlen_k);
  return {s.q_start, s.k_start, a.mask.with_seqlens(s.seqlen_q, s.seqlen_k)};
}

// A varlen tile whose rows all lie past its sequence (the grid is planned for the longest one):
// neither side does anything for it. Never true for a dense problem, whose out-of-range cluster
// blocks (tile_scheduler.hpp) still take part in the K/V ring.
template <int kBlockM>
__device__ __forceinline__ bool past_sequence(const FwdArgs& a, const SequenceView& seq,
                                              int m_block) {
  return is_varlen_batch(a) && m_block * kBlockM >= seq.mask.seqlen_q;
}

// What the epilogue indexes for a tile of seq: a varlen sequence is batch 0 of tensors that start
// at its first row (LSE [heads, total_q] at its first entry; seqlen_q, the total, stays LSE's row
// stride), a dense problem the arguments as they are. Shared with the flex kernel.
template <typename Element>
__device__ __forceinline__ FwdArgs sequence_output(const FwdArgs& a, int q_start) {
  FwdArgs out = a;
  out.o = static_cast<Element*>(a.o) + q_start * a.o_seq;
  out.lse = a.lse != nullptr ? a.lse + q_start : nullptr;
  return out;
}

}  // namespace flashcore::sm90
