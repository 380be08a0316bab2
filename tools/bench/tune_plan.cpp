#include "tune_plan.hpp"

#include <algorithm>
#include <cstdint>

#include "common/problem.hpp"
#include "sm90/head_group.hpp"
#include "sm90/kernel_view.hpp"
#include "sm90/tma_strides.hpp"

namespace flashcore::bench {

sm90::LaunchArgs plan_candidate(const AttentionParams& a, const TuneConfig& config, int sm_count,
                                size_t l2_bytes, int* tile_counter) {
  const detail::Problem problem = detail::make_problem(a);
  sm90::LaunchArgs in = sm90::kernel_view(problem);
  sm90::FwdArgs& p = in.args;

  p.num_m_blocks = (p.seqlen_q + config.block_m() - 1) / config.block_m();
  p.num_splits = 1;
  p.o_by_tma = sm90::stores_o_by_tma(p, /*packed=*/false);
  const int64_t pairs = static_cast<int64_t>(p.batch) * p.heads;
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
  // The production plan's groups (sm90_fwd.cu), so a candidate is timed as it would run.
  p.head_group = sm90::heads_per_group(
      {pairs, m_groups, clusters, sm90::kv_bytes_per_query_head(p.seqlen_k, a.head_dim, p.kv_group),
       static_cast<int64_t>(l2_bytes), !masked});
  return in;
}

}  // namespace flashcore::bench
