// The sm80 forward kernel (FlashAttention-2 schedule): one CTA per (query tile, head, batch,
// KV split). The Q tile stays in shared memory and each warp runs S = QK^T, online softmax and
// O += PV on its own rows and its own slice of each K/V tile: with one key group (TileConfig) a
// warp sees every key; with kKeyGroups > 1 (SmallGridTileConfig) the groups' states merge at the
// end (key_group_merge.hpp). What differs between architectures comes from the tile config's
// policies (kernel_traits.hpp): the MMA a key group issues, whether the CTAs of a cluster split a
// query tile's keys and merge, and whether the kernel waits for the previous grid. The sm_80 tables
// take the sm_80 policies; the Hopper tiles that run this schedule (src/sm90/small_grid/) bring
// theirs. K/V stream through shared memory in one of two schedules (the tile table picks,
// kernel_traits.hpp):
//  - kStages == 1: one K and one V tile, two barriers per KV step (FlashAttention-2): V lands while
//    the warps run QK^T and the softmax, the next K lands while they run PV. Fewest registers
//    (loads are issued where S is dead), for the register-bound hd128/hd256 tiles.
//  - kStages >= 2: a ring of kStages K/V pairs, one barrier per step, refilled kStages - 1 steps
//    ahead: hides more load latency behind the short hd64 steps.
// Either way the prologue fills every buffer (V[0] too, or the whole ring) before the first wait.
#pragma once

#include <cstdint>

#include "common/launch.hpp"
#include "common/online_softmax.hpp"
#include "sm80/epilogue.hpp"
#include "sm80/fwd_params.hpp"
#include "sm80/kernel_traits.hpp"
#include "sm80/key_group_merge.hpp"
#include "sm80/mainloop.hpp"
#include "sm80/tile_io.hpp"
#include "sm80/tile_scheduler.hpp"

