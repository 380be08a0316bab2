// What the sm90 flex kernel receives: the dense kernel's parameters (sizes, outputs, the persistent
// schedule, the TMA descriptors) plus FlexArgs: the mods, the BlockMask, sinks and varlen arrays.
// One __grid_constant__ struct: the mods are read from parameter space, never copied to registers
// whole. FlexArgs is plain host data, so the host side (flex_fwd.cu) needs no CuTe.
#pragma once

#include <cstdint>

#include "flashcore/flex/block_mask_layout.hpp"
#include "flashcore/flex/sinks.hpp"
#include "sm90/fwd_params.hpp"

namespace flashcore::sm90 {

// The flex tile (flex_kernel.cuh, FlexTraits), for the host's grid and checks: 128 query rows at
// every head dim, so that a BlockMask's query blocks of a multiple of 64 rows cover each consumer
// warpgroup's rows whole.
inline constexpr int kFlexTileRows = 128;
// Its keys: 128 up to D = 128. At D = 256 Q's 64 KiB and two stages each of 128-key K and V
// (256 KiB) would not fit one CTA's 227 KiB, so that kernel's tiles have 64 keys (two stages,
// 192 KiB in all; FlashAttention-3's masked hd256 tile has 64 keys too). A BlockMask's KV blocks
// must be whole tiles, except 64-key blocks under 128-key tiles: two of them fill a step (the
// paired walk).
inline constexpr int kFlexTileKeys = 128;
inline constexpr int kFlexPairedBlockKeys = kFlexTileKeys / 2;
constexpr int flex_tile_keys(int kernel_head_dim) {
  return kernel_head_dim <= 128 ? kFlexTileKeys : kFlexPairedBlockKeys;
}

// Whether a problem's BlockMask needs the paired walk (two 64-key blocks to a 128-key step,
// flex_load.hpp) on a kernel of tile_keys keys: the one place the launch and the functor path
// decide it.
inline bool needs_paired_walk(const flex::BlockMask& block_mask, int tile_keys) {
  return block_mask.kv_num_blocks != nullptr && block_mask.kv_block_size % tile_keys != 0;
}

// A BlockMask's walks, built on the device before the kernel (flex_merged_walk.hpp): one per
// (BlockMask batch, head, query tile), each a count and its FlexStep words (walk w's step i at
// (w * capacity + i) * words, two words a step when paired), read by the producer in place of the
// lists.
struct MergedWalks {
  const int32_t* counts = nullptr;   // steps of each walk; null: the producer walks the lists
  const int32_t* records = nullptr;  // the walks' FlexStep words
  int capacity = 0;                  // steps per walk

  __host__ __device__ bool enabled() const { return counts != nullptr; }
  // The walk of query tile m_block of (b, h); the BlockMask's broadcast dims are read at 0.
  __host__ __device__ static int64_t walk(const flex::BlockMask& m, int b, int h, int m_block,
                                          int num_m_blocks) {
    const int64_t bh = (m.batch == 1 ? 0 : int64_t{b}) * m.heads + (m.heads == 1 ? 0 : h);
    return bh * num_m_blocks + m_block;
  }
};

template <typename Mask, typename ScoreMod>
struct FlexArgs {
  Mask mask;                   // mask_mod, bound to each sequence's lengths in the kernel
  ScoreMod score_mod;          // on the scaled score, natural-log domain
  float scale;                 // softmax scale
  flex::BlockMask block_mask;  // kv_num_blocks null: every tile of the mask's key range
  flex::AttentionSinks sinks;
  // Varlen (AttentionParams' meaning), or null.
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  MergedWalks merged = {};  // a BlockMask's walks, set by the launch
};

// The TMA copies of half a key tile, for BlockMasks of 64-key blocks (defined in flex_load.hpp).
template <typename Traits>
struct FlexHalfTma;

template <typename Traits, typename Mask, typename ScoreMod>
struct FlexParams {
  // args.heads are the query heads (no decode packing: mods see real heads and rows); seqlen_q/k
  // are the packed totals of a varlen batch, whose TMA descriptors have batch 1. args.mask,
  // softcap and prescale are unused (the mods carry them); num_splits is 1.
  FwdParams<Traits> fwd;
  FlexArgs<Mask, ScoreMod> flex;
  // With 64-key blocks (kv_block_size not a multiple of the tile's keys): K and V of one block
  // into either half of a stage; set only then.
  typename FlexHalfTma<Traits>::TmaK tma_k_half;
  typename FlexHalfTma<Traits>::TmaV tma_v_half;
};

}  // namespace flashcore::sm90
