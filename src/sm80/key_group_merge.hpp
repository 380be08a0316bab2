// Key groups (SmallGridTileConfig): the kKeyGroups warps that own the same query rows each ran the
// online softmax over their own key slices. Their states merge like split-KV partials, in shared
// memory: with M = max_g m_g and c_g = exp2((m_g - M) * factor), sum = sum_g c_g * sum_g and
// O = sum_g c_g * O_g, still unnormalized.
//
// Every warp of the CTA takes part: warp (row_warp, key_group) merges and then stores only its
// share of the columns, n8 tiles [key_group * kMergeNTiles, +kMergeNTiles). On the launch-bound
// small grids this tail is on the critical path; one warp per row tile folding in every other
// group and storing all columns made it about a quarter of the kernel (B1 H8 S512, docs/perf.md
// v6).
#pragma once

#include "common/online_softmax.hpp"
#include "sm80/kernel_traits.hpp"
#include "sm80/mainloop.hpp"

namespace flashcore::sm80 {

template <typename Traits>
inline constexpr int kMergeNTiles = Traits::kOutNTiles / Traits::kKeyGroups;

// One warp's softmax state as it sits in shared memory: every value in fragment order with the
// lane index innermost, so each store and load of a warp touches 32 consecutive floats.
template <typename Traits>
struct KeyGroupState {
  static constexpr int kOutValues = Traits::kWarpMTiles * Traits::kOutNTiles * 4;
  static constexpr int kRowValues = Traits::kWarpMTiles * 2;
  float o[kOutValues][kWarpSize];
  float row_max[kRowValues][kWarpSize];
  float row_sum[kRowValues][kWarpSize];  // this lane's share, as OnlineSoftmax keeps it
};

template <typename Traits>
struct KeyGroupMerge {
  using State = KeyGroupState<Traits>;
  static constexpr int kStatesBytes =
      Traits::kKeyGroups * Traits::kRowWarps * static_cast<int>(sizeof(State));
  // The states go after the Q tile when they fit, so the epilogue can stage O in the Q tile while
  // other warps still read states; otherwise (hd256) they start at 0 and a barrier separates the
  // two.
  static constexpr bool kAfterQ = Traits::kQBytes + kStatesBytes <= Traits::kWorkBytes;
  static constexpr int kStatesOffset = kAfterQ ? Traits::kQBytes : 0;
  static_assert(kStatesOffset + kStatesBytes <= Traits::kWorkBytes,
                "the merge fits in the CTA's shared memory");
  static_assert(Traits::kOutNTiles % Traits::kKeyGroups == 0, "groups split the n8 tiles evenly");
};

// Called by every warp of the CTA (it holds two or three CTA barriers). On return `softmax` holds
// the merged max and this lane's share of the merged sum, and `merged` this warp's columns of the
// merged O. Warps without rows carry the empty state (max -inf, sum 0, O 0), which merges as
// weight 0.
template <typename Traits>
__device__ __forceinline__ void merge_key_groups(
    char* smem, int row_warp, int key_group, int lane, float factor,
    OnlineSoftmax<Traits::kWarpMTiles>& softmax, const OutFrag<Traits>& o,
    float (&merged)[Traits::kWarpMTiles][kMergeNTiles<Traits>][4]) {
  using Merge = KeyGroupMerge<Traits>;
  using State = typename Merge::State;
  constexpr int kGroups = Traits::kKeyGroups;
  State* states = reinterpret_cast<State*>(smem + Merge::kStatesOffset);  // [key_group][row_warp]
  __syncthreads();  // every warp is done reading Q and K/V
  {
    State& mine = states[key_group * Traits::kRowWarps + row_warp];
#pragma unroll
    for (int mt = 0; mt < Traits::kWarpMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        mine.row_max[mt * 2 + half][lane] = softmax.row_max[mt][half];
        mine.row_sum[mt * 2 + half][lane] = softmax.row_sum[mt][half];
      }
#pragma unroll
      for (int dt = 0; dt < Traits::kOutNTiles; ++dt) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
          mine.o[(mt * Traits::kOutNTiles + dt) * 4 + e][lane] = o[mt][dt][e];
      }
    }
  }
  __syncthreads();
  const int first_tile = key_group * kMergeNTiles<Traits>;
#pragma unroll
  for (int mt = 0; mt < Traits::kWarpMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float group_max[kGroups];
      float new_max = -INFINITY;
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        group_max[g] = states[g * Traits::kRowWarps + row_warp].row_max[mt * 2 + half][lane];
        new_max = fmaxf(new_max, group_max[g]);
      }
      // As in OnlineSoftmax::update: a row no group has seen a key of keeps max -inf, and
      // subtracting 0 then gives exp2(-inf) = 0 weights instead of NaN.
      const float base = new_max == -INFINITY ? 0.f : new_max * factor;
      float weight[kGroups];
      float sum = 0.f;
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        weight[g] = fast_exp2(fmaf(group_max[g], factor, -base));
        sum += states[g * Traits::kRowWarps + row_warp].row_sum[mt * 2 + half][lane] * weight[g];
      }
      softmax.row_max[mt][half] = new_max;
      softmax.row_sum[mt][half] = sum;
#pragma unroll
      for (int j = 0; j < kMergeNTiles<Traits>; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int value = (mt * Traits::kOutNTiles + first_tile + j) * 4 + 2 * half + e;
          float x = 0.f;
#pragma unroll
          for (int g = 0; g < kGroups; ++g)
            x = fmaf(states[g * Traits::kRowWarps + row_warp].o[value][lane], weight[g], x);
          merged[mt][j][2 * half + e] = x;
        }
      }
    }
  }
  if constexpr (!Merge::kAfterQ) __syncthreads();  // the epilogue stages O over the states
}

}  // namespace flashcore::sm80
