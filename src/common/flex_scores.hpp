// The element level of the flex kernels' two-level mask, on the mma C fragments of
// common/online_softmax.hpp (sm80's mma.sync and each warp's part of an sm90 wgmma accumulator
// are laid out alike): raw dot products in, log2-domain scores for the online softmax out,
//   x = visible ? score_mod(s * scale, b, h, q, kv) * log2(e) : -inf.
// visible is "inside the sequences" for a full tile, and also mask_mod for a partial one; a full
// tile away from the sequences' ends runs no test at all. score_mod and mask_mod are called only
// for pairs inside the sequences, so a mod may index per-token arrays without bounds checks.
#pragma once

#include <cmath>

#include "common/block_walk.hpp"
#include "common/online_softmax.hpp"

namespace flashcore::detail {

// Where a warp's fragment sits: rows row0 + mt * 16 + lane / 4 (+ 8) and keys key0 + nt * 8 +
// 2 * (lane % 4) (+ 1), in the sequence's own indices.
struct FragmentPlace {
  int b, h;
  int row0, key0;
  int seqlen_q, seqlen_k;
  int lane;
};

template <bool kCallMask, bool kBound, typename Mask, typename ScoreMod, int kMTiles, int kNTiles>
__device__ __forceinline__ void flex_scores_impl(float (&s)[kMTiles][kNTiles][4], const Mask& mask,
                                                 const ScoreMod& score_mod, const FragmentPlace& at,
                                                 float scale) {
  constexpr int kFragRows = 16, kFragCols = 8;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int q = at.row0 + mt * kFragRows + at.lane / 4 + 8 * half;
      const bool row_in = q < at.seqlen_q;
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int kv = at.key0 + nt * kFragCols + 2 * (at.lane % 4) + e;
          float& x = s[mt][nt][2 * half + e];
          bool visible = row_in;
          if constexpr (kBound) visible = visible && kv < at.seqlen_k;
          if constexpr (kCallMask) visible = visible && mask(at.b, at.h, q, kv);
          x = visible ? score_mod(x * scale, at.b, at.h, q, kv) * kLog2e : -INFINITY;
        }
      }
    }
  }
}

// The scores of one warp's fragment of a tile walked as `masking` (kSkip never gets here).
template <typename Mask, typename ScoreMod, int kMTiles, int kNTiles>
__device__ __forceinline__ void flex_scores(float (&s)[kMTiles][kNTiles][4], TileMasking masking,
                                            const Mask& mask, const ScoreMod& score_mod,
                                            const FragmentPlace& at, float scale) {
  constexpr int kFragRows = 16, kFragCols = 8;
  if (masking == TileMasking::kPartial) {
    flex_scores_impl</*kCallMask=*/true, /*kBound=*/true>(s, mask, score_mod, at, scale);
    return;
  }
  // Rows past seqlen_q (zero-filled Q, never stored) still must not reach a mod.
  const bool inside =
      at.row0 + kMTiles * kFragRows <= at.seqlen_q && at.key0 + kNTiles * kFragCols <= at.seqlen_k;
  if (inside) {
    flex_scores_impl</*kCallMask=*/false, /*kBound=*/false>(s, mask, score_mod, at, scale);
  } else {
    flex_scores_impl</*kCallMask=*/false, /*kBound=*/true>(s, mask, score_mod, at, scale);
  }
}

}  // namespace flashcore::detail
