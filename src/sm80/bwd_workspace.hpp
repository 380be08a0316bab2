// The backward's workspace and the kernel view of a problem (sm80::BwdParams), shared by the sm80
// and sm90 backwards: both run the same preprocess (bwd_preprocess.cuh) and dQ convert
// (bwd_convert.cuh) kernels around their main kernel, so they lay the workspace out alike and
// differ only in the query block its rows are padded to and the key block of the grid.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/backward_problem.hpp"
#include "common/query_view.hpp"
#include "common/score_scaling.hpp"
#include "common/workspace_align.hpp"
#include "sm80/bwd_params.hpp"

namespace flashcore::detail {

// What the sm90 backward's cut tiles need (sm90/bwd_tail_split.hpp): slots of slot_floats fp32
// partial sums and one arrival counter each. None for the sm80 backward.
struct KeyGradSlots {
  size_t slots = 0;
  size_t slot_floats = 0;
};

// Where the workspace arrays of BwdParams lie, in bytes from its start; key_tile_list: the sm90
// backward's list of a varlen batch's key tiles (sm90/bwd_key_tiles.hpp), key_tile_list_bytes of
// it (none for the sm80 backward).
struct WorkspaceLayout {
  int64_t seqlen_q_rounded;
  int64_t num_m_blocks;
  size_t dq_accum, tile_counter, key_grad_arrivals, key_grad_partials, lse_log2, delta, semaphore;
  size_t key_tile_list;
  size_t total;
};
inline WorkspaceLayout workspace_layout(const BackwardProblem& problem, int block_m,
                                        KeyGradSlots key_grads = {},
                                        size_t key_tile_list_bytes = 0) {
  const BackwardParams& a = problem.params;
  WorkspaceLayout w{};
  size_t rows = 0;
  if (a.cu_seqlens_q != nullptr) {
    // Varlen: [heads_q, seqlen_q_rounded] with every sequence padded to whole blocks
    // (sm80::workspace_row0); the grid covers the longest sequence.
    w.num_m_blocks = (a.max_seqlen_q + block_m - 1) / block_m;
    w.seqlen_q_rounded = (a.seqlen_q + a.batch * block_m + block_m - 1) / block_m * block_m;
    rows = static_cast<size_t>(a.heads_q * w.seqlen_q_rounded);
  } else {
    w.num_m_blocks = (a.seqlen_q + block_m - 1) / block_m;
    w.seqlen_q_rounded = w.num_m_blocks * block_m;
    rows = static_cast<size_t>(a.batch * a.heads_q * w.seqlen_q_rounded);
  }
  w.dq_accum = 0;
  // Right after the dQ accumulators, so that zeroing them zeroes these too (one memset).
  w.tile_counter = align_up(rows * static_cast<size_t>(a.head_dim) * sizeof(float));
  w.key_grad_arrivals = w.tile_counter + align_up(sizeof(int));
  w.key_grad_partials = w.key_grad_arrivals + align_up(key_grads.slots * sizeof(int));
  w.lse_log2 =
      w.key_grad_partials + align_up(key_grads.slots * key_grads.slot_floats * sizeof(float));
  w.delta = w.lse_log2 + align_up(rows * sizeof(float));
  w.semaphore = w.delta + align_up(rows * sizeof(float));
  // One per (batch or sequence, query head, query block), num_m_blocks covering max_seqlen_q.
  const size_t semaphores =
      a.deterministic ? static_cast<size_t>(a.batch * a.heads_q * w.num_m_blocks) : 0;
  w.key_tile_list = w.semaphore + align_up(semaphores * sizeof(int));
  w.total = w.key_tile_list + align_up(key_tile_list_bytes);
  return w;
}

// The kernels' view of problem with its workspace: rows padded to block_m, key blocks of block_n;
// key_grads as the workspace was laid out with (the sm90 backward points its kernel at them).
inline sm80::BwdParams backward_kernel_view(const BackwardProblem& problem, void* workspace,
                                            int block_m, int block_n, KeyGradSlots key_grads = {}) {
  const BackwardParams& a = problem.params;
  const WorkspaceLayout w = workspace_layout(problem, block_m, key_grads);
  char* base = static_cast<char*>(workspace);
  sm80::BwdParams p{};
  p.q = a.q.data;
  p.k = a.k.data;
  p.v = a.v.data;
  p.o = a.o.data;
  p.d_o = a.d_o.data;
  p.lse = a.lse;
  p.dq = a.dq.data;
  p.dk = a.dk.data;
  p.dv = a.dv.data;
  auto strides = [](const Strides& s, int64_t* batch, int64_t* seq, int64_t* head) {
    *batch = s.batch;
    *seq = s.seq;
    *head = s.head;
  };
  strides(a.q.strides, &p.q_batch, &p.q_seq, &p.q_head);
  strides(a.k.strides, &p.k_batch, &p.k_seq, &p.k_head);
  strides(a.v.strides, &p.v_batch, &p.v_seq, &p.v_head);
  strides(a.o.strides, &p.o_batch, &p.o_seq, &p.o_head);
  strides(a.d_o.strides, &p.do_batch, &p.do_seq, &p.do_head);
  strides(a.dq.strides, &p.dq_batch, &p.dq_seq, &p.dq_head);
  strides(a.dk.strides, &p.dk_batch, &p.dk_seq, &p.dk_head);
  strides(a.dv.strides, &p.dv_batch, &p.dv_seq, &p.dv_head);
  p.dq_accum = reinterpret_cast<float*>(base + w.dq_accum);
  p.lse_log2 = reinterpret_cast<float*>(base + w.lse_log2);
  p.delta = reinterpret_cast<float*>(base + w.delta);
  p.tile_counter = reinterpret_cast<int*>(base + w.tile_counter);
  p.dq_semaphore = a.deterministic ? reinterpret_cast<int*>(base + w.semaphore) : nullptr;
  p.batch = static_cast<int>(a.batch);
  p.heads_q = static_cast<int>(a.heads_q);
  p.heads_kv = static_cast<int>(a.heads_kv);
  p.kv_group = static_cast<int>(problem.group());
  p.seqlen_q = static_cast<int>(a.seqlen_q);
  p.seqlen_k = static_cast<int>(a.seqlen_k);
  p.seqlen_q_rounded = static_cast<int>(w.seqlen_q_rounded);
  p.num_m_blocks = static_cast<int>(w.num_m_blocks);
  p.num_n_blocks = static_cast<int>(
      ((a.cu_seqlens_k != nullptr ? a.max_seqlen_k : a.seqlen_k) + block_n - 1) / block_n);
  p.cu_seqlens_q = a.cu_seqlens_q;
  p.cu_seqlens_k = a.cu_seqlens_k;
  p.max_seqlen_q = static_cast<int>(a.cu_seqlens_q != nullptr ? a.max_seqlen_q : a.seqlen_q);
  p.max_seqlen_k = static_cast<int>(a.cu_seqlens_k != nullptr ? a.max_seqlen_k : a.seqlen_k);
  p.block_m = block_m;
  p.mask = WindowMask<int>{p.seqlen_q, p.seqlen_k, clamp_window(problem.mask.left, a.seqlen_k),
                           clamp_window(problem.mask.right, a.seqlen_q)};
  // The forward's score scaling (common/score_scaling.hpp), so that P is recomputed exactly as
  // the forward computed it.
  Problem forward{};
  forward.scale = problem.scale;
  forward.softcap = problem.softcap;
  const ScoreScaling scaling = score_scaling(forward);
  p.scale = scaling.scale;
  p.scale_log2 = scaling.scale_log2;
  p.softcapped = problem.softcap.cap > 0.f;
  p.softcap_in = scaling.softcap_in;
  p.softcap_out = scaling.softcap_out;
  return p;
}

}  // namespace flashcore::detail
