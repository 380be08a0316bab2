// Which output tile a CTA computes, and the warp roles inside it: one CTA per (query tile, head,
// batch, KV split), grid (num_m_blocks * num_splits, heads, batch); with a CtaSplit policy of
// kClusterCtas CTAs (kernel_traits.hpp) those consecutive CTAs along x share a query tile, so the
// grid is (num_m_blocks * kClusterCtas, heads, batch).
#pragma once

#include "sm80/epilogue.hpp"
#include "sm80/fwd_params.hpp"
#include "sm80/kernel_traits.hpp"

namespace flashcore::sm80 {

// The thread's and CTA's indices, read with volatile moves so that two reads are never merged.
// The epilogue takes a fresh copy and re-derives its tile and warp role instead of keeping them
// live through the KV loop: the large tiles have no register to spare there, and ptxas spilled
// such values at 255 registers rather than recompute them.
struct ThreadIndex {
  int tid, cta_x, cta_y, cta_z;
};
__device__ __forceinline__ ThreadIndex fresh_thread_index() {
  ThreadIndex t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t.tid));
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(t.cta_x));
  asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(t.cta_y));
  asm volatile("mov.u32 %0, %%ctaid.z;" : "=r"(t.cta_z));
  return t;
}

template <typename Traits>
__device__ __forceinline__ OutputTile output_tile(const FwdParams& p, const ThreadIndex& t) {
  // Later query tiles see more keys under a causal mask; launching them first shortens the tail.
  if constexpr (Traits::kClusterCtas > 1) {
    // A cluster (consecutive cta_x) shares one query tile; its rank is the key split.
    const int m_block = p.num_m_blocks - 1 - t.cta_x / Traits::kClusterCtas;
    return {t.cta_z, t.cta_y, m_block * Traits::kBlockM,
            min((m_block + 1) * Traits::kBlockM, p.seqlen_q), t.cta_x % Traits::kClusterCtas};
  } else if constexpr (Traits::kKeyGroups > 1) {
    const int m_block_from_end = p.split_divisor.divide(t.cta_x);
    const int split = t.cta_x - m_block_from_end * p.num_splits;
    const int m_block = p.num_m_blocks - 1 - m_block_from_end;
    return {t.cta_z, t.cta_y, m_block * Traits::kBlockM,
            min((m_block + 1) * Traits::kBlockM, p.seqlen_q), split};
  } else {
    // Unsplit launches (the common case) skip the integer division.
    const int split = p.num_splits == 1 ? 0 : t.cta_x % p.num_splits;
    const int m_block = p.num_m_blocks - 1 - (p.num_splits == 1 ? t.cta_x : t.cta_x / p.num_splits);
    return {t.cta_z, t.cta_y, m_block * Traits::kBlockM,
            min((m_block + 1) * Traits::kBlockM, p.seqlen_q), split};
  }
}

// Warp roles: the warps of one key group split the rows, the key groups split each K/V tile.
// With one group the roles are constants: ptxas does not know warp < kRowWarps.
struct WarpRole {
  int lane, row_warp, key_group;
};
template <typename Traits>
__device__ __forceinline__ WarpRole warp_role(int tid) {
  const int warp = tid / kWarpSize;
  return {tid % kWarpSize, Traits::kKeyGroups == 1 ? warp : warp % Traits::kRowWarps,
          Traits::kKeyGroups == 1 ? 0 : warp / Traits::kRowWarps};
}

}  // namespace flashcore::sm80
