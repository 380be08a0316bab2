// The KV tiles one query tile of a flex kernel visits, and what each needs (the two-level mask):
// a kernel tile of kTileKeys keys is
//   - skipped when no pair of it is visible (never listed, or outside the mask's key range);
//   - kFull: no mask code at all (only the key tail past seqlen_k is bounded);
//   - kPartial: mask_mod per element.
// Shared by the sm80 flex kernel and, next, the sm90 one: nothing here depends on an architecture.
//
// With a BlockMask (flashcore/flex/block_mask.hpp) the walk is its query block's partial list,
// then its full list, each KV block cut into kv_block_size / kTileKeys kernel tiles: the cost
// follows the listed blocks, not Sk. A query tile may span two query blocks (64-row blocks under
// a 128-row tile): then it walks both blocks' lists, each step for its own block's rows.
// kv_block_size must be a multiple of kTileKeys; the backend rejects other sizes before any
// launch. Without one, the walk is the tiles of the
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
  // The query tile's rows this step is for, relative to its first row: [rows_begin, rows_end).
  // Every row, except where a BlockMask's query blocks are shorter than the tile (see KvTileWalk).
  int rows_begin, rows_end;
};

template <int kTileKeys>
struct KvTileWalk {
  // One BlockMask row's lists, counted in kernel tiles.
  struct Lists {
    const int32_t* partial;
    const int32_t* full;
    int num_partial, num_full;
  };
  // BlockMask walk (num_lists 1 or 2): the lists of the query block(s) the tile's rows lie in.
  // With query blocks shorter than the tile, rows [0, split_row) are the first block's and the
  // rest the second's; the walk visits the first block's lists, then the second's, and each step
  // is for its own block's rows only (KvTile::rows_begin/end). A KV block in both lists is then
  // loaded twice: the price of walking unsorted lists without merging them.
  Lists lists[2] = {};
  int num_lists = 0;  // 0: the dense walk
  int split_row = 0;
  int num_rows = 0;  // the query tile's rows
  int tiles_per_block = 1;
  // Dense walk: tiles [dense_begin, dense_end).
  int dense_begin = 0;
  int dense_end = 0;
  // Each list (and the dense range) from its last tile: the sm90 producer's order, the dense
  // kernel's (a causal row's diagonal tile, then the keys before it, nearest first). With the
  // first tile first, the CTAs that run the query blocks of one head read the same K/V tile at
  // the same time; last first they read different ones (docs/perf.md, sm90 flex per-step cost).
  bool last_first = false;

  FLASHCORE_HOST_DEVICE int steps(const Lists& l) const { return l.num_partial + l.num_full; }
  FLASHCORE_HOST_DEVICE int count() const {
    if (num_lists == 0) return dense_end - dense_begin;
    return steps(lists[0]) + (num_lists == 2 ? steps(lists[1]) : 0);
  }

  // The kernel tile of step i, 0 <= i < count(), without classifying it (for the loads).
  FLASHCORE_HOST_DEVICE int tile_index(int i) const {
    if (num_lists == 0) return last_first ? dense_end - 1 - i : dense_begin + i;
    const bool second = i >= steps(lists[0]);
    // A select, not lists[second]: a dynamic index would put the array in local memory.
    const Lists l = second ? lists[1] : lists[0];
    const int j = second ? i - steps(lists[0]) : i;
    const bool is_partial = j < l.num_partial;
    int t = is_partial ? j : j - l.num_partial;
    if (last_first) t = (is_partial ? l.num_partial : l.num_full) - 1 - t;
    return (is_partial ? l.partial : l.full)[t / tiles_per_block] * tiles_per_block +
           t % tiles_per_block;
  }

