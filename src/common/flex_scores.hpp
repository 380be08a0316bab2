// The element level of the flex kernels' two-level mask, on the mma C fragments of
// common/online_softmax.hpp (sm80's mma.sync and each warp's part of an sm90 wgmma accumulator
// are laid out alike): raw dot products in, log2-domain scores for the online softmax out,
//   x = visible ? score_mod(s * scale, b, h, q, kv) * log2(e) : -inf.
// visible is "inside the sequences" for a full tile, and also mask_mod for a partial one; a full
// tile away from the sequences' ends runs no test at all. score_mod and mask_mod are called only
// for pairs inside the sequences, so a mod may index per-token arrays without bounds checks.
#pragma once

#include <cmath>
#include <type_traits>
#include <utility>

#include "common/block_walk.hpp"
#include "common/flex_builtin.hpp"
#include "common/online_softmax.hpp"

namespace flashcore::detail {

// A score_mod that can say at run time that it changes nothing (BuiltinScoreMod::is_identity).
template <typename ScoreMod, typename = void>
struct HasIsIdentity : std::false_type {};
template <typename ScoreMod>
struct HasIsIdentity<ScoreMod, std::void_t<decltype(std::declval<const ScoreMod&>().is_identity())>>
    : std::true_type {};

// The visible pairs of a tile, one bit per element of the warp's fragment: bit
// (half * kNTiles + nt) * 2 + e of word mt; kCallMask: ask the mask_mod too (partial tiles), not
// only the sequences' ends. A kernel computes them before S = Q K^T, while the S accumulators are
// not yet live, so the mask's loads and integer math do not compete with them for registers.
// kInside: the whole fragment lies inside the sequences, so the mask is called on every element
// without a test. Called behind a test per element, each call is its own conditional code: the
// compiler can share nothing among them, and a mask that reads a per-token array (documents from
// ids) loaded both ids for every element instead of once per row and once per column.
template <bool kCallMask, bool kInside, typename Mask, int kMTiles, int kNTiles>
__device__ __forceinline__ void element_visibility(const Mask& mask, const FragmentPlace& at,
                                                   uint32_t (&bits)[kMTiles]) {
  static_assert(kNTiles * 4 <= 32, "a word holds one m16 tile's elements of a thread");
  constexpr int kFragRows = 16, kFragCols = 8;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    uint32_t word = 0;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = at.row0 + mt * kFragRows + at.lane / 4 + 8 * half;
      const int q = at.query_of(row), h = at.head_of(row);
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int kv = at.key0 + nt * kFragCols + 2 * (at.lane % 4) + e;
          bool visible;
          if constexpr (kInside) {
            visible = !kCallMask || mask(at.b, h, q, kv);
          } else {
            // Pairs outside the sequences never reach the mask.
            visible = row < at.rows() && kv < at.seqlen_k;
            if constexpr (kCallMask) visible = visible && mask(at.b, h, q, kv);
          }
          word |= static_cast<uint32_t>(visible) << ((half * kNTiles + nt) * 2 + e);
        }
      }
    }
    bits[mt] = word;
  }
}

