// The flex kernel's steps for MainloopMma::run_steps: the two-level mask and the score_mod on a
// consumer warpgroup's S accumulator. Each warp's part of the m64 x kBlockN accumulator is the
// m16 x kBlockN fragment of common/flex_scores.hpp (shared with sm80), whose visible_elements
// gives the visibility bits, in halves of 64 keys, one 32-bit word each; the scores are written
// through the tensor here (flex_scores.hpp's meaning).
//   - begin(): after the S GEMM of a step is issued (so the mask's loads and integer math run
//     under the tensor cores), read the step's record (FlexStep, left by the producer with the K
//     stage) and compute which elements are visible: none for a step that is not for this
//     warpgroup's rows or lies past the keys, only the sequences' ends for a full tile, mask_mod
//     per element for a partial one (the built-in mask by per-row key ranges and document ids,
//     common/flex_builtin.hpp). A dense walk's tile is classified here by the mask's
//     block_visibility for this warpgroup's 64 rows. A paired step (BlockMasks of 64-key blocks,
//     flex_load.hpp) holds two blocks, one per half, each with its own first key.
//   - score(): x = visible ? score_mod(s * scale) * log2(e) : -inf, so exp_factor() is 1. Without
//     a score_mod (and a positive scale) scores stay raw dot products and the softmax folds
//     scale * log2(e) into its exp2, as in the dense kernel: a full tile inside the sequences then
//     costs nothing here, and a partial one a select per element. The built-in score_mod runs
//     as passes over the fragment, bound to the tile once (common/flex_builtin.hpp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/flex_scores.hpp"
#include "flashcore/flex/mod_traits.hpp"
#include "sm90/epilogue.hpp"
#include "sm90/flex_load.hpp"
#include "sm90/kernel_traits.hpp"

namespace flashcore::sm90 {

// kPaired: steps of two 64-key blocks (flex_load.hpp), each half with its own first key.
template <typename Traits, typename Mask, typename ScoreMod, bool kPaired = false>
struct FlexSteps {
  static constexpr int kHalves = 2;
  static constexpr int kHalfKeys = Traits::kBlockN / kHalves;
  static constexpr int kHalfTiles = kHalfKeys / 8;  // m16n8 tiles per half
  static_assert(kHalfTiles * 4 <= 32, "a half's elements fit one visibility word");

  struct Step {
    uint32_t bits[kHalves][1];
    int key0[kPaired ? kHalves : 1];  // each half's first key, or the tile's
  };
  // The first key of half h of a step.
  __device__ static int half_key0(const Step& step, int h) {
    if constexpr (kPaired) {
      return step.key0[h];
    } else {
      return step.key0[0] + h * kHalfKeys;
    }
  }

  // What the steps of one tile need, per consumer warpgroup in shared memory (written by its
  // first thread at the tile's start): the loop keeps O, S and P in registers and has none to
  // spare for these, so they are read where used.
  struct TileState {
    Mask mask;  // bound to the sequence
    ScoreMod score_mod;
    int b, h;
    int row0;  // the tile's first row, in the sequence's indices
    int seqlen_q, seqlen_k;
    detail::BuiltinScoreTerms terms;  // the built-in score_mod bound to (sequence, h); else unused
  };
  static constexpr bool kBuiltinScoreMod = std::is_same_v<ScoreMod, flex::BuiltinScoreMod>;
  __device__ static detail::BuiltinScoreTerms bind_terms(const ScoreMod& score_mod, int h) {
    if constexpr (kBuiltinScoreMod) {
      return detail::BuiltinScoreTerms::bind(score_mod, h);
    } else {
      (void)score_mod, (void)h;
      return {};
    }
  }

  const int* records;  // FlexStep per K stage, then the paired steps' second words (shared memory)
  const TileState& tile;
  int warpgroup;
  const float& scale;  // in parameter space
  // No score_mod and scale > 0: raw scores, exp_factor() = scale * log2(e). Kept in registers (the
  // kernel's parameters give them), not in the tile state: score() and exp_factor() run right after
  // an S GEMM retires, where a shared-memory load sat on every step's critical path.
  bool fold_scale;
  float factor;  // exp_factor()
  // ALiBi alone (alibi_columns_for): scores in units shifted by a constant per row (alibi_score).
  bool alibi_columns;

  // Whether the score_mod is the built-in ALiBi and nothing else (no bias table, no softcap): the
  // one built-in whose bias a constant per row turns into a term per column.
  __device__ static bool alibi_columns_for(const ScoreMod& score_mod) {
    if constexpr (kBuiltinScoreMod) {
      return score_mod.alibi.slopes != nullptr && score_mod.bias.table == nullptr &&
             !(score_mod.softcap.cap > 0.f);
    } else {
      (void)score_mod;
      return false;
    }
  }

