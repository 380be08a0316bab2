// The sm90 backend's small-grid tiles: the FA2-class schedule of src/sm80/fwd_kernel.cuh with
// Hopper's policies (src/sm80/kernel_traits.hpp says what each policy decides). They take the grids
// too small for the persistent kernel (sm90_fwd.cu) and are launch-bound, so every one of them
// waits for the previous grid and may be launched dependently (DependentLaunch). The tile sizes
// of the Hopper tiles live here; the small tile's are sm80's.
#pragma once

#include "sm80/kernel_traits.hpp"
#include "sm90/dependent_launch.hpp"
#include "sm90/small_grid/cluster_pair_merge.hpp"
#include "sm90/small_grid/warpgroup_mma.hpp"

namespace flashcore::sm90::small_grid {

// TileShape::kSmall: sm80's small-grid tile (32-row CTAs whose warps split each K/V tile by keys,
// mma.sync), launched dependently. On the H100 that takes B1 H8 S512 D64 from 5.3 to 4.5 us back
// to back (docs/perf.md v12).
template <int kHeadDim>
struct SmallTileConfig : sm80::SmallGridTileConfig<kHeadDim> {
  using GridDependency = DependentLaunch;
};

// TileShape::kMedium, hd64: the same CTA schedule, but 64-row CTAs whose four key groups are each a
// warpgroup of four row warps that issues wgmma (warpgroup_mma.hpp) instead of per-warp mma.sync.
// One m64n64k16 wgmma reads its K (or V) fragment from shared memory once for 64 rows, where
// mma.sync's ldmatrix reads it once per 16-row warp, and Hopper runs wgmma at about twice
// mma.sync's rate. wgmma's M is 64, so a CTA takes 64 rows: half the small tile's CTAs, each
// with twice the work. That wins once the small tile's grid is past one wave and loses below
// (heuristics.hpp; docs/perf.md v8). Four warpgroups, not two: at B1 H8 S1024 two (128-key KV
// steps) took 12.9 us against 11.8.
// 8 KiB Q + 2 stages x (32 KiB K + 32 KiB V) = 136 KiB; 16 warps, 118 registers (sm_90a).
template <int kHeadDim>
struct MediumTileConfig;
template <>
struct MediumTileConfig<64> {
  static constexpr int kBlockM = 64, kBlockN = 64, kRowWarps = 4, kKeyGroups = 4, kStages = 2,
                       kMinCtasPerSm = 1;
  using Mma = WarpgroupMma;
  using GridDependency = DependentLaunch;
};

// TileShape::kCtaPair, hd64, for grids past what MediumTileConfig holds in one wave: one
// warpgroup per CTA (its only key group), and the two CTAs of a cluster split each 64-row query
// tile's keys, merging their softmax states through distributed shared memory
// (cluster_pair_merge.hpp). Against the four-warpgroup CTA this halves each CTA's serial KV walk
// without a 16-warp merge, and a small CTA (40 KiB, 128 threads; 50 KiB with the exchange area)
// lets four of them share an SM, so e.g. B1 H8 S2048's 512 CTAs run as one wave (docs/perf.md
// v11). A two-stage ring: three stages fit only three CTAs per SM, four stages two.
template <int kHeadDim>
struct CtaPairTileConfig;
template <>
struct CtaPairTileConfig<64> {
  static constexpr int kBlockM = 64, kBlockN = 64, kRowWarps = 4, kKeyGroups = 1, kStages = 2,
                       kMinCtasPerSm = 1;
  using Mma = WarpgroupMma;
  using CtaSplit = ClusterPairMerge;
  using GridDependency = DependentLaunch;
};

// The head dims that have the Hopper tiles (kMedium, kCtaPair); the small tile has sm80's.
inline constexpr int kHopperTileHeadDim = 64;

template <typename Element>
using CtaPairTraits =
    sm80::KernelTraits<Element, kHopperTileHeadDim, CtaPairTileConfig<kHopperTileHeadDim>>;

}  // namespace flashcore::sm90::small_grid
