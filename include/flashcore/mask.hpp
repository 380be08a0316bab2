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
