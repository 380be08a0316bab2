// What the sm80 backward kernels receive (bwd_preprocess.cuh, bwd_kernel.cuh, bwd_convert.cuh):
// the problem with int sizes and int64 element strides, and the workspace arrays between them.
#pragma once

#include <cstdint>

#include "common/flex_sequence.hpp"
#include "flashcore/flex/block_mask_layout.hpp"
#include "flashcore/flex/builtin_mods.hpp"
#include "flashcore/mask.hpp"

namespace flashcore::sm80 {

struct BwdParams {
  const void* q;
  const void* k;
  const void* v;
  const void* o;
  const void* d_o;
  const float* lse;  // the forward's [batch, heads_q, seqlen_q] ([heads_q, total_q]), natural log
  void* dq;
  void* dk;
  void* dv;

  int64_t q_batch, q_seq, q_head;
  int64_t k_batch, k_seq, k_head;
  int64_t v_batch, v_seq, v_head;
  int64_t o_batch, o_seq, o_head;
  int64_t do_batch, do_seq, do_head;
  int64_t dq_batch, dq_seq, dq_head;
  int64_t dk_batch, dk_seq, dk_head;
  int64_t dv_batch, dv_seq, dv_head;

  // Workspace, rows padded to seqlen_q_rounded (a multiple of the query block) so that the main
  // kernel copies whole blocks of them without bounds tests (varlen: workspace_row0 below):
  float* dq_accum;  // [batch, heads_q, seqlen_q_rounded, head_dim] fp32 dQ / scale, zeroed
  float* lse_log2;  // [batch, heads_q, seqlen_q_rounded] LSE * log2(e); +inf where no key is seen
  float* delta;     // [batch, heads_q, seqlen_q_rounded] D = rowsum(dO * O); 0 past seqlen_q
  // Deterministic mode: [batch, heads_q, num_m_blocks] counts of the key blocks that have added
  // their dQ to each query block (zeroed); null otherwise.
  int* dq_semaphore;
  // The sm90 hd256 kernel's persistent schedule: the next tile past the first wave (zeroed with
  // dq_accum). Unused by the other backwards.
  int* tile_counter;

  int batch;
  int heads_q;
  int heads_kv;
  int kv_group;  // query heads per kv head
  int seqlen_q;
  int seqlen_k;
  int seqlen_q_rounded;
  int num_m_blocks;
  int num_n_blocks;

  WindowMask<int> mask;  // also masks the key tail: visible() requires key < seqlen_k
  float scale;           // softmax scale: dK and dQ are scale * dS^T Q and scale * dS K
  float scale_log2;      // scale * log2(e): raw scores to the log2 domain without softcap
  bool softcapped;
  float softcap_in;   // scale / cap: the tanh argument from a raw score
  float softcap_out;  // cap * log2(e): tanh to the log2 domain