namespace flashcore::sm80 {

// KV blocks [begin, end) one CTA visits: the union of what its rows can see (blocks outside are
// skipped, never loaded), then this split's even share of it.
struct KvBlockRange {
  int begin, end;
};
struct KeyRange {
  int begin, end;
};

template <typename Traits>
__device__ __forceinline__ KvBlockRange kv_block_range(const FwdParams& p, int row_begin,
                                                       int row_end, int split) {
  const int first_key = p.mask.block_first_key(row_begin);
  const int end_key = p.mask.block_end_key(row_end);
  if (end_key <= first_key) return {0, 0};
  const int first = first_key / Traits::kBlockKV;
  const int last = (end_key + Traits::kBlockKV - 1) / Traits::kBlockKV;
  // Small-grid tiles divide without a branch (FastDivisor); for the others a uniform branch
  // spares the unsplit common case an integer division. The CTAs of a cluster split evenly.
  const int per_split =
      Traits::kClusterCtas > 1 ? (last - first + Traits::kClusterCtas - 1) / Traits::kClusterCtas
      : Traits::kKeyGroups > 1 ? p.split_divisor.divide(last - first + p.num_splits - 1)
      : p.num_splits == 1      ? last - first
                               : (last - first + p.num_splits - 1) / p.num_splits;
  const int begin = first + split * per_split;
  const int end = min(begin + per_split, last);
  return {begin, end > begin ? end : begin};
}

// Where a CTA's Q tile and its head's K and V start.
template <typename Element>
struct TileAddresses {
  const Element* q;
  const Element* k;
  const Element* v;
};
template <typename Traits>
__device__ __forceinline__ TileAddresses<typename Traits::Element> tile_addresses(
    const FwdParams& p, const OutputTile& tile) {
  using Element = typename Traits::Element;
  const int kv_head = Traits::kSmallGrid ? p.kv_group_divisor.divide(tile.head)
                      : p.kv_group == 1  ? tile.head
                                         : tile.head / p.kv_group;
  return {static_cast<const Element*>(p.q) + tile.batch * p.q_batch + tile.head * p.q_head +
              tile.row_begin * p.q_seq,
          static_cast<const Element*>(p.k) + tile.batch * p.k_batch + kv_head * p.k_head,
          static_cast<const Element*>(p.v) + tile.batch * p.v_batch + kv_head * p.v_head};
}

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinCtasPerSm)
    fwd_kernel(const __grid_constant__ FwdParams p) {
  using Element = typename Traits::Element;
  // 1024: the largest alignment an Mma policy asks of its operands (Hopper's wgmma: its 128-byte
  // swizzle is anchored to 1024-byte boundaries).
  extern __shared__ __align__(1024) char smem[];
  char* const q_smem = smem;
  char* const kv_smem = smem + Traits::kQBytes;  // [stage][K, V]

  const int tid = threadIdx.x;
  Traits::GridDependency::allow_dependent_launch();
  Traits::CtaSplit::on_kernel_entry();
  const WarpRole role = warp_role<Traits>(tid);
  const int lane = role.lane, row_warp = role.row_warp, key_group = role.key_group;
  const OutputTile tile = output_tile<Traits>(p, fresh_thread_index());

  // The small-grid tiles take their addresses before the range check, so that no branch
  // separates the parameter reads of their setup (FastDivisor, fwd_params.hpp).
  constexpr bool kEarlyAddresses = Traits::kSmallGrid;
  const TileAddresses<Element> early =
      kEarlyAddresses ? tile_addresses<Traits>(p, tile) : TileAddresses<Element>{};
  const KvBlockRange range = kv_block_range<Traits>(p, tile.row_begin, tile.row_end, tile.split);
  // The first global access (store_empty's or the Q load) comes after this.
  Traits::GridDependency::wait_for_prior_grid();
  // A CTA of a cluster split with no keys still merges: its empty state (max -inf, sum 0, O 0) has
  // weight 0.
  if (Traits::kClusterCtas == 1 && range.begin == range.end) {
    store_empty<Traits>(p, tile, tid);
    return;
  }
  const TileAddresses<Element> at = kEarlyAddresses ? early : tile_addresses<Traits>(p, tile);

  auto load_k = [&](int block, int stage) {
    const int key0 = block * Traits::kBlockKV;
    load_tile_async<Traits, Traits::kBlockKV>(kv_smem + stage * 2 * Traits::kKVTileBytes,
                                              at.k + key0 * p.k_seq, p.k_seq, p.seqlen_k - key0,
                                              p.head_dim, tid);
  };
  auto load_v = [&](int block, int stage) {
    const int key0 = block * Traits::kBlockKV;
    load_tile_async<Traits, Traits::kBlockKV>(kv_smem + (stage * 2 + 1) * Traits::kKVTileBytes,
                                              at.v + key0 * p.v_seq, p.v_seq, p.seqlen_k - key0,
                                              p.head_dim, tid);
  };

  const int warp_row0 = row_warp * Traits::kWarpRows;
  // This warp's keys of a K/V tile start this many bytes in (slices are whole rows, multiples of
  // 8 of them, so the swizzle of a slice is the tile's).
  const int slice_offset = key_group * Traits::kSliceBytes;
  // A warp whose rows are all past seqlen_q (short Sq, e.g. decode) only helps load, unless the
  // Mma policy needs every warp (a warpgroup MMA): then rows past the end are zero-filled Q,
  // finite, and never stored.
  const bool warp_has_rows =
      Traits::Mma::kEveryWarpComputes || tile.row_begin + warp_row0 < tile.row_end;
  float o[Traits::kWarpMTiles][Traits::kOutNTiles][4];
#pragma unroll
  for (int mt = 0; mt < Traits::kWarpMTiles; ++mt) {
#pragma unroll
    for (int dt = 0; dt < Traits::kOutNTiles; ++dt) {
      o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.f;
    }
  }
  OnlineSoftmax<Traits::kWarpMTiles> softmax;
  using ProbFragT = ProbFrag<Traits>;
  // Whether this warp's slice of a block has keys its CTA's rows can see: with key groups, a slice
  // past seqlen_k or outside the mask is skipped (its P would be all zeros).
  auto slice_visible = [&](int block) {
    if constexpr (Traits::kKeyGroups == 1) return true;
    const int key0 = block * Traits::kBlockKV + key_group * Traits::kBlockN;
    return key0 < p.mask.block_end_key(tile.row_end) &&
           key0 + Traits::kBlockN > p.mask.block_first_key(tile.row_begin);
  };
  // Keys every row of the CTA sees (WindowMask::tile_fully_visible of the whole row range, taken
  // once): two loop-invariant ints instead of the mask arithmetic per step.
  const KeyRange full_keys{p.mask.first_key(tile.row_end - 1), p.mask.end_key(tile.row_begin)};
  // S = QK^T of one block through the softmax, as P fragments (warps with rows only).
  auto scores = [&](int block, const char* k_tile, ProbFragT& probs) {
    const int key0 = block * Traits::kBlockKV + key_group * Traits::kBlockN;
    float s[Traits::kWarpMTiles][Traits::kScoreNTiles][4];
    Traits::Mma::template gemm_qk<Traits>(q_smem, k_tile + slice_offset, warp_row0, lane, s);
    if (p.prescale) prescale_scores<Traits>(p, s);
    // Interior tiles of the mask (and every tile without one, except the key tail) skip the
    // per-element test.
    if (key0 < full_keys.begin || key0 + Traits::kBlockN > full_keys.end)
      mask_scores<Traits>(p, tile.row_begin + warp_row0, key0, lane, s);
    softmax.update(s, o, p.exp_factor);
    pack_probabilities<Traits>(s, probs);
  };

  auto pv = [&](const char* v_slice, const ProbFragT& probs) {
    Traits::Mma::template gemm_pv<Traits>(v_slice, lane, probs, o);
  };
  // After a cp.async wait: publishes the landed tiles to every warp (and to whatever proxy the Mma
  // policy reads them through). One barrier after the wait's branches, not one in each: that
  // doubled barrier moved the large tiles' code and cost hd128 3% (docs/perf.md v8).
  auto publish_copies = [] {
    Traits::Mma::fence_copies();
    __syncthreads();
  };

  // Q rides in the first cp.async group. Every K/V buffer is free at the start, so the prologue
  // fills them all rather than issuing the second load only after the first wait.
  load_tile_async<Traits, Traits::kBlockM>(q_smem, at.q, p.q_seq, tile.row_end - tile.row_begin,
                                           p.head_dim, tid);
  if constexpr (Traits::kStages == 1) {
    load_k(range.begin, 0);
    cute::cp_async_fence();
    load_v(range.begin, 0);
    cute::cp_async_fence();
    for (int block = range.begin; block < range.end; ++block) {
      // Step 0: K and V are in flight, wait for K. Later steps: only K[block] is in flight; once it
      // lands, this barrier also tells every warp that all warps are done with V[block - 1], so
      // V[block] may overwrite it.
      if (block == range.begin) {
        cute::cp_async_wait<1>();
      } else {
        cute::cp_async_wait<0>();
      }
      publish_copies();
      if (block != range.begin) {
        load_v(block, 0);
        cute::cp_async_fence();
      }
      ProbFragT probs;
      const bool compute = warp_has_rows && slice_visible(block);
      if (compute) scores(block, kv_smem, probs);
      // Only V[block] is in flight; after the barrier every warp is done reading K[block].
      cute::cp_async_wait<0>();
      publish_copies();
      if (block + 1 < range.end) {
        load_k(block + 1, 0);
        cute::cp_async_fence();
      }
      if (compute) pv(kv_smem + Traits::kKVTileBytes + slice_offset, probs);
    }
  } else {
    // One group per block, kStages of them up front (empty past the range), then one per step
    // from step 1 on: block i is always group i.
    const int num_blocks = range.end - range.begin;
#pragma unroll
    for (int stage = 0; stage < Traits::kStages; ++stage) {
      if (stage < num_blocks) {
        load_k(range.begin + stage, stage);
        load_v(range.begin + stage, stage);
      }
      cute::cp_async_fence();
    }
    for (int i = 0; i < num_blocks; ++i) {
      // Block i has landed once at most kStages - 1 (step 0) or kStages - 2 (later steps) newer
      // groups are pending. From step 1 on the barrier also tells every warp that stage
      // (i - 1) % kStages, refilled next, is no longer being read.
      if (i == 0) {
        cute::cp_async_wait<Traits::kStages - 1>();
      } else {
        cute::cp_async_wait<Traits::kStages - 2>();
      }
      publish_copies();
      if (i > 0) {
        const int prefetch = i + Traits::kStages - 1;
        if (prefetch < num_blocks) {
          load_k(range.begin + prefetch, prefetch % Traits::kStages);
          load_v(range.begin + prefetch, prefetch % Traits::kStages);
        }
        cute::cp_async_fence();
      }
      if (!warp_has_rows || !slice_visible(range.begin + i)) continue;
      const char* k_tile = kv_smem + (i % Traits::kStages) * 2 * Traits::kKVTileBytes;
      ProbFragT probs;
      scores(range.begin + i, k_tile, probs);
      pv(k_tile + Traits::kKVTileBytes + slice_offset, probs);
    }
  }
  if constexpr (Traits::kClusterCtas > 1) {
    if (range.end <= range.begin) {
      // A CTA of a cluster split whose share of the keys is empty (the other tiles returned above):
      // nothing waited for the first cp.async group, which carries Q, and the epilogue stages O
      // in Q's buffer. Wait for it, and for every thread's copies, first (racecheck: the Q copy
      // and the O staging wrote the same bytes).
      cute::cp_async_wait<0>();
      __syncthreads();
    }
  }
  float inv_sum[Traits::kWarpMTiles][2];
  float lse[Traits::kWarpMTiles][2];
  // The epilogue's tile and warp role, re-derived (see fresh_thread_index).
  const ThreadIndex now = fresh_thread_index();
  const OutputTile out_tile = output_tile<Traits>(p, now);
  const WarpRole out_role = warp_role<Traits>(now.tid);
  if constexpr (Traits::kClusterCtas > 1) {
    // Each CTA of the cluster stores its share of the columns; LSE comes from rank 0.
    const int rank = out_tile.split;
    constexpr int kShareTiles = Traits::kOutNTiles / Traits::kClusterCtas;
    float merged[Traits::kWarpMTiles][kShareTiles][4];
    Traits::CtaSplit::template merge<Traits, Traits::kOutNTiles>(
        smem + Traits::kWorkBytes, now.tid, rank, p.exp_factor, softmax, o, merged);
    softmax.finalize</*kFast=*/true>(p.exp_factor, inv_sum, lse);
    store_output<Traits, kShareTiles>(p, out_tile, q_smem, out_role.row_warp, out_role.lane,
                                      rank * kShareTiles, merged, inv_sum, lse, rank == 0);
  } else if constexpr (Traits::kKeyGroups > 1) {
    // Every warp merges and stores its key group's share of the columns; LSE comes from group 0.
    float merged[Traits::kWarpMTiles][kMergeNTiles<Traits>][4];
    merge_key_groups<Traits>(smem, out_role.row_warp, out_role.key_group, out_role.lane,
                             p.exp_factor, softmax, o, merged);
    if (!warp_has_rows) return;
    softmax.finalize</*kFast=*/true>(p.exp_factor, inv_sum, lse);
    store_output<Traits, kMergeNTiles<Traits>>(
        p, out_tile, q_smem, out_role.row_warp, out_role.lane,
        out_role.key_group * kMergeNTiles<Traits>, merged, inv_sum, lse, out_role.key_group == 0);
  } else {
    if (!warp_has_rows) return;
    softmax.finalize</*kFast=*/false>(p.exp_factor, inv_sum, lse);
    store_output<Traits, Traits::kOutNTiles>(p, out_tile, q_smem, out_role.row_warp, out_role.lane,
                                             0, o, inv_sum, lse, true);
  }
}

