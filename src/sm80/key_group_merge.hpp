// Key groups (SmallGridTileConfig): the kKeyGroups warps that own the same query rows each ran the
// online softmax over their own key slices. Their states merge like split-KV partials, but in
// registers and shared memory: with M = max_g m_g and c_g = exp2((m_g - M) * factor),
// sum = sum_g c_g * sum_g' and O = sum_g c_g * O_g, all still unnormalized, so the epilogue that
// follows is the one of a single warp.
#pragma once

#include "sm80/kernel_traits.hpp"
#include "sm80/mainloop.hpp"
#include "sm80/softmax.hpp"

namespace flashcore::sm80 {

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
inline constexpr int kKeyGroupMergeBytes =
    (Traits::kKeyGroups - 1) * Traits::kRowWarps* static_cast<int>(sizeof(KeyGroupState<Traits>));

// Called by every warp of the CTA (it holds two CTA barriers). Warps of key groups 1.. publish
// their states into `smem` (the CTA's whole buffer: Q and K/V are no longer read once every warp
// passed the first barrier), and the warps of group 0 fold them into theirs, then wait for each
// other, since the epilogue stages O through the Q tile that the states overlap. Warps without
// rows carry the empty state (max -inf, sum 0, O 0), which merges as weight 0.
template <typename Traits>
__device__ __forceinline__ void merge_key_groups(char* smem, int row_warp, int key_group, int lane,
                                                 float factor,
                                                 OnlineSoftmax<Traits::kWarpMTiles>& softmax,
                                                 OutFrag<Traits>& o) {
  static_assert(kKeyGroupMergeBytes<Traits> <= Traits::kSmemBytes,
                "the merge fits in the CTA's shared memory");
  using State = KeyGroupState<Traits>;
  State* states = reinterpret_cast<State*>(smem);  // [key_group - 1][row_warp]
  __syncthreads();                                 // every warp is done reading Q and K/V
  if (key_group > 0) {
    State& mine = states[(key_group - 1) * Traits::kRowWarps + row_warp];
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
  if (key_group > 0) return;
#pragma unroll 1
  for (int g = 1; g < Traits::kKeyGroups; ++g) {
    const State& other = states[(g - 1) * Traits::kRowWarps + row_warp];
#pragma unroll
    for (int mt = 0; mt < Traits::kWarpMTiles; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const float mine_max = softmax.row_max[mt][half];
        const float other_max = other.row_max[mt * 2 + half][lane];
        const float new_max = fmaxf(mine_max, other_max);
        // As in OnlineSoftmax::update: a row no group has seen a key of keeps max -inf, and
        // subtracting 0 then gives exp2(-inf) = 0 weights instead of NaN.
        const float base = new_max == -INFINITY ? 0.f : new_max * factor;
        const float mine_weight = fast_exp2(fmaf(mine_max, factor, -base));
        const float other_weight = fast_exp2(fmaf(other_max, factor, -base));
        softmax.row_max[mt][half] = new_max;
        softmax.row_sum[mt][half] = softmax.row_sum[mt][half] * mine_weight +
                                    other.row_sum[mt * 2 + half][lane] * other_weight;
#pragma unroll
        for (int dt = 0; dt < Traits::kOutNTiles; ++dt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& x = o[mt][dt][2 * half + e];
            x = x * mine_weight +
                other.o[(mt * Traits::kOutNTiles + dt) * 4 + 2 * half + e][lane] * other_weight;
          }
        }
      }
    }
  }
  // Named barrier 1 (0 is __syncthreads) over group 0's warps only: groups 1.. have returned.
  asm volatile("bar.sync 1, %0;" ::"n"(Traits::kRowWarps * kWarpSize) : "memory");
}

}  // namespace flashcore::sm80