  // Varlen (BackwardParams' meaning), or null: then seqlen_q/k are the totals, batch counts the
  // sequences, num_m_blocks covers max_seqlen_q, and the workspace rows of (sequence b, head h)
  // start at workspace_row0.
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  int max_seqlen_q, max_seqlen_k;  // what the grid and the workspace cover (varlen only)
  int block_m;                     // the query block the workspace rows are padded to
};

// Sequence b of a varlen backward (batch entry b otherwise), clamped into the packed tensors
// (detail::packed_rows) and to max_seqlen_q and max_seqlen_k: the grid has key blocks for
// max_seqlen_k keys and the workspace query blocks for max_seqlen_q rows, and deterministic dQ
// waits for every key block that sees a query block, so a sequence longer than the grid (an
// array that breaks its contract) would otherwise write past the semaphores or wait forever.
FLASHCORE_HOST_DEVICE detail::FlexSequence bwd_sequence(const BwdParams& p, int batch) {
  detail::FlexSequence s =
      detail::flex_sequence(p.cu_seqlens_q, p.cu_seqlens_k, batch, p.seqlen_q, p.seqlen_k);
  if (p.cu_seqlens_q != nullptr) {
    s.seqlen_q = s.seqlen_q < p.max_seqlen_q ? s.seqlen_q : p.max_seqlen_q;
    s.seqlen_k = s.seqlen_k < p.max_seqlen_k ? s.seqlen_k : p.max_seqlen_k;
  }
  return s;
}

// The first workspace row (of lse_log2 and delta; of dq_accum times head_dim) of (batch, head).
// Dense: [batch, heads_q, seqlen_q_rounded]. Varlen: [heads_q, seqlen_q_rounded] where sequence b
// starts at (cu_seqlens_q[b] + b * block_m) rounded down to block_m: a whole number of blocks past
// the end of sequence b - 1's rows (FlashAttention-2's padding), so every sequence's blocks are
// 16-byte aligned and whole; seqlen_q_rounded >= total_q + batch * block_m.
FLASHCORE_HOST_DEVICE int64_t workspace_row0(const BwdParams& p, int batch, int head) {
  if (p.cu_seqlens_q == nullptr) {
    return (static_cast<int64_t>(batch) * p.heads_q + head) * p.seqlen_q_rounded;
  }
  const int64_t first_row = detail::packed_rows(p.cu_seqlens_q, batch, p.seqlen_q).start;
  const int64_t start = (first_row + int64_t{batch} * p.block_m) / p.block_m * p.block_m;
  return static_cast<int64_t>(head) * p.seqlen_q_rounded + start;
}

// Varlen: the sequence whose workspace rows (workspace_row0's layout: each sequence padded to whole
// query blocks) hold workspace row `row` of every head, and the row's index in that sequence;
// batch -1 for the rows no sequence has (a block between two sequences where the first one's
// length is a whole number of blocks, and the rounding past the last). The preprocess and convert
// kernels run a varlen batch over its workspace rows this way rather than over max_seqlen_q rows of
// every sequence, whose CTAs past a shorter sequence's rows had nothing to do: one 8192-token
// sequence beside 64 of 128 tokens took the preprocess 655 us against 25 us for the long sequence
// alone (H200, docs/perf.md session 28). Sequences start in increasing order (each one a whole
// number of blocks past the previous one's rows), so a binary search finds the last one starting
// at or before row. A cu_seqlens_q that breaks its contract (decreasing) may leave rows unowned;
// the rows a search finds are still that sequence's, inside the workspace. The owner keeps what
// the search bound (the sequence and its first workspace row), which its kernels use rather than
// read cu_seqlens again.
struct WorkspaceRowOwner {
  int batch;                 // -1: none
  int row;                   // in the sequence
  detail::FlexSequence seq;  // bwd_sequence(p, batch)
  int64_t start;             // workspace_row0(p, batch, 0)

  // workspace_row0(p, batch, head).
  FLASHCORE_HOST_DEVICE int64_t row0(const BwdParams& p, int head) const {
    return static_cast<int64_t>(head) * p.seqlen_q_rounded + start;
  }
};
FLASHCORE_HOST_DEVICE WorkspaceRowOwner workspace_row_owner(const BwdParams& p, int64_t row) {
  int lo = 0, hi = p.batch - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (workspace_row0(p, mid, 0) <= row) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  WorkspaceRowOwner owner{-1, 0, bwd_sequence(p, lo), workspace_row0(p, lo, 0)};
  const int64_t padded = (int64_t{owner.seq.seqlen_q} + p.block_m - 1) / p.block_m * p.block_m;
  if (row < owner.start || row >= owner.start + padded) return owner;
  owner.batch = lo;
  owner.row = static_cast<int>(row - owner.start);
  return owner;
}

// What the flex backward receives: the dense view (sizes, strides, workspace, varlen arrays) and
// the forward's mods, with the window ANDed into the mask and softcap composed last into the
// score_mod (common/flex_problem.hpp), and its BlockMask.
template <typename Mask, typename ScoreMod>
struct BwdFlexParams {
  BwdParams bwd;
  Mask mask;  // bound to each sequence's lengths in the kernel
  ScoreMod score_mod;
  flex::BlockMask block_mask;  // kv_num_blocks null: none
};
using BuiltinBwdFlexParams = BwdFlexParams<flex::BuiltinMask, flex::BuiltinScoreMod>;

}  // namespace flashcore::sm80
