// The sm80 forward kernel (FlashAttention-2 schedule): one CTA per (query tile, head, batch,
// KV split). The Q tile stays in shared memory and each warp runs S = QK^T, online softmax and
// O += PV on its own rows and its own slice of each K/V tile: with one key group (TileConfig) a
// warp sees every key; with kKeyGroups > 1 (SmallGridTileConfig) the groups' states merge at the
// end (key_group_merge.hpp). K/V stream through shared memory in one of two schedules (the tile
// table picks, kernel_traits.hpp):
//  - kStages == 1: one K and one V tile, two barriers per KV step (FlashAttention-2): V lands while
//    the warps run QK^T and the softmax, the next K lands while they run PV. Fewest registers
//    (loads are issued where S is dead), for the register-bound hd128/hd256 tiles.
//  - kStages >= 2: a ring of kStages K/V pairs, one barrier per step, loads kStages - 1 steps
//    ahead: hides more load latency behind the short hd64 steps.
#pragma once

#include <cstdint>

#include "sm80/epilogue.hpp"
#include "sm80/fwd_params.hpp"
#include "sm80/kernel_traits.hpp"
#include "sm80/key_group_merge.hpp"
#include "sm80/mainloop.hpp"
#include "sm80/softmax.hpp"
#include "sm80/tile_io.hpp"