  // This thread's index among the consumers, read anew (Epilogue::thread_index_here says why).
  __device__ static int consumer_thread() { return Epilogue<Traits>::thread_index_here(); }
  __device__ detail::FragmentPlace place(int key0) const {
    const int thread = consumer_thread();
    return {tile.b,        tile.h,     tile.row0 + thread / 32 * 16, key0, tile.seqlen_q,
            tile.seqlen_k, thread % 32};
  }

  __device__ __forceinline__ Step begin(int /*i*/, int stage) const {
    const int record = records[stage];
    Step step;
    const int second = kPaired ? records[Traits::kStages + stage] : 0;
    step.key0[0] = FlexStep::tile(record) * (kPaired ? kHalfKeys : Traits::kBlockN);
    if constexpr (kPaired) step.key0[kHalves - 1] = FlexStep::tile(second) * kHalfKeys;
    if (FlexStep::all_visible(record) && (!kPaired || FlexStep::all_visible(second))) {
#pragma unroll
      for (int half = 0; half < kHalves; ++half) step.bits[half][0] = ~0u;
      return step;
    }
    const int wg_row0 = tile.row0 + warpgroup * kRowsPerWarpgroup;
    const bool rows_here = wg_row0 < tile.seqlen_q;  // else this warpgroup has no rows here
    if constexpr (kPaired) {
      // Each half has its own word (its 64-key block and each warpgroup's masking of it); nothing
      // is visible in a half that is not for this warpgroup's rows or lies past the keys (an
      // empty half is the block past the keys).
#pragma unroll
      for (int half = 0; half < kHalves; ++half) {
        const int masking = FlexStep::masking(half == 0 ? record : second, warpgroup);
        if (masking == FlexStep::kSkip || !rows_here || step.key0[half] >= tile.seqlen_k) {
          step.bits[half][0] = 0u;
        } else {
          const detail::TileMasking tile_masking = masking == FlexStep::kFull
                                                       ? detail::TileMasking::kFull
                                                       : detail::TileMasking::kPartial;
          if constexpr (std::is_same_v<Mask, flex::BuiltinMask>) {
            // A partial half inside one document (its word says so) reads no document id.
            if (tile_masking == detail::TileMasking::kPartial) {
              uint32_t span[1][1];  // the half's 64 keys
              detail::builtin_visibility_spans<1, kHalfTiles, 1>(
                  tile.mask, place(step.key0[half]), span,
                  FlexStep::one_document(half == 0 ? record : second));
              step.bits[half][0] = span[0][0];
              continue;
            }
          }
          detail::visible_elements<Mask, 1, kHalfTiles>(tile_masking, tile.mask,
                                                        place(step.key0[half]), step.bits[half]);
        }
      }
      return step;
    } else {
      int masking = FlexStep::masking(record, warpgroup);
      if (masking == FlexStep::kClassify) {  // a dense walk's tile, for this warpgroup's rows
        const int kv_end = min(step.key0[0] + Traits::kBlockN, tile.seqlen_k);
        const int q_end = min(wg_row0 + kRowsPerWarpgroup, tile.seqlen_q);
        switch (flex::block_visibility(tile.mask, tile.b, tile.h, wg_row0, q_end, step.key0[0],
                                       kv_end)) {
          case BlockVisibility::kEmpty:
            masking = FlexStep::kSkip;
            break;
          case BlockVisibility::kFull:
            masking = FlexStep::kFull;
            break;
          default:
            masking = FlexStep::kPartial;
            break;
        }
      }
      if (masking == FlexStep::kSkip || !rows_here || step.key0[0] >= tile.seqlen_k) {
#pragma unroll
        for (int half = 0; half < kHalves; ++half) step.bits[half][0] = 0u;
        return step;
      }
      if constexpr (std::is_same_v<Mask, flex::BuiltinMask>) {
        // The built-in mask's rows once for both halves: each row's key range is the step's, not
        // the half's (common/flex_builtin.hpp).
        if (masking == FlexStep::kPartial) {
          detail::builtin_visibility_spans<1, kHalfTiles, kHalves>(
              tile.mask, place(step.key0[0]), step.bits, FlexStep::one_document(record));
          return step;
        }
      }
      const detail::TileMasking tile_masking =
          masking == FlexStep::kFull ? detail::TileMasking::kFull : detail::TileMasking::kPartial;
#pragma unroll
      for (int half = 0; half < kHalves; ++half) {
        detail::visible_elements<Mask, 1, kHalfTiles>(
            tile_masking, tile.mask, place(half_key0(step, half)), step.bits[half]);
      }
      return step;
    }
  }