// Launches fwd_kernel<Traits> on its planned grid: (num_m_blocks * num_splits, heads, batch), in
// clusters of kClusterCtas along x (a cluster's CTAs share a query tile; its num_splits is 1).
// dependent: with programmatic dependent launch (common/launch.hpp) if the tile's GridDependency
// waits for the previous grid before its first global access; a kernel that does not is always
// launched plainly.
template <typename Traits>
cudaError_t launch_fwd_kernel(const FwdParams& p, bool dependent, cudaStream_t stream) {
  const auto kernel = fwd_kernel<Traits>;
  if (cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             Traits::kSmemBytes);
      err != cudaSuccess) {
    return err;
  }
  detail::LaunchShape shape;
  shape.grid = dim3(static_cast<unsigned>(p.num_m_blocks * p.num_splits * Traits::kClusterCtas),
                    static_cast<unsigned>(p.heads), static_cast<unsigned>(p.batch));
  shape.threads = Traits::kThreads;
  shape.smem_bytes = Traits::kSmemBytes;
  shape.cluster_ctas = Traits::kClusterCtas;
  shape.dependent = dependent && Traits::GridDependency::kWaitsForPriorGrid;
  return detail::launch_kernel(kernel, shape, stream, p);
}

}  // namespace flashcore::sm80
