// The KV tiles one query tile of a flex kernel visits, and what each needs (the two-level mask):
// a kernel tile of kTileKeys keys is
//   - skipped when no pair of it is visible (never listed, or outside the mask's key range);
//   - kFull: no mask code at all (only the key tail past seqlen_k is bounded);
//   - kPartial: mask_mod per element.
// Shared by the sm80 flex kernel and, next, the sm90 one: nothing here depends on an architecture.
//
// With a BlockMask (flashcore/flex/block_mask.hpp) the walk is its query block's partial list,
// then its full list, each KV block cut into kv_block_size / kTileKeys kernel tiles: the cost
// follows the listed blocks, not Sk. The kernel's query tile must lie inside one query block
// (q_block_size a multiple of the tile's rows) and kv_block_size must be a multiple of kTileKeys;
// the backend rejects other sizes before any launch. Without one, the walk is the tiles of the
// mask's key range (a window's, or every key), each classified by the mask's block_visibility.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "flashcore/flex/block_mask_layout.hpp"
#include "flashcore/flex/mod_traits.hpp"

namespace flashcore::detail {

// A mask that knows the key range a block of rows can see (WindowMask, BuiltinMask): the dense
// walk visits only its tiles.
template <typename Mask, typename = void>
struct HasKeyRange : std::false_type {};
template <typename Mask>
struct HasKeyRange<Mask,
                   std::void_t<decltype(std::declval<const Mask&>().block_first_key(int64_t{}))>>
    : std::true_type {};

enum class TileMasking : unsigned char { kSkip, kPartial, kFull };

struct KvTile {
  int index;  // kernel tile: keys [index * kTileKeys, (index + 1) * kTileKeys)
  TileMasking masking;
};

template <int kTileKeys>
struct KvTileWalk {
  // BlockMask lists of this query tile's block (null: the dense walk).
  const int32_t* partial = nullptr;
  const int32_t* full = nullptr;
  int num_partial = 0;  // in kernel tiles
  int num_full = 0;
  int tiles_per_block = 1;
  // Dense walk: tiles [dense_begin, dense_end).
  int dense_begin = 0;
  int dense_end = 0;

  FLASHCORE_HOST_DEVICE int count() const {
    return partial != nullptr ? num_partial + num_full : dense_end - dense_begin;
  }

  // The kernel tile of step i, 0 <= i < count(), without classifying it (for the loads).
  FLASHCORE_HOST_DEVICE int tile_index(int i) const {
    if (partial == nullptr) return dense_begin + i;
    const bool is_partial = i < num_partial;
    const int j = is_partial ? i : i - num_partial;
    return (is_partial ? partial : full)[j / tiles_per_block] * tiles_per_block +
           j % tiles_per_block;
  }

  // Step i of the walk, 0 <= i < count(). The dense walk asks mask (bound to the sequence) about
  // the tile; rows [q_begin, q_end) are the query tile's rows inside the sequence.
  template <typename Mask>
  FLASHCORE_HOST_DEVICE KvTile at(int i, const Mask& mask, int b, int h, int q_begin, int q_end,
                                  int seqlen_k) const {
    if (partial != nullptr) {
      const bool is_partial = i < num_partial;
      const int tile = tile_index(i);
      // A tile past the keys (the tail of a long last KV block) has nothing to see.
      if (tile * kTileKeys >= seqlen_k) return {tile, TileMasking::kSkip};
      return {tile, is_partial ? TileMasking::kPartial : TileMasking::kFull};
    }
    const int tile = dense_begin + i;
    const int kv_begin = tile * kTileKeys;
    const int kv_end = kv_begin + kTileKeys < seqlen_k ? kv_begin + kTileKeys : seqlen_k;
    switch (flex::block_visibility(mask, b, h, q_begin, q_end, kv_begin, kv_end)) {
      case BlockVisibility::kEmpty:
        return {tile, TileMasking::kSkip};
      case BlockVisibility::kFull:
        return {tile, TileMasking::kFull};
      default:
        return {tile, TileMasking::kPartial};
    }
  }
};

// The walk of query rows [q_begin, q_end) of (b, h): the BlockMask's lists for their block, or
// the dense range. mask is bound to the sequence's lengths.
template <int kTileKeys, typename Mask>
FLASHCORE_HOST_DEVICE KvTileWalk<kTileKeys> kv_tile_walk(const flex::BlockMask& block_mask,
                                                         const Mask& mask, int b, int h,
                                                         int q_begin, int q_end, int seqlen_k) {
  KvTileWalk<kTileKeys> walk;
  if (block_mask.kv_num_blocks != nullptr) {
    const int64_t row = block_mask.row(b, h, q_begin / block_mask.q_block_size);
    const int64_t mk = block_mask.num_kv_blocks();
    walk.tiles_per_block = static_cast<int>(block_mask.kv_block_size / kTileKeys);
    walk.partial = block_mask.kv_indices + row * mk;
    walk.num_partial = block_mask.kv_num_blocks[row] * walk.tiles_per_block;
    if (block_mask.full_kv_num_blocks != nullptr) {
      walk.full = block_mask.full_kv_indices + row * mk;
      walk.num_full = block_mask.full_kv_num_blocks[row] * walk.tiles_per_block;
    }
    return walk;
  }
  int first_key = 0, end_key = seqlen_k;
  if constexpr (HasKeyRange<Mask>::value) {
    first_key = static_cast<int>(mask.block_first_key(q_begin));
    end_key = static_cast<int>(mask.block_end_key(q_end));
  }
  if (end_key > first_key) {
    walk.dense_begin = first_key / kTileKeys;
    walk.dense_end = (end_key + kTileKeys - 1) / kTileKeys;
  }
  return walk;
}

}  // namespace flashcore::detail