  // Register i of the accumulator (AccumulatorCoords): n tile i / 4, row half (i / 2) % 2, column
  // i % 2; its bit in its key half's word is visible_elements' (row half * kHalfTiles + n tile
  // within the half) * 2 + column. Indexed through the tensor with constant indices only, so S
  // stays in registers (a pointer into it put S in local memory).
  __device__ static constexpr int bit_of(int i) {
    return ((i / 2) % 2 * kHalfTiles + (i / 4) % kHalfTiles) * 2 + i % 2;
  }

  // Whether every element of the step is visible, in every lane of the warp (flex_scores.hpp's
  // warp_all_visible): the steps that skip the per-element test.
  __device__ static bool all_visible(const Step& step) {
    uint32_t words[kHalves];
#pragma unroll
    for (int half = 0; half < kHalves; ++half) words[half] = step.bits[half][0];
    return detail::warp_all_visible(words, kHalfTiles * 4);
  }

  template <typename ScoreTensor>
  __device__ __forceinline__ void score(const Step& step, ScoreTensor& s) const {
    constexpr int kPerHalf = kHalfTiles * 4;
    if (fold_scale) {
#pragma unroll
      for (int half = 0; half < kHalves; ++half) {
        const uint32_t bits = step.bits[half][0];
        if (bits == ~0u) continue;
#pragma unroll
        for (int j = 0; j < kPerHalf; ++j) {
          const int i = half * kPerHalf + j;
          s(i) = (bits >> bit_of(i)) & 1u ? s(i) : -INFINITY;
        }
      }
      return;
    }
    // x = visible ? score_mod(s * scale) * log2(e) : -inf (common/flex_scores.hpp's meaning).
    const int thread = consumer_thread();
    const int q0 = tile.row0 + thread / 32 * 16 + thread % 32 / 4;
    // Element i's key: its half's first key, then its n tile within the half.
    const int kv_lane = 2 * (thread % 4);
    const auto kv_of = [&](int i) {
      return half_key0(step, i / kPerHalf) + kv_lane + 8 * ((i / 4) % kHalfTiles) + i % 2;
    };
    if constexpr (kBuiltinScoreMod) {
      if (alibi_columns) {
        alibi_score(step, s, thread);
        return;
      }
      // The built-in score_mod in passes over every element (common/flex_builtin.hpp), then the
      // visibility select.
      const auto each = [&](auto&& fn) {
#pragma unroll
        for (int i = 0; i < kHalves * kPerHalf; ++i) {
          fn(s(i), q0 + 8 * ((i / 2) % 2), kv_of(i));
        }
      };
      each([&](float& x, int, int) { x *= scale; });
      const detail::BuiltinScoreTerms terms = tile.terms;
      terms.apply(each);
      // A step whose elements are all visible (all but the diagonal and the tails) skips the
      // select: a bit test and a select per element, a third of the ALiBi pass's instructions.
      if (all_visible(step)) {
#pragma unroll
        for (int i = 0; i < kHalves * kPerHalf; ++i) s(i) *= kLog2e;
      } else {
#pragma unroll
        for (int i = 0; i < kHalves * kPerHalf; ++i) {
          const bool visible = (step.bits[i / kPerHalf][0] >> bit_of(i)) & 1u;
          s(i) = visible ? s(i) * kLog2e : -INFINITY;
        }
      }
    } else {
      // A functor of one's own, called per element (flex_scores.hpp's flex_scores_impl says why a
      // step whose elements are all visible calls it without a test). What the calls share is
      // read from the tile state once per step, not once per element.
      const ScoreMod score_mod = tile.score_mod;
      const int b = tile.b, h = tile.h;
      if (all_visible(step)) {
#pragma unroll
        for (int i = 0; i < kHalves * kPerHalf; ++i) {
          s(i) = score_mod(s(i) * scale, b, h, q0 + 8 * ((i / 2) % 2), kv_of(i)) * kLog2e;
        }
      } else {
#pragma unroll
        for (int i = 0; i < kHalves * kPerHalf; ++i) {
          const bool visible = (step.bits[i / kPerHalf][0] >> bit_of(i)) & 1u;
          const int q = q0 + 8 * ((i / 2) % 2);
          s(i) = visible ? score_mod(s(i) * scale, b, h, q, kv_of(i)) * kLog2e : -INFINITY;
        }
      }
    }
  }
  __device__ float exp_factor() const { return factor; }