// The visible elements of a tile walked as `masking` (kSkip never gets here), as bits: mask_mod
// for a partial tile (the built-in mask by ranges and ids, flex_builtin.hpp); for a full one only
// the sequences' ends, and nothing to test inside them.
template <typename Mask, int kMTiles, int kNTiles>
__device__ __forceinline__ void visible_elements(TileMasking masking, const Mask& mask,
                                                 const FragmentPlace& at,
                                                 uint32_t (&bits)[kMTiles]) {
  constexpr int kFragRows = 16, kFragCols = 8;
  // The same for every thread of the warp (row0 and key0 are the warp's), so no branch diverges.
  const bool inside =
      at.row0 + kMTiles * kFragRows <= at.rows() && at.key0 + kNTiles * kFragCols <= at.seqlen_k;
  if (masking == TileMasking::kPartial) {
    if constexpr (std::is_same_v<Mask, flex::BuiltinMask>) {
      builtin_visibility<kMTiles, kNTiles>(mask, at, bits);
    } else if (inside) {
      element_visibility</*kCallMask=*/true, /*kInside=*/true, Mask, kMTiles, kNTiles>(mask, at,
                                                                                       bits);
    } else {
      element_visibility</*kCallMask=*/true, /*kInside=*/false, Mask, kMTiles, kNTiles>(mask, at,
                                                                                        bits);
    }
  } else if (inside) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) bits[mt] = ~0u;
  } else {
    element_visibility</*kCallMask=*/false, /*kInside=*/false, Mask, kMTiles, kNTiles>(mask, at,
                                                                                       bits);
  }
}

// bits: visible_elements' (bit (half * kNTiles + nt) * 2 + e of word mt). kIdentity: the
// score_mod is known to change nothing, so a score is one multiply, as in the dense kernel.
// kAllVisible: every element of the fragment is visible, so score_mod is called on each without a
// test. Behind a test per element each call is its own conditional code, and nothing the calls
// share is shared: a score_mod reading bias[h] loaded it once per element (on sm90 also its
// captures, b and h, from the tile state in shared memory).
template <bool kIdentity, bool kAllVisible, typename ScoreMod, int kMTiles, int kNTiles>
__device__ __forceinline__ void flex_scores_impl(float (&s)[kMTiles][kNTiles][4],
                                                 const uint32_t (&bits)[kMTiles],
                                                 const ScoreMod& score_mod, const FragmentPlace& at,
                                                 float scale) {
  constexpr int kFragRows = 16, kFragCols = 8;
  const float scale_log2 = scale * kLog2e;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = at.row0 + mt * kFragRows + at.lane / 4 + 8 * half;
      const int q = at.query_of(row), h = at.head_of(row);
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int kv = at.key0 + nt * kFragCols + 2 * (at.lane % 4) + e;
          float& x = s[mt][nt][2 * half + e];
          const bool visible = (bits[mt] >> ((half * kNTiles + nt) * 2 + e)) & 1u;
          if constexpr (kIdentity) {
            x = visible ? x * scale_log2 : -INFINITY;
          } else if constexpr (kAllVisible) {
            x = score_mod(x * scale, at.b, h, q, kv) * kLog2e;
          } else {
            x = visible ? score_mod(x * scale, at.b, h, q, kv) * kLog2e : -INFINITY;
          }
        }
      }
    }
  }
}

// Whether every element of the warp's fragment is visible (a full tile inside the sequences: all
// but the diagonal and the tails), the same answer in every lane so the path does not diverge.
template <int kMTiles>
__device__ __forceinline__ bool warp_all_visible(const uint32_t (&bits)[kMTiles], int used_bits) {
  const uint32_t used = used_bits >= 32 ? ~0u : (1u << used_bits) - 1u;
  bool all = true;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) all = all && (bits[mt] & used) == used;
  return __all_sync(~0u, all);
}

// The built-in score_mod's scores, last step: log2(e) on visible elements and -inf on the others
// (bits: visible_elements').
template <int kMTiles, int kNTiles>
__device__ __forceinline__ void builtin_to_log2(float (&s)[kMTiles][kNTiles][4],
                                                const uint32_t (&bits)[kMTiles]) {
  if (warp_all_visible(bits, kNTiles * 4)) {  // no select to make (the sm90 steps say why)
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
        for (int r = 0; r < 4; ++r) s[mt][nt][r] *= kLog2e;
      }
    }
    return;
  }
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const bool visible = (bits[mt] >> (((r / 2) * kNTiles + nt) * 2 + r % 2)) & 1u;
        s[mt][nt][r] = visible ? s[mt][nt][r] * kLog2e : -INFINITY;
      }
    }
  }
}

