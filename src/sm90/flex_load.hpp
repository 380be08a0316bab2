// The flex kernel's producer: the dense producer's TMA rings (mainloop_load.hpp) fed from a block
// walk (common/block_walk.hpp) instead of a contiguous range. Per tile it loads Q once (before it
// builds the walk), then K and V of each step of the walk, and leaves with each K stage a step
// record (FlexStep) saying which key tile it holds and how the consumers mask it; the tile's number
// of steps goes with its index through the tile ring. The consumers never walk the lists
// themselves, so both sides agree on the sequence by construction. A BlockMask's walks come built
// (MergedWalks, flex_merged_walk.hpp: the tile's two query blocks merged, one read for the count
// and one per 32 records); the producer walks the lists itself only where none were built.
//
// Varlen: the descriptors describe the packed tensors (batch 1, every row); a sequence's tiles
// start at its first row (domain_offset). A tile that runs past the sequence reads the next
// sequence's rows (or zeros past the last row): the consumers hide those keys (kv >= seqlen_k is
// never visible) and the epilogue stores no row past the sequence, so nothing of another sequence
// reaches a visible score or an output.
//
// BlockMasks of 64-key blocks keep the 128-key tile (full-size wgmmas): a step then covers two
// listed blocks, one per half of the stage, which need not be adjacent (two 64-row TMA boxes of K
// and of V, FlexHalfTma), and its record is two words, one per half. That is a kernel of its own
// (kPaired), so that the 128-key walk's kernel is the code it was.
#pragma once

#include <cutlass/arch/barrier.h>

#include <new>

#include "common/block_walk.hpp"
#include "common/flex_sequence.hpp"
#include "flashcore/flex/mask_mods.hpp"
#include "flashcore/flex/mod_traits.hpp"
#include "sm90/flex_params.hpp"
#include "sm90/flex_step.hpp"
#include "sm90/kernel_traits.hpp"
#include "sm90/tile_scheduler.hpp"