namespace flashcore::sm80 {

// KV blocks [begin, end) one CTA visits: the union of what its rows can see (blocks outside are
// skipped, never loaded), then this split's even share of it.
struct KvBlockRange {
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
  const int per_split = (last - first + p.num_splits - 1) / p.num_splits;
  const int begin = first + split * per_split;
  const int end = min(begin + per_split, last);
  return {begin, end > begin ? end : begin};
}

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinCtasPerSm)
    fwd_kernel(const __grid_constant__ FwdParams p) {
  using Element = typename Traits::Element;
  extern __shared__ __align__(128) char smem[];
  char* const q_smem = smem;
  char* const kv_smem = smem + Traits::kQBytes;  // [stage][K, V]

  const int tid = threadIdx.x;
  const int warp = tid / kWarpSize;
  const int lane = tid % kWarpSize;
  // Warp roles: the warps of one key group split the rows, the key groups split each K/V tile.
  const int row_warp = warp % Traits::kRowWarps;
  const int key_group = warp / Traits::kRowWarps;
  // Later query tiles see more keys under a causal mask; launching them first shortens the tail.
  const int m_block = p.num_m_blocks - 1 - static_cast<int>(blockIdx.x) / p.num_splits;
  const OutputTile tile{static_cast<int>(blockIdx.z), static_cast<int>(blockIdx.y),
                        m_block * Traits::kBlockM, min((m_block + 1) * Traits::kBlockM, p.seqlen_q),
                        static_cast<int>(blockIdx.x) % p.num_splits};

  const KvBlockRange range = kv_block_range<Traits>(p, tile.row_begin, tile.row_end, tile.split);
  if (range.begin == range.end) {
    store_empty<Traits>(p, tile, tid);
    return;
  }

  const int kv_head = tile.head / p.kv_group;
  const auto* q = static_cast<const Element*>(p.q) + tile.batch * p.q_batch + tile.head * p.q_head +
                  tile.row_begin * p.q_seq;
  const auto* k = static_cast<const Element*>(p.k) + tile.batch * p.k_batch + kv_head * p.k_head;
  const auto* v = static_cast<const Element*>(p.v) + tile.batch * p.v_batch + kv_head * p.v_head;

  auto load_k = [&](int block, int stage) {
    const int key0 = block * Traits::kBlockKV;
    load_tile_async<Traits, Traits::kBlockKV>(kv_smem + stage * 2 * Traits::kKVTileBytes,
                                              k + key0 * p.k_seq, p.k_seq, p.seqlen_k - key0, tid);
  };
  auto load_v = [&](int block, int stage) {
    const int key0 = block * Traits::kBlockKV;
    load_tile_async<Traits, Traits::kBlockKV>(kv_smem + (stage * 2 + 1) * Traits::kKVTileBytes,
                                              v + key0 * p.v_seq, p.v_seq, p.seqlen_k - key0, tid);
  };

  const int warp_row0 = row_warp * Traits::kWarpRows;
  // This warp's keys of a K/V tile start this many bytes in (slices are whole rows, multiples of
  // 8 of them, so the swizzle of a slice is the tile's).
  const int slice_offset = key_group * Traits::kSliceBytes;
  // A warp whose rows are all past seqlen_q (short Sq, e.g. decode) only helps load.
  const bool warp_has_rows = tile.row_begin + warp_row0 < tile.row_end;
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
  // S = QK^T of one block through the softmax, as P fragments (warps with rows only).
  auto scores = [&](int block, const char* k_tile, ProbFragT& probs) {
    const int key0 = block * Traits::kBlockKV + key_group * Traits::kBlockN;
    float s[Traits::kWarpMTiles][Traits::kScoreNTiles][4];
    gemm_qk<Traits>(q_smem, k_tile + slice_offset, warp_row0, lane, s);
    if (p.prescale) prescale_scores<Traits>(p, s);
    // Interior tiles of the mask (and every tile without one, except the key tail) skip the
    // per-element test.
    if (!p.mask.tile_fully_visible(tile.row_begin, tile.row_end, key0, key0 + Traits::kBlockN))
      mask_scores<Traits>(p, tile.row_begin + warp_row0, key0, lane, s);
    softmax.update(s, o, p.exp_factor);
    pack_probabilities<Traits>(s, probs);
  };

  // Q rides in the first cp.async group.
  load_tile_async<Traits, Traits::kBlockM>(q_smem, q, p.q_seq, tile.row_end - tile.row_begin, tid);
  if constexpr (Traits::kStages == 1) {
    load_k(range.begin, 0);
    cute::cp_async_fence();
    for (int block = range.begin; block < range.end; ++block) {
      // Only K[block] is in flight: once it lands, this barrier also tells every warp that all
      // warps are done with V[block - 1], so V[block] may overwrite it.
      cute::cp_async_wait<0>();
      __syncthreads();
      load_v(block, 0);
      cute::cp_async_fence();
      ProbFragT probs;
      const bool compute = warp_has_rows && slice_visible(block);
      if (compute) scores(block, kv_smem, probs);
      // Only V[block] is in flight; after the barrier every warp is done reading K[block].
      cute::cp_async_wait<0>();
      __syncthreads();
      if (block + 1 < range.end) {
        load_k(block + 1, 0);
        cute::cp_async_fence();
      }
      if (compute) gemm_pv<Traits>(kv_smem + Traits::kKVTileBytes + slice_offset, lane, probs, o);
    }
  } else {
    // kStages - 1 groups are committed up front (empty past the range) so that step i always
    // waits for group i with the same count.
    const int num_blocks = range.end - range.begin;
#pragma unroll
    for (int stage = 0; stage < Traits::kStages - 1; ++stage) {
      if (stage < num_blocks) {
        load_k(range.begin + stage, stage);
        load_v(range.begin + stage, stage);
      }
      cute::cp_async_fence();
    }
    for (int i = 0; i < num_blocks; ++i) {
      // Block i has landed once at most kStages - 2 newer groups are pending; the barrier also
      // tells every warp that stage (i - 1) % kStages, refilled next, is no longer being read.
      cute::cp_async_wait<Traits::kStages - 2>();
      __syncthreads();
      const int prefetch = i + Traits::kStages - 1;
      if (prefetch < num_blocks) {
        load_k(range.begin + prefetch, prefetch % Traits::kStages);
        load_v(range.begin + prefetch, prefetch % Traits::kStages);
      }
      cute::cp_async_fence();
      if (!warp_has_rows || !slice_visible(range.begin + i)) continue;
      const char* k_tile = kv_smem + (i % Traits::kStages) * 2 * Traits::kKVTileBytes;
      ProbFragT probs;
      scores(range.begin + i, k_tile, probs);
      gemm_pv<Traits>(k_tile + Traits::kKVTileBytes + slice_offset, lane, probs, o);
    }
  }
  if constexpr (Traits::kKeyGroups > 1) {
    // Groups 1.. hand their states to group 0 and are done.
    merge_key_groups<Traits>(smem, row_warp, key_group, lane, p.exp_factor, softmax, o);
    if (key_group > 0) return;
  }
  if (!warp_has_rows) return;

  float inv_sum[Traits::kWarpMTiles][2];
  float lse[Traits::kWarpMTiles][2];
  softmax.finalize(p.exp_factor, inv_sum, lse);
  store_output<Traits>(p, tile, q_smem, row_warp, lane, o, inv_sum, lse);
}

}  // namespace flashcore::sm80
