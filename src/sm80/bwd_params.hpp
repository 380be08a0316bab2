// What the sm80 backward kernels receive (bwd_preprocess.cuh, bwd_kernel.cuh, bwd_convert.cuh):
// the problem with int sizes and int64 element strides, and the workspace arrays between them.
#pragma once

#include <cstdint>

#include "flashcore/mask.hpp"

namespace flashcore::sm80 {

struct BwdParams {
  const void* q;
  const void* k;
  const void* v;
  const void* o;
  const void* d_o;
  const float* lse;  // the forward's [batch, heads_q, seqlen_q], natural log
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
  // kernel copies whole blocks of them without bounds tests:
  float* dq_accum;  // [batch, heads_q, seqlen_q_rounded, head_dim] fp32 dQ / scale, zeroed
  float* lse_log2;  // [batch, heads_q, seqlen_q_rounded] LSE * log2(e); +inf where no key is seen
  float* delta;     // [batch, heads_q, seqlen_q_rounded] D = rowsum(dO * O); 0 past seqlen_q
  // Deterministic mode: [batch, heads_q, num_m_blocks] counts of the key blocks that have added
  // their dQ to each query block (zeroed); null otherwise.
  int* dq_semaphore;

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
};

}  // namespace flashcore::sm80
