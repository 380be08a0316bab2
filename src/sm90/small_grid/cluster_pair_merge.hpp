// The CtaSplit policy of the FA2-class schedule (src/sm80/kernel_traits.hpp) for the cluster-pair
// tile (CtaPairTileConfig, tile_table.hpp): the two CTAs of a cluster ran the online softmax for
// the same query rows over the two halves of the keys. They merge like split-KV partials (see
// src/sm80/key_group_merge.hpp for the algebra), through distributed shared memory and without a
// workspace:
// each thread pushes the half of its O columns that the partner CTA stores, with its rows' max and
// sum, into the partner's exchange area; after a cluster barrier each CTA merges and stores its
// own half. Thread t of one CTA holds exactly the fragment positions of thread t of the other
// (same tile, same warp roles), so the exchange is element-wise.
#pragma once

#include <cstdint>
#include <cute/arch/cluster_sm90.hpp>
#include <cute/arch/util.hpp>

#include "common/online_softmax.hpp"
#include "sm80/kernel_traits.hpp"

// src/sm90 is compiled for sm_90a alone (src/CMakeLists.txt): clusters exist only from sm_90 on.
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "src/sm90/small_grid/cluster_pair_merge.hpp needs sm_90a"
#endif

namespace flashcore::sm90::small_grid {

struct ClusterPairMerge {
  static constexpr int kClusterCtas = 2;

  // The exchange area, apart from the Q and K/V tiles this CTA may still be reading when the
  // partner's half arrives: per thread, half of its O columns plus the two rows' max and sum of
  // each m16 tile.
  static constexpr int exchange_floats(int warp_m_tiles, int out_n_tiles) {
    return warp_m_tiles * (out_n_tiles / kClusterCtas * 4 + 4);
  }

  // At kernel entry: the partner may write into this CTA's shared memory only once this CTA runs.
  // The arrive here is matched by the first wait in merge.
  __device__ __forceinline__ static void on_kernel_entry() { cute::cluster_arrive_relaxed(); }

  // Called by every thread of both CTAs (it waits at two cluster barriers). o holds this thread's
  // kNTiles n8 tiles of O; on return `softmax` holds the pair's merged max and this lane's share
  // of the merged sum, and `merged` the n8 tiles [rank * kNTiles / 2, +kNTiles / 2),
  // unnormalized.
  template <typename Traits, int kNTiles>
  __device__ __forceinline__ static void merge(
      char* exchange_smem, int tid, int rank, float factor,
      OnlineSoftmax<Traits::kWarpMTiles>& softmax,
      const float (&o)[Traits::kWarpMTiles][kNTiles][4],
      float (&merged)[Traits::kWarpMTiles][kNTiles / 2][4]);
};

template <typename Traits, int kNTiles>
__device__ __forceinline__ void ClusterPairMerge::merge(
    char* exchange_smem, int tid, int rank, float factor,
    OnlineSoftmax<Traits::kWarpMTiles>& softmax, const float (&o)[Traits::kWarpMTiles][kNTiles][4],
    float (&merged)[Traits::kWarpMTiles][kNTiles / 2][4]) {
  constexpr int kHalf = kNTiles / 2;
  constexpr int kMTiles = Traits::kWarpMTiles;
  static_assert(Traits::kClusterCtas == 2 && kNTiles % 2 == 0, "a pair splits the columns evenly");
  static_assert(Traits::kExchangeFloats == kMTiles * (kHalf * 4 + 4), "exchange area size");
  // [float4 index][thread]: each float4 store of a warp covers 512 contiguous bytes.
  float4* const local = reinterpret_cast<float4*>(exchange_smem);
  const uint32_t local_addr = cute::cast_smem_ptr_to_uint(local + tid);
  uint32_t remote_addr;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote_addr)
               : "r"(local_addr), "r"(rank ^ 1));
  auto push = [&](int index, float4 value) {
    asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(
                     remote_addr + index * Traits::kThreads * 16),
                 "f"(value.x), "f"(value.y), "f"(value.z), "f"(value.w)
                 : "memory");
  };
  // Selects instead of o[mt][rank * kHalf + j]: a runtime index would put o in local memory.
  const bool upper = rank != 0;  // this CTA stores the upper half of the columns
  auto tile_of = [&](int mt, int j, bool upper_half) {
    const float(&lo)[4] = o[mt][j];
    const float(&hi)[4] = o[mt][kHalf + j];
    return upper_half ? make_float4(hi[0], hi[1], hi[2], hi[3])
                      : make_float4(lo[0], lo[1], lo[2], lo[3]);
  };
  cute::cluster_wait();  // the partner runs (on_kernel_entry)
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    push(mt * (kHalf + 1), make_float4(softmax.row_max[mt][0], softmax.row_max[mt][1],
                                       softmax.row_sum[mt][0], softmax.row_sum[mt][1]));
#pragma unroll
    for (int j = 0; j < kHalf; ++j) {
      push(mt * (kHalf + 1) + 1 + j, tile_of(mt, j, !upper));
    }
  }
  // Release the pushes, acquire the partner's: after this, each CTA reads only its own area.
  cute::cluster_arrive();
  cute::cluster_wait();
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    const float4 state = local[mt * (kHalf + 1) * Traits::kThreads + tid];
    const float other_max[2] = {state.x, state.y};
    const float other_sum[2] = {state.z, state.w};
    float mine_w[2], other_w[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float new_max = fmaxf(softmax.row_max[mt][half], other_max[half]);
      // A row neither CTA saw a key of keeps max -inf: subtracting 0 then gives weights 0, not NaN.
      const float base = new_max == -INFINITY ? 0.f : new_max * factor;
      mine_w[half] = fast_exp2(fmaf(softmax.row_max[mt][half], factor, -base));
      other_w[half] = fast_exp2(fmaf(other_max[half], factor, -base));
      softmax.row_max[mt][half] = new_max;
      softmax.row_sum[mt][half] =
          softmax.row_sum[mt][half] * mine_w[half] + other_sum[half] * other_w[half];
    }
#pragma unroll
    for (int j = 0; j < kHalf; ++j) {
      const float4 x = local[(mt * (kHalf + 1) + 1 + j) * Traits::kThreads + tid];
      const float4 m = tile_of(mt, j, upper);
      merged[mt][j][0] = fmaf(m.x, mine_w[0], x.x * other_w[0]);
      merged[mt][j][1] = fmaf(m.y, mine_w[0], x.y * other_w[0]);
      merged[mt][j][2] = fmaf(m.z, mine_w[1], x.z * other_w[1]);
      merged[mt][j][3] = fmaf(m.w, mine_w[1], x.w * other_w[1]);
    }
  }
}

}  // namespace flashcore::sm90::small_grid
