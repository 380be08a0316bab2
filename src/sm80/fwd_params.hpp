// What the sm80 kernels receive: the problem as the kernel sees it (after GQA packing for
// decode, see launch), int sizes, int64 element strides, and the split-KV workspace.
#pragma once

#include <cstdint>

#include "flashcore/mask.hpp"

namespace flashcore::sm80 {

struct FwdParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;  // [batch, heads, seqlen_q] natural log, or null

  int64_t q_batch, q_seq, q_head;
  int64_t k_batch, k_seq, k_head;
  int64_t v_batch, v_seq, v_head;
  int64_t o_batch, o_seq, o_head;

  int batch;
  int heads;     // query heads as the kernel indexes them
  int kv_group;  // query heads per kv head
  int seqlen_q;
  int seqlen_k;

  WindowMask<int> mask;  // also masks the key tail: visible() requires key < seqlen_k
  float scale;           // softmax scale, used with softcap
  float scale_log2;      // scale * log2(e)
  Softcap softcap;
  // How scores reach the softmax. Without softcap (and with a positive scale) they stay raw dot
  // products: max commutes with a positive scale, so the softmax folds scale * log2(e) into its
  // one exp2 FFMA per element (exp_factor = scale_log2). Softcap needs the scaled score, and a
  // scale <= 0 would flip the max, so then prescale is set, the kernel takes the scores to the
  // log2 domain first, and exp_factor is 1. Host-computed: in the kernel both stay constant-bank
  // operands instead of taking registers.
  bool prescale;
  float exp_factor;

  int num_m_blocks;
  int num_splits;      // 1: write O and LSE directly; > 1: write partials for the combine kernel
  float* o_partial;    // [num_splits, batch, heads, seqlen_q, head_dim] fp32, normalized per split
  float* lse_partial;  // [num_splits, batch, heads, seqlen_q] natural-log LSE of each split
};

}  // namespace flashcore::sm80
