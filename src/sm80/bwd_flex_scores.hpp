// The flex backward's per-step decisions and elementwise math (bwd_flex_kernel.cuh): which query
// blocks a key block walks and how each is masked (the two-level mask of common/block_walk.hpp,
// seen from the keys' side), and P / G of a key-major warp tile with the forward's mods.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/block_walk.hpp"
#include "common/flex_score_grad.hpp"
#include "common/flex_scores.hpp"
#include "common/key_block_rows.hpp"
#include "common/online_softmax.hpp"
#include "flashcore/flex/block_mask_layout.hpp"
#include "flashcore/flex/builtin_mods.hpp"
#include "sm80/bwd_params.hpp"
#include "sm80/mainloop.hpp"

namespace flashcore::sm80 {

// The query rows that can see any key of [key_begin, key_end): a window's range (the built-in
// mask's other parts only hide keys inside it), else every row. Not with a BlockMask, whose full
// blocks the window does not bound.
template <typename Mask>
__device__ __forceinline__ RowRange<int> flex_rows_seeing_keys(const Mask& mask, int key_begin,
                                                               int key_end, int seqlen_q) {
  if constexpr (std::is_same_v<Mask, flex::BuiltinMask>) {
    const RowRange<int64_t> rows =
        rows_seeing_keys(mask.window, int64_t{key_begin}, int64_t{key_end});
    return {static_cast<int>(rows.begin), static_cast<int>(rows.end)};
  } else {
    (void)mask, (void)key_begin, (void)key_end;
    return {0, seqlen_q};
  }
}

// One query block's row of a BlockMask: its lists start at offset of kv_indices and
// full_kv_indices, num_partial and num_full entries long.
struct BlockMaskRow {
  int64_t offset;
  int num_partial, num_full;
};

__device__ __forceinline__ BlockMaskRow block_mask_row(const flex::BlockMask& m, int b, int h,
                                                       int q_block) {
  const int q_block_size = static_cast<int>(m.q_block_size);
  const int kv_block_size = static_cast<int>(m.kv_block_size);
  const int mq = (static_cast<int>(m.seqlen_q) + q_block_size - 1) / q_block_size;
  const int64_t mk = (static_cast<int>(m.seqlen_k) + kv_block_size - 1) / kv_block_size;
  const int64_t row =
      ((m.batch == 1 ? 0 : int64_t{b}) * m.heads + (m.heads == 1 ? 0 : h)) * mq + q_block;
  return {
      row * mk, detail::listed_blocks(m.kv_num_blocks[row], mk),
      m.full_kv_num_blocks != nullptr ? detail::listed_blocks(m.full_kv_num_blocks[row], mk) : 0};
}

// How the BlockMask lists KV block kv_block for query block q_block of (b, h): kSkip (not at all),
// kPartial or kFull. Every thread of the CTA calls it (its lists are scanned cooperatively, one
// entry per thread, and the answers meet in two barrier reductions), so the walk reads no
// transposed lists and needs no workspace: O(listed blocks) reads per query block, from L2.
__device__ __forceinline__ detail::TileMasking block_mask_listing(const flex::BlockMask& m, int b,
                                                                  int h, int q_block,
                                                                  int kv_block) {
  const BlockMaskRow row = block_mask_row(m, b, h, q_block);
  bool partial = false, full = false;
  for (int j = static_cast<int>(threadIdx.x); j < row.num_partial + row.num_full;
       j += static_cast<int>(blockDim.x)) {
    const bool in_partial = j < row.num_partial;
    const int32_t index = in_partial ? m.kv_indices[row.offset + j]
                                     : m.full_kv_indices[row.offset + j - row.num_partial];
    if (index == kv_block) {
      partial |= in_partial;
      full |= !in_partial;
    }
  }
  if (__syncthreads_or(full)) return detail::TileMasking::kFull;
  return __syncthreads_or(partial) ? detail::TileMasking::kPartial : detail::TileMasking::kSkip;
}

// Whether the BlockMask lists KV block kv_block for query block q_block of (b, h) at all (as
// block_mask_listing() != kSkip), read by one thread alone: deterministic mode asks it of many
// key blocks at once, one per thread, so each thread scans the row's lists itself (the same
// entries for every thread, so the reads are broadcasts). A block listed twice counts once, as
// the walk runs it once.
__device__ __forceinline__ bool block_mask_lists(const flex::BlockMask& m, int b, int h,
                                                 int q_block, int kv_block) {
  const BlockMaskRow row = block_mask_row(m, b, h, q_block);
  for (int j = 0; j < row.num_partial; ++j) {
    if (m.kv_indices[row.offset + j] == kv_block) return true;
  }
  for (int j = 0; j < row.num_full; ++j) {
    if (m.full_kv_indices[row.offset + j] == kv_block) return true;
  }
  return false;
}

// Where a warp's key-major tile sits in its sequence: keys key0 + mt * 16 + lane / 4 (+ 8), query
// rows row0 + nt * 8 + 2 * (lane % 4) (+ 1).
struct KeyMajorPlace {
  int b, h;
  int row0, key0;
  int seqlen_q, seqlen_k;
  int lane;
};

// P^T and G of a key-major warp tile, in place, as bwd_mainloop.hpp's probabilities() with the
// forward's mods: x = visible ? score_mod(s * scale) * log2(e) : -inf (the flex forward's
// common/flex_scores.hpp, element for element), P = exp2(x - LSE * log2(e)), G = P * slope (the
// score_mod's derivative, common/flex_score_grad.hpp) in fp16 pairs. visible: inside the
// sequence, and mask_mod where kCallMask (partial tiles). kIdentity: the score_mod changes nothing,
// so x is one multiply and G = P.
template <bool kCallMask, bool kIdentity, typename Mask, typename ScoreMod, int kM, int kN>
__device__ __forceinline__ void flex_probabilities(const Mask& mask, const ScoreMod& score_mod,
                                                   const KeyMajorPlace& at, float scale,
                                                   const float* lse_log2, float (&s)[kM][kN][4],
                                                   __half2 (&g)[kM][kN][2]) {
  const float scale_log2 = scale * kLog2e;
#pragma unroll
  for (int nt = 0; nt < kN; ++nt) {
    const int col = nt * kMmaN + 2 * (at.lane % 4);
    const float2 lse = *reinterpret_cast<const float2*>(lse_log2 + col);
#pragma unroll
    for (int mt = 0; mt < kM; ++mt) {
      float slope[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int q = at.row0 + col + (e & 1);
        const int kv = at.key0 + mt * kMmaM + at.lane / 4 + 8 * (e >> 1);
        bool visible = q < at.seqlen_q && kv < at.seqlen_k;
        if constexpr (kCallMask) visible = visible && mask(at.b, at.h, q, kv);
        float x;
        slope[e] = 1.f;
        if constexpr (kIdentity) {
          x = s[mt][nt][e] * scale_log2;
        } else {
          x = visible ? detail::ScoreModGrad<ScoreMod>::apply(score_mod, s[mt][nt][e] * scale, at.b,
                                                              at.h, q, kv, &slope[e]) *
                            kLog2e
                      : 0.f;
        }
        if (!visible) x = -INFINITY;
        s[mt][nt][e] = fast_exp2(x - ((e & 1) ? lse.y : lse.x));
      }
      g[mt][nt][0] = __floats2half2_rn(s[mt][nt][0] * slope[0], s[mt][nt][1] * slope[1]);
      g[mt][nt][1] = __floats2half2_rn(s[mt][nt][2] * slope[2], s[mt][nt][3] * slope[3]);
    }
  }
}

// flex_probabilities with its two switches resolved at run time: one code path per combination,
// the warp's (uniform) choice.
template <typename Mask, typename ScoreMod, int kM, int kN>
__device__ __forceinline__ void flex_probabilities(bool call_mask, bool identity, const Mask& mask,
                                                   const ScoreMod& score_mod,
                                                   const KeyMajorPlace& at, float scale,
                                                   const float* lse_log2, float (&s)[kM][kN][4],
                                                   __half2 (&g)[kM][kN][2]) {
  if (call_mask) {
    if (identity) {
      flex_probabilities<true, true>(mask, score_mod, at, scale, lse_log2, s, g);
    } else {
      flex_probabilities<true, false>(mask, score_mod, at, scale, lse_log2, s, g);
    }
  } else if (identity) {
    flex_probabilities<false, true>(mask, score_mod, at, scale, lse_log2, s, g);
  } else {
    flex_probabilities<false, false>(mask, score_mod, at, scale, lse_log2, s, g);
  }
}

}  // namespace flashcore::sm80