namespace flashcore::sm90 {

// The record of walk step i of the tile whose rows start at row_begin (mask bound to the
// sequence). A BlockMask step is partial or full as listed (skipped past the keys). A dense step
// is classified here for the whole tile; where that is not full (or empty), each warpgroup
// classifies it again for its own 64 rows (FlexSteps::begin).
template <int kTileRows, int kTileKeys, typename Mask>
__device__ __forceinline__ int flex_step(const detail::KvTileWalk<kTileKeys>& walk, int i,
                                         const Mask& mask, int b, int h, int row_begin,
                                         int seqlen_q, int seqlen_k) {
  const bool rows_inside = row_begin + kTileRows <= seqlen_q;
  if (walk.num_lists == 0) {
    const detail::KvTile t =
        walk.at(i, mask, b, h, row_begin, min(row_begin + kTileRows, seqlen_q), seqlen_k);
    const bool all = t.masking == detail::TileMasking::kFull && rows_inside &&
                     (t.index + 1) * kTileKeys <= seqlen_k;
    const int masking =
        t.masking == detail::TileMasking::kSkip ? FlexStep::kSkip : FlexStep::kClassify;
    return FlexStep::pack(t.index, masking, all);
  }
  const detail::KvTile t = walk.at(i, flex::NoMask{}, 0, 0, 0, 0, seqlen_k);
  const int masking = t.masking == detail::TileMasking::kSkip      ? FlexStep::kSkip
                      : t.masking == detail::TileMasking::kPartial ? FlexStep::kPartial
                                                                   : FlexStep::kFull;
  // The rows the step is for: both warpgroups', or one's (64-row query blocks).
  const int masking0 = t.rows_begin < kRowsPerWarpgroup ? masking : FlexStep::kSkip;
  const int masking1 = t.rows_end > kRowsPerWarpgroup ? masking : FlexStep::kSkip;
  const bool all = masking0 == FlexStep::kFull && masking1 == FlexStep::kFull && rows_inside &&
                   (t.index + 1) * kTileKeys <= seqlen_k;
  return FlexStep::pack(t.index, masking0, masking1, all);
}

// Steps of two 64-key blocks (kv_block_size 64 under 128-key tiles). The walk is counted in
// 64-key blocks (KvTileWalk<64>: its lists' partial blocks, then full ones, per query block), and
// each run of it (one list's partial or full blocks) is paired apart: blocks 2j and 2j + 1 of a
// run share a step, so a pair is all partial or all full and for one query block's rows, and an
// odd run leaves its last step's second half empty.
template <int kKeys>
__device__ __forceinline__ int paired_count(const detail::KvTileWalk<kKeys>& walk) {
  int n = 0;
#pragma unroll
  for (int l = 0; l < 2; ++l) {
    if (l < walk.num_lists) {
      n += (walk.lists[l].num_partial + 1) / 2 + (walk.lists[l].num_full + 1) / 2;
    }
  }
  return n;
}
// The walk index of paired step i's first block; *has_second: the next one shares the step.
template <int kKeys>
__device__ __forceinline__ int paired_first(const detail::KvTileWalk<kKeys>& walk, int i,
                                            bool* has_second) {
  int start = 0;
#pragma unroll
  for (int run = 0; run < 4; ++run) {
    const auto& l = run < 2 ? walk.lists[0] : walk.lists[1];
    const int length = run / 2 >= walk.num_lists ? 0 : run % 2 ? l.num_full : l.num_partial;
    const int pairs = (length + 1) / 2;
    if (i < pairs) {
      *has_second = 2 * i + 1 < length;
      return start + 2 * i;
    }
    i -= pairs;
    start += length;
  }
  *has_second = false;
  return start;  // not reached for i < paired_count
}

// The two words of paired step i (flex_step's records of its 64-key blocks); an empty second half
// is kSkip, and its load is the block past the keys (the TMA fills it with zeros: no memory
// traffic).
template <int kTileRows, int kKeys, typename Mask>
__device__ __forceinline__ int2 flex_paired_step(const detail::KvTileWalk<kKeys>& walk, int i,
                                                 const Mask& mask, int b, int h, int row_begin,
                                                 int seqlen_q, int seqlen_k) {
  bool has_second = false;
  const int first = paired_first(walk, i, &has_second);
  const int a = flex_step<kTileRows>(walk, first, mask, b, h, row_begin, seqlen_q, seqlen_k);
  const int second =
      has_second ? flex_step<kTileRows>(walk, first + 1, mask, b, h, row_begin, seqlen_q, seqlen_k)
                 : FlexStep::pack(past_key_block<kKeys>(seqlen_k), FlexStep::kSkip, false);
  return {a, second};
}

// The TMA copies of one 64-key block into either half of a K or V stage: rows [0, 64) of the
// stage's own layout (its 128B-swizzle atoms are 8 rows, tiled along the rows first, so the
// second half is laid out as the first, 64 rows on). The stage's two halves are then two boxes
// each (cute issues one TMA per 64-column swizzle block of the half).
template <typename Traits>
struct FlexHalfTma {
  static constexpr int kKeys = Traits::kBlockN / 2;
  using HalfShape = Shape<Int<kKeys>, Int<Traits::kHeadDim>>;
  using HalfOfStage = Layout<HalfShape, Stride<_1, Int<Traits::kBlockN>>>;
  using SmemLayoutK =
      decltype(composition(take<0, 2>(typename Traits::SmemLayoutK{}), HalfOfStage{}));
  using SmemLayoutV =
      decltype(composition(take<0, 2>(typename Traits::SmemLayoutV{}), HalfOfStage{}));
  using TmaK = decltype(make_tma_copy(SM90_TMA_LOAD{}, typename Traits::GmemTensor{}, SmemLayoutK{},
                                      HalfShape{}, _1{}));
  using TmaV = decltype(make_tma_copy(SM90_TMA_LOAD{}, typename Traits::GmemTensor{}, SmemLayoutV{},
                                      HalfShape{}, _1{}));
};

// The walk of a tile (the producer's; the consumers learn its number of steps through the tile
// ring, and a tile with none loads nothing).
// kKeys: the tile's keys, or half of them for the paired walk.
template <int kKeys, typename Traits, typename Mask, typename ScoreMod>
__device__ __forceinline__ detail::KvTileWalk<kKeys> flex_walk(
    const FlexParams<Traits, Mask, ScoreMod>& fp, const Tile& tile,
    const detail::FlexSequence& seq) {
  const int row_begin = tile.m_block * Traits::kBlockM;
  const int row_end = min(row_begin + Traits::kBlockM, seq.seqlen_q);
  detail::KvTileWalk<kKeys> walk = detail::kv_tile_walk<kKeys>(
      fp.flex.block_mask, flex::bind_seqlens(fp.flex.mask, seq.seqlen_q, seq.seqlen_k), tile.batch,
      tile.head, row_begin, row_end, seq.seqlen_k);
  walk.last_first = true;
  return walk;
}

// The tile ring's payload for a varlen tile past its sequence (else the tile's number of steps).
inline constexpr int kNoRows = -1;

// kPaired: BlockMasks of 64-key blocks, two to a step (flex_paired_step).
template <typename Traits, typename Mask, typename ScoreMod, typename Storage, bool kPaired>
struct FlexLoad {
  using Pipeline = typename Traits::Pipeline;
  using PipelineState = typename Pipeline::PipelineState;
  using PipelineQ = typename Traits::PipelineQ;
  using TileShape = typename Traits::TileShape;
  using Walk = detail::KvTileWalk<Traits::kBlockN>;

