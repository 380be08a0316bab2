// TileShape::kAuto's rule among the small-grid tiles, for the problems the persistent kernel
// leaves to them (sm90_fwd.cu): the table of measured choices a tuner would rewrite. Host only.
#pragma once

#include <cstdint>

#include "flashcore/attention.hpp"
#include "sm80/fwd_plan.hpp"

namespace flashcore::sm90::small_grid {

// What the rule knows of one problem: the CTAs of each tile's grid (before any split) and
// whether each tile runs here (built for this head dim and dtype, shared memory fits).
struct TileGrids {
  int64_t large_ctas = 0;   // the sm80 backend's large tile (128 rows; 64 at hd256)
  int64_t small_ctas = 0;   // 32-row tiles
  int64_t medium_ctas = 0;  // 64-row tiles: kMedium's grid, and kCtaPair's in CTA pairs
  bool small_runs = false;
  bool medium_runs = false;
  bool cta_pair_runs = false;
  int num_splits = 0;  // AttentionParams::num_splits
};

// The large tile while its grid fills the GPU. Otherwise the small tile (four times the large
// grid, keys split across warps) if that grid is one wave at most. If it is more, a Hopper tile
// where those run (hd64): kMedium while its grid (twice the large grid) is one wave at most, else
// kCtaPair (four times the large grid in CTAs, up to four small CTAs per SM); elsewhere the small
// tile up to two waves (sm80::small_tile_wins). Measured on the H100 (docs/perf.md v8, v11):
// within one wave the small tile's 32-row CTAs win (B1 H8 S512: 6.4 vs 7.9 us for kMedium's 64
// CTAs, which leave half the SMs idle); past it kMedium wins (B1 H12 S512: 8.2 vs 11.2 us, B1 H8
// S1024: 11.8 vs 16.5); past one wave of its own the pair does (B1 H32 S512: 10.8 vs 13.0 us, B1
// H8 S2048: 27.0 vs 33.0). The pair splits the keys itself, so a caller's split count keeps
// kMedium. kLarge means none of the small-grid tiles: the sm80 backend's large tile.
inline TileShape choose_tile(const TileGrids& g, int64_t sm_count) {
  if (g.large_ctas < sm_count && !(g.small_runs && g.small_ctas <= sm_count)) {
    const bool pair = g.medium_ctas > sm_count && g.num_splits <= 1;
    if (pair && g.cta_pair_runs) return TileShape::kCtaPair;
    if (!pair && g.medium_runs) return TileShape::kMedium;
  }
  return sm80::small_tile_wins(g.large_ctas, g.small_ctas, g.small_runs, sm_count)
             ? TileShape::kSmall
             : TileShape::kLarge;
}

}  // namespace flashcore::sm90::small_grid