  // ALiBi alone (alibi_columns). Its score is s * scale - slope * |kv - (q + offset)|, and the
  // softmax of a row does not change when every score of the row moves by the same constant. So
  // row q's scores are kept as x' = x + slope * log2(e) * (q - row0), and finalize() takes that
  // off the LSE. A step whose keys all lie at or left of every row's diagonal (kv <= q + offset:
  // all of a causal walk's steps but the diagonal's) then has
  //   x' = (s * scale + slope * (kv - row0 - offset)) * log2(e),
  // one FFMA an element with a term per column that the thread's two rows share. The exact form
  // costs a distance, its absolute value and an int-to-float conversion an element, and the
  // conversions share the quarter-rate pipe with the softmax's exp2. The other steps (the
  // diagonal's, keys right of it) take the exact form plus the shift. The shift is at most
  // slope * log2(e) * 127 and the column term is large only for keys far left of the diagonal,
  // whose exp2 is 0 either way, so no precision is lost where the weights are.
  template <typename ScoreTensor>
  __device__ __forceinline__ void alibi_score(const Step& step, ScoreTensor& s, int thread) const {
    constexpr int kPerHalf = kHalfTiles * 4;
    const float slope = tile.terms.slope * kLog2e;
    const float scale_log2 = scale * kLog2e;
    const int offset = tile.terms.offset;
    const int warp_row0 = tile.row0 + thread / 32 * 16;
    const int kv_lane = 2 * (thread % 4);
    int last_key = half_key0(step, 0);
#pragma unroll
    for (int half = 1; half < kHalves; ++half) last_key = max(last_key, half_key0(step, half));
    last_key += kHalfKeys - 1;
    if (last_key <= warp_row0 + offset) {
      float column0[kHalves];  // slope * (kv - row0 - offset) at the thread's first key of a half
#pragma unroll
      for (int half = 0; half < kHalves; ++half) {
        column0[half] =
            slope * static_cast<float>(half_key0(step, half) + kv_lane - (tile.row0 + offset));
      }
#pragma unroll
      for (int i = 0; i < kHalves * kPerHalf; ++i) {
        const float key_in_half = static_cast<float>(8 * ((i / 4) % kHalfTiles) + i % 2);
        s(i) = fmaf(s(i), scale_log2, fmaf(slope, key_in_half, column0[i / kPerHalf]));
      }
    } else {
      const int q0 = warp_row0 + thread % 32 / 4;
#pragma unroll
      for (int i = 0; i < kHalves * kPerHalf; ++i) {
        const int q = q0 + 8 * ((i / 2) % 2);
        const int kv = half_key0(step, i / kPerHalf) + kv_lane + 8 * ((i / 4) % kHalfTiles) + i % 2;
        const int distance = kv - (q + offset);
        const int shifted_bias = (q - tile.row0) - (distance < 0 ? -distance : distance);
        s(i) = fmaf(s(i), scale_log2, slope * static_cast<float>(shifted_bias));
      }
    }
    if (!all_visible(step)) {
#pragma unroll
      for (int i = 0; i < kHalves * kPerHalf; ++i) {
        const bool visible = (step.bits[i / kPerHalf][0] >> bit_of(i)) & 1u;
        s(i) = visible ? s(i) : -INFINITY;
      }
    }
  }

  // The rows' normalizers and natural-log LSE once the walk is done, with the row's sink (log2
  // units; -inf: none) in the denominator. Under alibi_columns the scores were shifted per row
  // (alibi_score): the sink moves with them, and the LSE is shifted back.
  template <typename Softmax>
  __device__ __forceinline__ void finalize(const Softmax& softmax, float sink_log2,
                                           float (&inv_sum)[1][2], float (&lse)[1][2]) const {
    if (!alibi_columns) {
      if (sink_log2 == -INFINITY) {
        softmax.template finalize</*kFast=*/false>(factor, inv_sum, lse);
      } else {
        softmax.finalize_with_sink(factor, sink_log2 / factor, inv_sum, lse);
      }
      return;
    }
    const int thread = consumer_thread();
    const int row_in_tile = thread / 32 * 16 + thread % 32 / 4;  // the thread's first row
    float shift[1][2], sinks[1][2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      shift[0][half] = tile.terms.slope * kLog2e * static_cast<float>(row_in_tile + 8 * half);
      sinks[0][half] = sink_log2 + shift[0][half];  // factor is 1 under a score_mod
    }
    softmax.finalize_with_sink(factor, sinks, inv_sum, lse);
#pragma unroll
    for (int half = 0; half < 2; ++half) lse[0][half] -= shift[0][half] * kLn2;
  }
};

}  // namespace flashcore::sm90