  // Called by all 32 lanes of the producer warp, as MainloopLoad::run.
  __device__ static void run(const FlexParams<Traits, Mask, ScoreMod>& fp, Storage& smem,
                             PipelineQ& pipeline_q, Pipeline& pipeline_k, Pipeline& pipeline_v) {
    const FwdParams<Traits>& params = fp.fwd;
    const FwdArgs& a = params.args;
    const bool issuer = cute::elect_one_sync();
    if (issuer) {
      cute::prefetch_tma_descriptor(params.tma_q.get_tma_descriptor());
      cute::prefetch_tma_descriptor(params.tma_k.get_tma_descriptor());
      cute::prefetch_tma_descriptor(params.tma_v.get_tma_descriptor());
    }
    const bool varlen = fp.flex.cu_seqlens_q != nullptr;
    const int tma_batch = varlen ? 1 : a.batch;
    const int heads_kv = a.heads / a.kv_group;
    Tensor mQ = params.tma_q.get_tma_tensor(make_shape(a.seqlen_q, a.head_dim, a.heads, tma_batch));
    Tensor mK =
        params.tma_k.get_tma_tensor(make_shape(a.seqlen_k, a.head_dim, heads_kv, tma_batch));
    Tensor mV =
        params.tma_v.get_tma_tensor(make_shape(a.seqlen_k, a.head_dim, heads_kv, tma_batch));
    Tensor sQ = make_tensor(make_smem_ptr(smem.base.q.data()), typename Traits::SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(smem.base.k.data()), typename Traits::SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(smem.base.v.data()), typename Traits::SmemLayoutV{});
    if (issuer && kPaired) {
      cute::prefetch_tma_descriptor(fp.tma_k_half.get_tma_descriptor());
      cute::prefetch_tma_descriptor(fp.tma_v_half.get_tma_descriptor());
    }

    typename PipelineQ::PipelineState write_q = cutlass::make_producer_start_state<PipelineQ>();
    PipelineState write_k = cutlass::make_producer_start_state<Pipeline>();
    PipelineState write_v = cutlass::make_producer_start_state<Pipeline>();
    TileCursor<1> cursor;
    for (int tile_index = cursor.first();; tile_index = cursor.next(a)) {
      if (a.varlen_tiles != nullptr) {
        // A varlen batch's tiles with rows, listed before the launch (varlen_tiles.hpp): the
        // counter runs over the list, whose entries are grid indices. A runtime test, not a
        // kernel of its own as in the dense kernel: the flex kernels are already two per head dim
        // and dtype.
        tile_index = tile_index < *a.varlen_tile_count ? a.varlen_tiles[tile_index] : a.num_tiles;
      }
      if (tile_index >= a.num_tiles) {
        TileRing::publish(smem.base.tiles, cursor.taken, tile_index);  // the end
        break;
      }
      const Tile tile = TileScheduler<1>::decode(a, tile_index);
      const detail::FlexSequence seq = detail::flex_sequence(
          fp.flex.cu_seqlens_q, fp.flex.cu_seqlens_k, tile.batch, a.seqlen_q, a.seqlen_k);
      // The consumers learn every tile and its number of steps from here (kNoRows: a varlen
      // tile past its sequence, which nobody computes).
      if (tile.m_block * Traits::kBlockM >= seq.seqlen_q) {
        TileRing::publish(smem.base.tiles, cursor.taken, tile_index, kNoRows, tile);
        continue;
      }
      // The tile's walk and loads, for 128-key tiles or for pairs of 64-key blocks (kPaired).
      auto run_tile = [&]() {
        using TileWalk = detail::KvTileWalk<kPaired ? FlexHalfTma<Traits>::kKeys : Traits::kBlockN>;
        static_assert(sizeof(TileWalk) == sizeof(Walk));
        TileWalk& walk = *reinterpret_cast<TileWalk*>(smem.walk);
        // Q first: it depends on the tile alone, so its load runs under the walk's dependent
        // global reads (the BlockMask's counts, then its first step records) instead of after
        // them. Every tile with rows loads it, and the consumers release it even when the walk
        // is empty.
        const int tma_b = varlen ? 0 : tile.batch;
        Tensor gQ =
            local_tile(domain_offset(make_coord(seq.q_start, _0{}), mQ(_, _, tile.head, tma_b)),
                       select<0, 2>(TileShape{}), make_coord(tile.m_block, _0{}));
        auto q_views = tma_partition(params.tma_q, _0{}, Layout<_1>{}, group_modes<0, 2>(sQ),
                                     group_modes<0, 2>(gQ));
        pipeline_q.producer_acquire(write_q);
        if (issuer) {
          copy(params.tma_q.with(*pipeline_q.producer_get_barrier(write_q), 0), get<0>(q_views),
               get<1>(q_views)(_, write_q.index()));
        }
        ++write_q;

        // The walk: a BlockMask's built before the launch (flex_merged_walk.hpp), else built
        // here from the mask's key range (or from the lists, where no walks were built).
        const MergedWalks& merged = fp.flex.merged;
        const int64_t merged_walk = MergedWalks::walk(fp.flex.block_mask, tile.batch, tile.head,
                                                      tile.m_block, a.num_m_blocks);
        int num_steps = 0;
        if (merged.enabled()) {
          num_steps = merged.counts[merged_walk];
        } else {
          __syncwarp();  // every lane is done with the previous tile's walk
          if (threadIdx.x % 32 == 0) {
            new (&walk) TileWalk(flex_walk < kPaired ? FlexHalfTma<Traits>::kKeys
                                                     : Traits::kBlockN > (fp, tile, seq));
          }
          __syncwarp();
          num_steps = kPaired ? paired_count(walk) : walk.count();
        }
        TileRing::publish(smem.base.tiles, cursor.taken, tile_index, num_steps, tile);
        if (num_steps == 0) return;  // the consumers release Q and write O = 0

        const int kv_head = tile.head / a.kv_group;
        Tensor gK =
            local_tile(domain_offset(make_coord(seq.k_start, _0{}), mK(_, _, kv_head, tma_b)),
                       select<1, 2>(TileShape{}), make_coord(_, _0{}));
        Tensor gV =
            local_tile(domain_offset(make_coord(seq.k_start, _0{}), mV(_, _, kv_head, tma_b)),
                       select<1, 2>(TileShape{}), make_coord(_, _0{}));
        auto k_views = tma_partition(params.tma_k, _0{}, Layout<_1>{}, group_modes<0, 2>(sK),
                                     group_modes<0, 2>(gK));
        auto v_views = tma_partition(params.tma_v, _0{}, Layout<_1>{}, group_modes<0, 2>(sV),
                                     group_modes<0, 2>(gV));
        auto& tKgK = get<0>(k_views);
        auto& tKsK = get<1>(k_views);
        auto& tVgV = get<0>(v_views);
        auto& tVsV = get<1>(v_views);
        // Paired: 64-key blocks of K and V, and each stage as its two halves (half, 1, stage).
        using HalfShape = typename FlexHalfTma<Traits>::HalfShape;
        auto k_halves = tma_partition(
            fp.tma_k_half, _0{}, Layout<_1>{}, group_modes<0, 2>(flat_divide(sK, HalfShape{})),
            group_modes<0, 2>(
                local_tile(domain_offset(make_coord(seq.k_start, _0{}), mK(_, _, kv_head, tma_b)),
                           HalfShape{}, make_coord(_, _0{}))));
        auto v_halves = tma_partition(
            fp.tma_v_half, _0{}, Layout<_1>{}, group_modes<0, 2>(flat_divide(sV, HalfShape{})),
            group_modes<0, 2>(
                local_tile(domain_offset(make_coord(seq.k_start, _0{}), mV(_, _, kv_head, tma_b)),
                           HalfShape{}, make_coord(_, _0{}))));

        // The step records, 32 at a time: lane j reads step (chunk + j) of the lists, so the
        // walk's dependent global loads (a list entry per step) are one coalesced load per 32
        // steps instead of a round trip before each TMA issue. Paired: two words a step.
        int2 records = {0, 0};
        auto record_of = [&](int i) {
          if (i % 32 == 0) {
            const int mine = i + static_cast<int>(threadIdx.x % 32);
            const int row_begin = tile.m_block * Traits::kBlockM;
            const auto mask = flex::bind_seqlens(fp.flex.mask, seq.seqlen_q, seq.seqlen_k);
            if (merged.enabled()) {
              constexpr int kWords = kPaired ? 2 : 1;
              const int32_t* words =
                  merged.records + (merged_walk * merged.capacity + mine) * kWords;
              records = mine < num_steps ? int2{words[0], kPaired ? words[1] : 0} : int2{0, 0};
            } else if constexpr (kPaired) {
              records = mine < num_steps ? flex_paired_step<Traits::kBlockM>(
                                               walk, mine, mask, tile.batch, tile.head, row_begin,
                                               seq.seqlen_q, seq.seqlen_k)
                                         : int2{0, 0};
            } else {
              records.x = mine < num_steps
                              ? flex_step<Traits::kBlockM>(walk, mine, mask, tile.batch, tile.head,
                                                           row_begin, seq.seqlen_q, seq.seqlen_k)
                              : 0;
            }
          }
          int2 step;
          step.x = __shfl_sync(0xffffffffu, records.x, i % 32);
          step.y = kPaired ? __shfl_sync(0xffffffffu, records.y, i % 32) : 0;
          return step;
        };
        // K of step i, with its record: written by the thread that arrives on the stage's full
        // barrier (threadIdx.x 0, the pipeline's leader), after the stage is free and before that
        // arrival (a release), so a consumer that waited for the stage reads this step's record.
        auto load_k = [&](int2 step) {
          smem.base.pipeline_k.empty_barrier_[write_k.index()].wait(write_k.phase());
          if (threadIdx.x == 0) {
            smem.steps[0][write_k.index()] = step.x;
            if constexpr (kPaired) smem.steps[kPaired][write_k.index()] = step.y;
          }
          pipeline_k.producer_acquire(write_k);
          if (issuer) {
            auto* barrier = pipeline_k.producer_get_barrier(write_k);
            if constexpr (kPaired) {
              copy(fp.tma_k_half.with(*barrier, 0), get<0>(k_halves)(_, FlexStep::tile(step.x)),
                   get<1>(k_halves)(_, 0, _0{}, write_k.index()));
              copy(fp.tma_k_half.with(*barrier, 0), get<0>(k_halves)(_, FlexStep::tile(step.y)),
                   get<1>(k_halves)(_, 1, _0{}, write_k.index()));
            } else {
              copy(params.tma_k.with(*barrier, 0), tKgK(_, FlexStep::tile(step.x)),
                   tKsK(_, write_k.index()));
            }
          }
          ++write_k;
        };
        auto load_v = [&](int2 step) {
          pipeline_v.producer_acquire(write_v);
          if (issuer) {
            auto* barrier = pipeline_v.producer_get_barrier(write_v);
            if constexpr (kPaired) {
              copy(fp.tma_v_half.with(*barrier, 0), get<0>(v_halves)(_, FlexStep::tile(step.x)),
                   get<1>(v_halves)(_, 0, _0{}, write_v.index()));
              copy(fp.tma_v_half.with(*barrier, 0), get<0>(v_halves)(_, FlexStep::tile(step.y)),
                   get<1>(v_halves)(_, 1, _0{}, write_v.index()));
            } else {
              copy(params.tma_v.with(*barrier, 0), tVgV(_, FlexStep::tile(step.x)),
                   tVsV(_, write_v.index()));
            }
          }
          ++write_v;
        };

        for (int i = 0; i < num_steps; ++i) {
          const int2 step = record_of(i);
          load_k(step);
          load_v(step);
        }
      };
      run_tile();
    }
    pipeline_q.producer_tail(write_q);
    pipeline_k.producer_tail(write_k);
    pipeline_v.producer_tail(write_v);
  }
};

}  // namespace flashcore::sm90
