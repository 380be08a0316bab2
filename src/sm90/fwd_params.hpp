// What the sm90 kernel receives: the problem as it indexes it (after GQA packing for decode),
// the output pointers and strides, the persistent schedule and the TMA descriptors. Passed
// as one __grid_constant__ struct: the TMA descriptors must live in parameter space. A varlen batch
// (cu_seqlens_q set) is batch sequences packed into one TMA batch: seqlen_q and seqlen_k are then
// the packed totals, and each tile binds its own sequence (sequence_view.hpp).
#pragma once

#include <cstdint>

#include "flashcore/mask.hpp"

namespace flashcore::sm90 {

struct FwdArgs {
  int batch;
  int heads;     // query heads as the kernel indexes them
  int kv_group;  // query heads per kv head
  int seqlen_q;
  int seqlen_k;
  int head_dim;  // the caller's; the instantiation's kHeadDim may be larger (zero-filled)
  // Varlen: sequence b is rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of the packed Q and O and
  // keys [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of K and V (AttentionParams' meaning); null
  // otherwise.
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;

  WindowMask<int> mask;  // also masks the key tail: visible() requires key < seqlen_k (varlen:
                         // bound to each sequence's lengths per tile)
  // Scores reach the softmax as raw dot products and the softmax folds scale * log2(e) into its
  // exp2 (exp_factor), unless prescale: softcap needs the scaled score and a scale <= 0 would flip
  // the max, so then scores become softcap(s * scale) * log2(e) first and exp_factor is 1
  // (common/score_scaling.hpp, shared with sm80).
  float scale_log2;
  bool prescale;
  float exp_factor;
  float softcap_in;  // with softcap: softcap_out * tanh(score * softcap_in)
  float softcap_out;

  void* o;
  int64_t o_batch, o_seq, o_head;
  // The consumers stage O in shared memory and store it with FwdParams::tma_o (unsplit, unpacked
  // problems whose O strides a TMA descriptor takes); otherwise each thread copies chunks out.
  bool o_by_tma;
  float* lse;  // [batch, heads, seqlen_q] natural log (varlen: [heads, total_q]), or null
  // Attention sinks' logits, fp32 [heads] (natural log), read by Variant::kSinks only: the plan
  // sets them for unsplit, unpacked, unclustered problems (sm90_fwd.cu); null otherwise.
  const float* sink_logits;

  // The persistent schedule (tile_scheduler.hpp).
  int num_m_blocks;
  int num_splits;  // > 1: each split writes fp32 partials that the combine kernel merges
  int head_group;  // (batch, head) pairs whose tiles run next to each other, sharing K/V in L2
  int num_tiles;
  int* tile_counter;  // the dynamic schedule's next tile past the first wave, or null (fixed)
  // Varlen, the listed kernel (Variant::kListed): the grid indices of the tiles that have rows,
  // listed before the launch (varlen_tiles.hpp), and how many; the producer's counter runs over
  // them. Null otherwise.
  const int* varlen_tiles;
  const int* varlen_tile_count;
  float* o_partial;    // [num_splits, batch, heads, seqlen_q, head_dim] fp32, normalized per split
  float* lse_partial;  // [num_splits, batch, heads, seqlen_q]
};

template <typename Traits>
struct FwdParams {
  FwdArgs args;
  typename Traits::TmaQ tma_q;
  typename Traits::TmaK tma_k;
  typename Traits::TmaV tma_v;
  typename Traits::TmaO tma_o;  // built only where args.o_by_tma
};

}  // namespace flashcore::sm90
