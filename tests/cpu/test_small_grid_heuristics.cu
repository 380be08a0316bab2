// kAuto's rule among the sm90 backend's small-grid tiles (src/sm90/small_grid/heuristics.hpp) on
// the H100's 132 SMs: the choices docs/perf.md measured (v5, v8, v11) must stay what it picks.
#include <gtest/gtest.h>

#include "sm90/small_grid/heuristics.hpp"

namespace flashcore::sm90::small_grid {
namespace {

constexpr int64_t kH100Sms = 132;

// B1 H`heads` S`seqlen` at hd64: 128-row large tiles, 32-row small ones, 64-row medium ones.
TileGrids hd64_grids(int64_t heads, int64_t seqlen, int num_splits = 0) {
  TileGrids g;
  g.large_ctas = heads * ((seqlen + 127) / 128);
  g.small_ctas = heads * ((seqlen + 31) / 32);
  g.medium_ctas = heads * ((seqlen + 63) / 64);
  g.small_runs = g.medium_runs = true;
  g.cta_pair_runs = num_splits <= 1;
  g.num_splits = num_splits;
  return g;
}

TEST(SmallGridHeuristics, PicksTheMeasuredTileAtHd64) {
  // One wave of small CTAs: the small tile (B1 H8 S512, 128 CTAs; 6.4 us vs 7.9 for medium).
  EXPECT_EQ(choose_tile(hd64_grids(8, 512), kH100Sms), TileShape::kSmall);
  // Past it, medium while its own grid is one wave (B1 H12 S512: 8.2 vs 11.2 us; B1 H8 S1024).
  EXPECT_EQ(choose_tile(hd64_grids(12, 512), kH100Sms), TileShape::kMedium);
  EXPECT_EQ(choose_tile(hd64_grids(8, 1024), kH100Sms), TileShape::kMedium);
  // Past that, the cluster pair (B1 H32 S512: 10.8 vs 13.0 us; B1 H8 S2048: 27.0 vs 33.0).
  EXPECT_EQ(choose_tile(hd64_grids(32, 512), kH100Sms), TileShape::kCtaPair);
  EXPECT_EQ(choose_tile(hd64_grids(8, 2048), kH100Sms), TileShape::kCtaPair);
  // A caller's split count keeps medium: the pair splits the keys itself.
  EXPECT_EQ(choose_tile(hd64_grids(8, 2048, /*num_splits=*/3), kH100Sms), TileShape::kMedium);
  // A large grid that fills the GPU: none of them (the sm80 backend's large tile).
  EXPECT_EQ(choose_tile(hd64_grids(8, 3072), kH100Sms), TileShape::kLarge);
}

TEST(SmallGridHeuristics, WithoutHopperTilesTheSmallTileUpToTwoWaves) {
  // hd128: 128-row large tiles and 32-row small ones, no medium or pair tile.
  TileGrids g;
  g.small_runs = true;
  g.large_ctas = 64;   // B1 H8 S1024
  g.small_ctas = 256;  // under two waves
  EXPECT_EQ(choose_tile(g, kH100Sms), TileShape::kSmall);
  g.small_ctas = 265;  // past two waves
  EXPECT_EQ(choose_tile(g, kH100Sms), TileShape::kLarge);
  // A small tile that does not fit the device leaves the large one.
  g.small_ctas = 128;
  g.small_runs = false;
  EXPECT_EQ(choose_tile(g, kH100Sms), TileShape::kLarge);
}

}  // namespace
}  // namespace flashcore::sm90::small_grid
