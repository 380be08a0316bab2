#include "tune_plan.hpp"

#include <algorithm>
#include <cstdint>

#include "common/problem.hpp"
#include "common/query_view.hpp"

namespace flashcore::bench {
namespace {

constexpr float kLog2e = 1.44269504088896340736f;

sm90::GmemInput gmem_input(const InputTensor& t, int64_t seqlen, int64_t heads) {
  return {t.data,        static_cast<int>(seqlen), static_cast<int>(heads),
          t.strides.seq, t.strides.head,           t.strides.batch};
}

}  // namespace

sm90::LaunchArgs plan_candidate(const AttentionParams& a, const TuneConfig& config, int sm_count,
                                size_t l2_bytes, int* tile_counter) {
  const detail::Problem problem = detail::make_problem(a);
  const detail::QueryView view = detail::query_view(problem);
  sm90::LaunchArgs in{};
  sm90::FwdArgs& p = in.args;
  p.batch = static_cast<int>(a.batch);
  p.seqlen_k = static_cast<int>(a.seqlen_k);
  p.head_dim = static_cast<int>(a.head_dim);
  // No softcap and a positive scale: raw scores, the scale folded into the softmax's exp2
  // (common/score_scaling.hpp).
  p.scale_log2 = problem.scale * kLog2e;
  p.prescale = false;
  p.exp_factor = p.scale_log2;
  p.o = a.o.data;
  p.o_batch = a.o.strides.batch;
  p.lse = a.lse;
  p.heads = view.heads;
  p.kv_group = view.kv_group;
  p.seqlen_q = view.seqlen_q;
  p.o_seq = view.o_seq;
  p.o_head = view.o_head;
  p.mask = view.mask;
  in.q = {a.q.data, view.seqlen_q, view.heads, view.q_seq, view.q_head, a.q.strides.batch};
  in.k = gmem_input(a.k, a.seqlen_k, a.heads_kv);
  in.v = gmem_input(a.v, a.seqlen_k, a.heads_kv);
  in.bf16 = a.q.dtype == DType::kBFloat16;

  p.num_m_blocks = (p.seqlen_q + config.block_m() - 1) / config.block_m();
  p.num_splits = 1;
  const int64_t pairs = static_cast<int64_t>(p.batch) * p.heads;
  const int64_t kv_bytes_per_head =
      std::max<int64_t>(1, 2 * int64_t{p.seqlen_k} * a.head_dim * 2 / std::max(1, p.kv_group));
  p.head_group = static_cast<int>(
      std::clamp<int64_t>(static_cast<int64_t>(l2_bytes) / 2 / kv_bytes_per_head, 1, pairs));
  const bool masked = p.mask.left >= 0 || p.mask.right >= 0;
  in.dynamic = masked;
  p.tile_counter = masked ? tile_counter : nullptr;
  in.cluster_ctas = !masked && p.num_m_blocks % config.cluster_ctas == 0 ? config.cluster_ctas : 1;
  in.pingpong = config.pingpong;
  in.intra_overlap = config.intra_overlap;
  const int64_t m_groups = (p.num_m_blocks + in.cluster_ctas - 1) / in.cluster_ctas;
  const int64_t tiles = pairs * m_groups;
  p.num_tiles = static_cast<int>(tiles);
  const int64_t clusters = std::min<int64_t>(tiles, sm_count / in.cluster_ctas);
  in.num_ctas = static_cast<int>(clusters * in.cluster_ctas);
  return in;
}

}  // namespace flashcore::bench