  // Step i of the walk, 0 <= i < count(). The dense walk asks mask (bound to the sequence) about
  // the tile; rows [q_begin, q_end) are the query tile's rows inside the sequence.
  template <typename Mask>
  FLASHCORE_HOST_DEVICE KvTile at(int i, const Mask& mask, int b, int h, int q_begin, int q_end,
                                  int seqlen_k) const {
    const int tile = tile_index(i);
    if (num_lists != 0) {
      const bool second = i >= steps(lists[0]);
      const int rows_begin = second ? split_row : 0;
      const int rows_end = num_lists == 2 && !second ? split_row : num_rows;
      const Lists l = second ? lists[1] : lists[0];
      const int j = second ? i - steps(lists[0]) : i;
      // A tile past the keys (the tail of a long last KV block) has nothing to see, nor has one
      // outside them (an index outside [0, Mk): a BlockMask that breaks its contract, whose
      // contents no launch reads first), so that no mask_mod sees a key outside the sequence.
      // Unsigned, as the sm80 loads test it: a negative index is past the keys, and the product
      // wraps where a signed one would overflow.
      if (static_cast<unsigned>(tile) * kTileKeys >= static_cast<unsigned>(seqlen_k)) {
        return {tile, TileMasking::kSkip, rows_begin, rows_end};
      }
      return {tile, j < l.num_partial ? TileMasking::kPartial : TileMasking::kFull, rows_begin,
              rows_end};
    }
    const int kv_begin = tile * kTileKeys;
    const int kv_end = kv_begin + kTileKeys < seqlen_k ? kv_begin + kTileKeys : seqlen_k;
    TileMasking masking = TileMasking::kPartial;
    switch (flex::block_visibility(mask, b, h, q_begin, q_end, kv_begin, kv_end)) {
      case BlockVisibility::kEmpty:
        masking = TileMasking::kSkip;
        break;
      case BlockVisibility::kFull:
        masking = TileMasking::kFull;
        break;
      default:
        break;
    }
    return {tile, masking, 0, num_rows};
  }
};

// A BlockMask row's count as the walks use it: within [0, mk], the entries its row holds. The
// kernels do not read the counts before they launch (check_block_mask_contents_on_device does,
// at the cost of a copy), so a count past its row would otherwise read the next rows' indices,
// and past the last row's, memory outside the mask (the merged walks clamp theirs the same way).
FLASHCORE_HOST_DEVICE int listed_blocks(int32_t count, int64_t mk) {
  return count < 0 ? 0 : (count > mk ? static_cast<int>(mk) : count);
}

// The walk of query rows [q_begin, q_end) of (b, h): the BlockMask's lists for the query blocks
// the rows lie in (at most two: the backend admits q_block_size multiples of half the kernel's
// query tile, aligned with it), or the dense range. mask is bound to the sequence's lengths.
template <int kTileKeys, typename Mask>
FLASHCORE_HOST_DEVICE KvTileWalk<kTileKeys> kv_tile_walk(const flex::BlockMask& block_mask,
                                                         const Mask& mask, int b, int h,
                                                         int q_begin, int q_end, int seqlen_k) {
  KvTileWalk<kTileKeys> walk;
  walk.num_rows = q_end - q_begin;
  if (block_mask.kv_num_blocks != nullptr) {
    // BlockMask::row()'s indexing in 32-bit divisions (validate_block_mask keeps the sizes in
    // int32): its int64 ones are calls to a division routine, in the sm90 producer's 24 registers.
    const int q_block_size = static_cast<int>(block_mask.q_block_size);
    const int kv_block_size = static_cast<int>(block_mask.kv_block_size);
    const int mq = (static_cast<int>(block_mask.seqlen_q) + q_block_size - 1) / q_block_size;
    const int64_t mk = (static_cast<int>(block_mask.seqlen_k) + kv_block_size - 1) / kv_block_size;
    walk.tiles_per_block = kv_block_size / kTileKeys;
    const int first_block = q_begin / q_block_size;
    const int last_block = (q_end - 1) / q_block_size;
    walk.num_lists = last_block > first_block ? 2 : 1;
    walk.split_row = (first_block + 1) * q_block_size - q_begin;
    const int64_t bh = (block_mask.batch == 1 ? 0 : int64_t{b}) * block_mask.heads +
                       (block_mask.heads == 1 ? 0 : h);
    for (int n = 0; n < walk.num_lists; ++n) {
      const int64_t row = bh * mq + first_block + n;
      auto& l = walk.lists[n];
      l.partial = block_mask.kv_indices + row * mk;
      l.num_partial = listed_blocks(block_mask.kv_num_blocks[row], mk) * walk.tiles_per_block;
      if (block_mask.full_kv_num_blocks != nullptr) {
        l.full = block_mask.full_kv_indices + row * mk;
        l.num_full = listed_blocks(block_mask.full_kv_num_blocks[row], mk) * walk.tiles_per_block;
      }
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
