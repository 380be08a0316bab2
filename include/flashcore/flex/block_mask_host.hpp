// A BlockMask built on the host, in host memory: the oracle that the GPU builder
// (create_block_mask) is tested against, and a way to build small masks without a GPU. It looks at
// every tile of B x H x Mq x Mk, so it is meant for test sizes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "flashcore/flex/block_mask.hpp"
#include "flashcore/flex/mod_traits.hpp"

namespace flashcore::flex {

// The shape of a BlockMask with no arrays yet: one mask for (batch, heads) over Sq x Sk.
inline BlockMask block_mask_shape(int64_t batch, int64_t heads, int64_t seqlen_q, int64_t seqlen_k,
                                  int64_t q_block_size, int64_t kv_block_size) {
  BlockMask shape;
  shape.batch = batch;
  shape.heads = heads;
  shape.seqlen_q = seqlen_q;
  shape.seqlen_k = seqlen_k;
  shape.q_block_size = q_block_size;
  shape.kv_block_size = kv_block_size;
  return shape;
}

struct HostBlockMask {
  BlockMask shape;  // its pointers are unused; view() points at the vectors
  std::vector<int32_t> kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices;

  BlockMask view() const {
    BlockMask v = shape;
    v.kv_num_blocks = kv_num_blocks.data();
    v.kv_indices = kv_indices.data();
    v.full_kv_num_blocks = full_kv_indices.empty() ? nullptr : full_kv_num_blocks.data();
    v.full_kv_indices = full_kv_indices.empty() ? nullptr : full_kv_indices.data();
    return v;
  }
};

// How the host builder classifies a tile.
enum class TileClassification {
  kBlockVisibility,  // the mask's block_visibility where it answers, as the GPU builder does
  kEveryElement,     // always evaluate every pair: the brute-force oracle
};

// Visibility of the tile [q_begin, q_end) x [kv_begin, kv_end) (ends inside the sequences).
template <typename Mask>
BlockVisibility classify_tile(const Mask& mask, int b, int h, int64_t q_begin, int64_t q_end,
                              int64_t kv_begin, int64_t kv_end, TileClassification how) {
  if (how == TileClassification::kBlockVisibility) {
    const BlockVisibility v = block_visibility(mask, b, h, q_begin, q_end, kv_begin, kv_end);
    if (v != BlockVisibility::kUnknown) return v;
  }
  bool any_visible = false, any_hidden = false;
  for (int64_t q = q_begin; q < q_end; ++q) {
    for (int64_t kv = kv_begin; kv < kv_end; ++kv) {
      const bool visible = mask(b, h, static_cast<int>(q), static_cast<int>(kv));
      any_visible |= visible;
      any_hidden |= !visible;
    }
    if (any_visible && any_hidden) return BlockVisibility::kPartial;
  }
  return any_visible ? BlockVisibility::kFull : BlockVisibility::kEmpty;
}

// The BlockMask of mask_mod (bound to Sq, Sk) for the given shape, with full blocks listed apart
// and indices ascending, as create_block_mask writes them.
template <typename Mask>
HostBlockMask build_block_mask_host(const Mask& mask_mod, const BlockMask& shape,
                                    TileClassification how = TileClassification::kBlockVisibility) {
  HostBlockMask out;
  out.shape = shape;
  const Mask mask = bind_seqlens(mask_mod, shape.seqlen_q, shape.seqlen_k);
  const int64_t mq = shape.num_q_blocks(), mk = shape.num_kv_blocks();
  const size_t rows = static_cast<size_t>(shape.batch * shape.heads * mq);
  out.kv_num_blocks.assign(rows, 0);
  out.full_kv_num_blocks.assign(rows, 0);
  out.kv_indices.assign(rows * static_cast<size_t>(mk), 0);
  out.full_kv_indices.assign(rows * static_cast<size_t>(mk), 0);
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < shape.heads; ++h) {
      for (int64_t m = 0; m < mq; ++m) {
        const int64_t row = shape.row(b, h, m);
        const int64_t q_begin = m * shape.q_block_size;
        const int64_t q_end = std::min(q_begin + shape.q_block_size, shape.seqlen_q);
        for (int64_t n = 0; n < mk; ++n) {
          const int64_t kv_begin = n * shape.kv_block_size;
          const int64_t kv_end = std::min(kv_begin + shape.kv_block_size, shape.seqlen_k);
          const BlockVisibility v = classify_tile(mask, static_cast<int>(b), static_cast<int>(h),
                                                  q_begin, q_end, kv_begin, kv_end, how);
          if (v == BlockVisibility::kEmpty) continue;
          const bool full = v == BlockVisibility::kFull;
          std::vector<int32_t>& counts = full ? out.full_kv_num_blocks : out.kv_num_blocks;
          std::vector<int32_t>& indices = full ? out.full_kv_indices : out.kv_indices;
          indices[static_cast<size_t>(row * mk + counts[row]++)] = static_cast<int32_t>(n);
        }
      }
    }
  }
  return out;
}

}  // namespace flashcore::flex