// The built-in score_mod's scores (flex_builtin.hpp) on a tile of one head (its rows are query
// rows): scale, the parts' passes with terms bound to the head, then builtin_to_log2.
template <int kMTiles, int kNTiles>
__device__ __forceinline__ void builtin_flex_scores(float (&s)[kMTiles][kNTiles][4],
                                                    const uint32_t (&bits)[kMTiles],
                                                    const BuiltinScoreTerms& terms,
                                                    const FragmentPlace& at, float scale) {
  constexpr int kFragRows = 16, kFragCols = 8;
  const auto each = [&](auto&& fn) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          fn(s[mt][nt][r], at.row0 + mt * kFragRows + at.lane / 4 + 8 * (r / 2),
             at.key0 + nt * kFragCols + 2 * (at.lane % 4) + r % 2);
        }
      }
    }
  };
  each([&](float& x, int, int) { x *= scale; });
  terms.apply(each);
  builtin_to_log2(s, bits);
}

// The same on a packed decode tile (FragmentPlace), whose rows are different heads: each row binds
// its own head's terms, every step. Its own function, and in its own kernel for the built-in mods
// (sm80/flex_kernel.cuh's kMayPack): beside the one-head passes in one kernel, it made the
// unpacked decode 4-6% slower (another code layout); binding every row per step in place of
// those passes made it 30% slower (the binding's loads sit on each step's critical path).
template <int kMTiles, int kNTiles>
__device__ __forceinline__ void packed_builtin_flex_scores(float (&s)[kMTiles][kNTiles][4],
                                                           const uint32_t (&bits)[kMTiles],
                                                           const flex::BuiltinScoreMod& score_mod,
                                                           const FragmentPlace& at, float scale) {
  constexpr int kFragRows = 16, kFragCols = 8;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = at.row0 + mt * kFragRows + at.lane / 4 + 8 * half;
      const int q = at.query_of(row);
      // fn(score, q, kv) on this row's elements of the thread's.
      const auto each = [&](auto&& fn) {
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            fn(s[mt][nt][2 * half + e], q, at.key0 + nt * kFragCols + 2 * (at.lane % 4) + e);
          }
        }
      };
      each([&](float& x, int, int) { x *= scale; });
      // A padding row (past the group) binds the tile's first head: it is hidden anyway.
      BuiltinScoreTerms::bind(score_mod, row < at.rows() ? at.head_of(row) : at.h).apply(each);
    }
  }
  builtin_to_log2(s, bits);
}

// The scores of one warp's fragment; bits: visible_elements' (one code path per kind of
// score_mod: more paths made ptxas spill at hd128).
template <typename ScoreMod, int kMTiles, int kNTiles>
__device__ __forceinline__ void flex_scores(float (&s)[kMTiles][kNTiles][4],
                                            const uint32_t (&bits)[kMTiles],
                                            const ScoreMod& score_mod, const FragmentPlace& at,
                                            float scale) {
  bool identity = false;
  if constexpr (HasIsIdentity<ScoreMod>::value) identity = score_mod.is_identity();
  if (identity) {
    flex_scores_impl</*kIdentity=*/true, false>(s, bits, score_mod, at, scale);
  } else if constexpr (std::is_same_v<ScoreMod, flex::BuiltinScoreMod>) {
    if (at.packed_heads == 0) {
      builtin_flex_scores(s, bits, BuiltinScoreTerms::bind(score_mod, at.h), at, scale);
    } else {
      packed_builtin_flex_scores(s, bits, score_mod, at, scale);
    }
  } else if (warp_all_visible(bits, kNTiles * 4)) {
    flex_scores_impl<false, /*kAllVisible=*/true>(s, bits, score_mod, at, scale);
  } else {
    flex_scores_impl<false, /*kAllVisible=*/false>(s, bits, score_mod, at, scale);
  }
}

}  // namespace flashcore::detail
