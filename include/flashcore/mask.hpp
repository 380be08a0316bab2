// Mask and score functors shared by every kernel and by the references, so that the fast paths and
// the float64 reference cannot disagree on what "causal" or "window" means.
//
// Masks work at two levels: a kernel asks for the key range a block of query rows can see (tiles
// outside it are skipped) and whether a tile needs element masking at all (full tiles skip the mask
// arithmetic); only boundary tiles call visible() per element.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define FLASHCORE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FLASHCORE_HOST_DEVICE inline
#endif

namespace flashcore {

// What a mask says about a whole tile of (query, key) pairs, counting only pairs inside the
// sequences (0 <= q < Sq, 0 <= kv < Sk). A BlockMask lists partial tiles (the mask runs per
// element) apart from full ones (no mask code). kUnknown: the functor cannot tell without looking
// at every element, so whoever asked evaluates them.
enum class BlockVisibility : unsigned char { kEmpty, kPartial, kFull, kUnknown };

// Bottom-right aligned local window: query i sees key j when
//   i + (Sk - Sq) - left <= j <= i + (Sk - Sq) + right,   0 <= j < Sk,
// with left or right < 0 meaning unbounded on that side. Causal is right == 0. Index is int64_t for
// the references and the baselines; a kernel that knows its sizes fit may use int.
template <typename Index>
struct WindowMask {
  Index seqlen_q;
  Index seqlen_k;
  Index left;
  Index right;

  // First visible key of query row i (may exceed the last one: the row is fully masked).
  FLASHCORE_HOST_DEVICE Index first_key(Index row) const {
    if (left < 0) return 0;
    const Index first = row + seqlen_k - seqlen_q - left;
    return first > 0 ? first : 0;
  }
  // One past the last visible key of query row i.
  FLASHCORE_HOST_DEVICE Index end_key(Index row) const {
    if (right < 0) return seqlen_k;
    const Index end = row + seqlen_k - seqlen_q + right + 1;
    const Index clamped = end < seqlen_k ? end : seqlen_k;
    return clamped > 0 ? clamped : 0;
  }
  FLASHCORE_HOST_DEVICE bool visible(Index row, Index key) const {
    return key >= first_key(row) && key < end_key(row);
  }
  // The FlexAttention mask_mod form (include/flashcore/flex/mask_mods.hpp): the window ignores the
  // batch and head.
  FLASHCORE_HOST_DEVICE bool operator()(int /*b*/, int /*h*/, Index q_idx, Index kv_idx) const {
    return visible(q_idx, kv_idx);
  }
  // The same window for a sequence of other lengths (a varlen batch binds each sequence's own).
  FLASHCORE_HOST_DEVICE WindowMask with_seqlens(Index new_seqlen_q, Index new_seqlen_k) const {
    return {new_seqlen_q, new_seqlen_k, left, right};
  }
  // Keys that any of the rows [row_begin, row_end) can see; first_key and end_key grow with the
  // row, so the union is [first_key(row_begin), end_key(row_end - 1)).
  FLASHCORE_HOST_DEVICE Index block_first_key(Index row_begin) const {
    return first_key(row_begin);
  }
  FLASHCORE_HOST_DEVICE Index block_end_key(Index row_end) const { return end_key(row_end - 1); }
  // True when every (row, key) of the tile is visible, so the element mask can be skipped.
  FLASHCORE_HOST_DEVICE bool tile_fully_visible(Index row_begin, Index row_end, Index key_begin,
                                                Index key_end) const {
    return key_begin >= first_key(row_end - 1) && key_end <= end_key(row_begin);
  }
  // The tile [q_begin, q_end) x [kv_begin, kv_end), ends clamped to the sequences, in O(1): the
  // window's rows see contiguous key ranges that move right with the row, so the union of what a
  // block of rows sees is [block_first_key, block_end_key) and a tile meeting it holds a visible
  // pair (tests/cpu/test_block_mask.cpp checks this against every element).
  FLASHCORE_HOST_DEVICE BlockVisibility block_visibility(int /*b*/, int /*h*/, Index q_begin,
                                                         Index q_end, Index kv_begin,
                                                         Index kv_end) const {
    const Index first = block_first_key(q_begin);
    const Index end = block_end_key(q_end);
    if (kv_end <= first || kv_begin >= end || first >= end) return BlockVisibility::kEmpty;
    return tile_fully_visible(q_begin, q_end, kv_begin, kv_end) ? BlockVisibility::kFull
                                                                : BlockVisibility::kPartial;
  }
};

// Softcap score modifier: s -> cap * tanh(s / cap) on the already scaled score (as Gemma 2 and
// FlashAttention apply it). cap == 0 turns it off.
struct Softcap {
  float cap;

  FLASHCORE_HOST_DEVICE float operator()(float score) const {
    return cap > 0.f ? cap * tanhf(score / cap) : score;
  }
#if !defined(__CUDA_ARCH__)
  double operator()(double score) const { return cap > 0.f ? cap * std::tanh(score / cap) : score; }
#endif
};

}  // namespace flashcore
